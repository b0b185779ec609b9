"""Throughput and latency of numbatok against its peers: same documents, same run, ids checked first.

    python benchmarks/bench.py                                   # gpt2, big.txt paragraphs
    python benchmarks/bench.py --tokenizers gpt2,roberta-base,bert-base-uncased --data big,udhr \\
        --latency --json results.json --png results.png

Every configuration runs in a fresh process: it builds its tokenizer, warms up twice on random
pseudo-words (so imports and JIT loading are not counted, and no corpus word is cached), then encodes the documents once (the "first pass": the
fastest peers cache words, so this is what a new corpus sees), compares every id with `tokenizers`
(a configuration that differs is reported and not timed), and re-encodes them --runs times (the
"warm" figure is the median). All outputs are arrays or the library's own batch result; special
tokens are not added. Peers that are not installed, or do not support the vocabulary, are skipped.

With --rounds N every configuration runs N times, the rounds interleaved (each round runs every
configuration once), and the table shows the median with the range: a shared machine's speed moves
by up to 2x between minutes, and interleaving spreads that over all configurations alike. Ratios are
medians of the ratios within each round. Every run prints the machine's memory latency at its start
and end (`memory_latency`): figures of runs in different states of a shared machine differ by up to
2-3x, and numbatok's more than its peers'.
"""
import argparse
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def find_corpus(arg):
    for c in [arg, os.environ.get("NUMBATOK_CORPUS"), os.path.join(ROOT, "..", "shared", "corpus"),
              os.path.join(ROOT, ".device-carry", "corpus")]:
        if c and os.path.isfile(os.path.join(c, "big.txt")):
            return c
    sys.exit("big.txt not found: pass --corpus DIR (a folder holding big.txt)")


def ten_mb_document(docs):
    """The documents joined by blank lines, repeated or cut to 10 MB: one long document."""
    text = "\n\n".join(docs)
    return (text * (10_000_000 // max(len(text), 1) + 1))[:10_000_000]


def load_docs(corpus, which, repeat):
    if which in ("big", "doc"):
        with open(os.path.join(corpus, "big.txt"), encoding="utf-8") as f:
            docs = f.read().split("\n\n")
        if which == "doc":  # one 10 MB document: the loop alone, without a per-document cost
            docs = [ten_mb_document(docs)]
    elif which in ("ja", "zh"):  # the UDHR's Japanese or Chinese translations, a row per line (~45 KB)
        with open(os.path.join(corpus, "udhr_multilingual.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        docs = [t for r in rows if r["lang"].split("-")[0] == which for t in r["text"].split("\n") if t]
    else:
        name = {"udhr": "udhr_multilingual.jsonl", "code": "code_and_markup.jsonl"}[which]
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            docs = [json.loads(line)["text"] for line in f]
    return docs * repeat


# ---- configurations: name -> prepare(tokenizer name, threads) -> run(docs) -> (flat ids, offsets) or lists ----

def _numbatok(device):
    def prepare(name, threads):
        import numbatok
        tok = numbatok.Tokenizer.from_pretrained(name, device=device)

        def run(docs):
            r = tok.encode_ragged(docs, add_special_tokens=False)
            return r.to_host() if device == "cuda" else r
        return run
    return prepare


def _numbatok_on_device(name, threads):
    import cupy
    import numbatok
    from numbatok.batch import Batch, to_batch
    tok = numbatok.Tokenizer.from_pretrained(name, device="cuda")
    staged = {}

    def stage(docs):
        if id(docs) not in staged:
            b = to_batch(docs)
            staged[id(docs)] = Batch(cupy.asarray(b.data), cupy.asarray(b.offsets)), docs  # (docs: ids stay unique)

    def run(docs):
        stage(docs)  # (outside the timing: `child` and `latency` stage their documents first)
        return tok.encode_ragged(staged[id(docs)][0], add_special_tokens=False)
    run.stage = stage
    return run


def _tokenizers(name, threads):
    from tokenizers import Tokenizer
    import numbatok
    ref = Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
    return lambda docs: ref.encode_batch(docs, add_special_tokens=False)


def _tiktoken(name, threads):
    import numbatok
    from numbatok.compat import to_tiktoken
    try:
        enc = to_tiktoken(numbatok.Tokenizer.from_pretrained(name, device="cpu"))
    except numbatok.UnsupportedComponentError:
        raise NotImplementedError("tiktoken has no such encoding") from None
    return lambda docs: enc.encode_ordinary_batch(docs, num_threads=threads)


def _gigatoken(name, threads):
    import gigatoken
    import numbatok
    spec = json.load(open(numbatok.tokenizer.resolve_path(name), encoding="utf-8"))
    if spec["model"].get("type") not in ("BPE", None):
        raise NotImplementedError("gigatoken encodes BPE vocabularies only")
    enc = gigatoken.Tokenizer(numbatok.tokenizer.resolve_path(name))
    return lambda docs: enc.encode_batch(docs)


def _fastokens(name, threads):
    import fastokens
    import numbatok
    enc = fastokens.Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
    return lambda docs: enc.encode_batch_flat(docs, add_special_tokens=False)


def _tokie(name, threads):
    import tokie
    import numbatok
    enc = tokie.Tokenizer.from_json(numbatok.tokenizer.resolve_path(name))
    return lambda docs: enc.encode_batch_flat(docs, add_special_tokens=False)


def _snaptokens(name, threads):
    import snaptokens
    import numbatok
    enc = snaptokens.Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
    return lambda docs: enc.encode_batch_flat(docs, add_special_tokens=False)


CONFIGS = {
    "numbatok cpu": _numbatok("cpu"),
    "numbatok cuda (list[str] -> host arrays)": _numbatok("cuda"),
    "numbatok cuda (bytes on device -> ids on device)": _numbatok_on_device,
    "tokenizers encode_batch": _tokenizers,
    "tiktoken encode_ordinary_batch": _tiktoken,
    "gigatoken encode_batch (awkward array)": _gigatoken,
    "fastokens encode_batch_flat (buffers)": _fastokens,
    "snaptokens encode_batch_flat (buffers)": _snaptokens,
    "tokie encode_batch_flat (arrays)": _tokie,
}


def to_flat(got):
    """Any configuration's output -> (flat int64 ids, int64 row offsets), for the exactness check."""
    if hasattr(got, "row_offsets"):
        got = got.to_host()  # ids left on the GPU are copied back for the check (not timed)
        return np.asarray(got.ids, np.int64), np.asarray(got.row_offsets, np.int64)
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], (bytes, bytearray, memoryview)):
        return np.frombuffer(got[0], np.uint32).astype(np.int64), np.frombuffer(got[1], np.uint64).astype(np.int64)
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], np.ndarray):  # (ids, row lengths)
        return got[0].astype(np.int64), np.concatenate(([0], np.cumsum(got[1]))).astype(np.int64)
    if type(got).__module__.startswith("awkward"):
        import awkward as ak
        return (ak.to_numpy(ak.flatten(got)).astype(np.int64),
                np.concatenate(([0], np.cumsum(ak.to_numpy(ak.num(got))))).astype(np.int64))
    rows = [e.ids if hasattr(e, "ids") else e for e in got]
    return (np.fromiter((i for r in rows for i in r), np.int64),
            np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64))


def _sync():
    if "cupy" in sys.modules:
        sys.modules["cupy"].cuda.Device().synchronize()


def child(args):
    """One configuration in a fresh process; prints one JSON line."""
    with open(args.child_docs, "rb") as f:
        docs = pickle.load(f)
    ref = np.load(args.child_ref)
    threads = os.cpu_count()
    out = {"config": args.child, "tokenizer": args.tokenizer, "data": args.child_data}
    try:
        run = CONFIGS[args.child](args.tokenizer, threads)
    except Exception as e:  # not installed, or the peer does not support this tokenizer.json
        out["skipped"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}"
        print(json.dumps(out))
        return
    try:
        pseudo = warm_up_text()
        run(pseudo)
        run(pseudo)  # (every word cached now: the code of that path is loaded too)
    except NotImplementedError as e:
        out["skipped"] = f"{type(e).__name__}: {e}"
        print(json.dumps(out))
        return
    nbytes = sum(len(d.encode()) for d in docs)
    getattr(run, "stage", lambda d: None)(docs)  # input that a configuration keeps on the device
    _sync()
    t0 = time.perf_counter()
    got = run(docs)
    _sync()
    first = time.perf_counter() - t0
    ids, offs = to_flat(got)
    if not (np.array_equal(ids, ref["ids"]) and np.array_equal(offs, ref["offsets"])):
        rows = np.flatnonzero([not np.array_equal(ids[offs[i]:offs[i + 1]], ref["ids"][ref["offsets"][i]:ref["offsets"][i + 1]])
                               for i in range(len(docs))]) if len(offs) == len(ref["offsets"]) else []
        out.update(exact=False, differing_rows=len(rows))
        print(json.dumps(out))
        return
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        run(docs)
        _sync()
        times.append(time.perf_counter() - t0)
    warm = float(np.median(times))
    out.update(exact=True, bytes=nbytes, first_pass_s=first, warm_s=warm, first_pass_MBps=nbytes / first / 1e6,
               warm_MBps=nbytes / warm / 1e6)
    if args.latency:
        out["latency_ms"] = latency(run, docs)
    print(json.dumps(out))


def warm_up_text():
    """About 600 KB of random pseudo-words in several scripts, then all-ASCII rows, rows of words of
    65-300 letters and one 836 KB row (over twice the segment size of a batch this size, so it is
    cut on any thread count), 2.7 MB in all: every code path and lazy import runs (and
    JIT-compiled code loads: all-ASCII and mixed batches, long documents cut into segments, the GPU's
    long-word step and its pinned copy of batches over 1 MB) before timing, yet hardly a word of any
    corpus is cached by it."""
    rng = np.random.default_rng(0)
    alphabets = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "абвгдеёжзийклмнопрстуфхцчшщыэюя",
                 "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年", "αβγδεζηθικλμνξοπρστυφχψω",
                 "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "あいうえおかきくけこさしすせそたちつてと", "0123456789", ".,;:!?'\"-()"]
    docs = []
    for _ in range(200):
        words = []
        for _ in range(200):
            a = alphabets[rng.integers(len(alphabets))]
            words.append("".join(a[i] for i in rng.integers(0, len(a), rng.integers(1, 12))))
        docs.append(" ".join(words))
    latin = alphabets[0]
    ascii_docs = [" ".join("".join(latin[i] for i in rng.integers(0, 52, rng.integers(1, 12))) for _ in range(200))
                  for _ in range(200)]
    long_docs = [" ".join("".join(latin[i] for i in rng.integers(0, 52, rng.integers(65, 300))) for _ in range(20))
                 for _ in range(300)]
    # (and a row that a per-character normalizer cannot map a character at a time: U+1D15E keeps a mark)
    return docs + ascii_docs + long_docs + [" ".join(ascii_docs * 3), "e\u0301 \U0001D15E x"]


def latency(run, docs):
    """Median wall time per call (ms) for batches of 1, 64 and 4096 documents and one 10 MB document."""
    res = {}
    for size in (1, 64, 4096):
        batch = (docs * (size // max(len(docs), 1) + 1))[:size]
        getattr(run, "stage", lambda d: None)(batch)
        calls = max(3, min(200, int(2e6 // max(sum(len(d) for d in batch), 1))))
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            run(batch)
            _sync()
            ts.append(time.perf_counter() - t0)
        res[f"batch {size}"] = float(np.median(ts)) * 1e3
    big = [ten_mb_document(docs)]
    getattr(run, "stage", lambda d: None)(big)
    ts = []
    for _ in range(3):  # (the first call of a new size allocates for it, in every library)
        _sync()
        t0 = time.perf_counter()
        run(big)
        _sync()
        ts.append(time.perf_counter() - t0)
    res["one 10 MB document"] = float(np.median(ts)) * 1e3
    return res


def memory_latency():
    """ns per dependent load of a random cycle through 1 MB and 16 MB (pointer chase): this shared
    machine's state, printed with every run. In runs where the 16 MB figure is high, numbatok's word
    cache (tables of several MB) loses more than the peers' smaller per-thread caches."""
    import numba

    @numba.njit
    def chase(nxt, steps):
        i = 0
        for _ in range(steps):
            i = nxt[i]
        return i

    rng = np.random.default_rng(0)
    out = {}
    for mb in (1, 16):
        n = (mb << 20) // 8
        perm = rng.permutation(n)
        nxt = np.empty(n, np.int64)
        nxt[perm] = np.roll(perm, 1)
        chase(nxt, 1000)
        t = time.perf_counter()
        chase(nxt, 1_000_000)
        out[f"{mb} MB"] = round((time.perf_counter() - t) * 1e3, 1)  # (ms per million loads = ns per load)
    return out


def versions():
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": platform.python_version()}
    for dist in ("numbatok", "numba", "numba-cuda", "numpy", "tokenizers", "tiktoken", "gigatoken", "fastokens",
                 "snaptokens", "tokie", "cupy-cuda13x", "cupy-cuda12x"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="gpt2")
    ap.add_argument("--data", default="big", help="comma-separated: big (big.txt paragraphs), doc (big.txt as one "
                    "10 MB document), udhr, code, ja, zh (UDHR lines)")
    ap.add_argument("--configs", help="comma-separated subset of: " + "; ".join(CONFIGS))
    ap.add_argument("--corpus")
    ap.add_argument("--repeat", type=int, default=1, help="documents repeated this many times")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="fresh processes per configuration, interleaved")
    ap.add_argument("--latency", action="store_true", help="also time batches of 1, 64, 4096 and one 10 MB document")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per configuration")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tokenizer", help=argparse.SUPPRESS)
    ap.add_argument("--child-docs", help=argparse.SUPPRESS)
    ap.add_argument("--child-ref", help=argparse.SUPPRESS)
    ap.add_argument("--child-data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    from tokenizers import Tokenizer
    import numbatok
    corpus = find_corpus(args.corpus)
    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    try:
        from numbatok.backends import gpu_available
        has_gpu = gpu_available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        configs = [c for c in configs if "cuda" not in c]
    machine = {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine(), "gpu": has_gpu,
               "memory latency ns, start": memory_latency()}
    print(f"{machine['cores']} cores, {machine['cpu']}, GPU: {has_gpu}; {versions()}; memory latency (ns per load) "
          f"{machine['memory latency ns, start']}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for data in args.data.split(","):
            docs = load_docs(corpus, data, args.repeat)
            docs_file = os.path.join(tmp, "docs.pkl")
            with open(docs_file, "wb") as f:
                pickle.dump(docs, f)
            nbytes = sum(len(d.encode()) for d in docs)
            for name in args.tokenizers.split(","):
                ref = Tokenizer.from_file(numbatok.tokenizer.resolve_path(name)).encode_batch(docs, add_special_tokens=False)
                ids, offs = to_flat(ref)
                ref_file = os.path.join(tmp, "ref.npz")
                np.savez(ref_file, ids=ids, offsets=offs)
                print(f"\n{name} on {data}: {len(docs)} documents, {nbytes / 1e6:.2f} MB", flush=True)
                runs = {config: [] for config in configs}
                for rnd in range(args.rounds):
                    for config in configs:
                        if runs[config] and not runs[config][-1].get("exact"):
                            continue  # skipped, failed or not exact: once is enough
                        cmd = [sys.executable, os.path.abspath(__file__), "--child", config, "--tokenizer", name,
                               "--child-docs", docs_file, "--child-ref", ref_file, "--child-data", data,
                               "--runs", str(args.runs)] + (["--latency"] if args.latency else [])
                        try:
                            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                            line = [x for x in p.stdout.splitlines() if x.startswith("{")]
                            row = json.loads(line[-1]) if line else {"config": config, "tokenizer": name, "data": data,
                                                                     "error": (p.stderr or "no output")[-300:]}
                        except subprocess.TimeoutExpired:
                            row = {"config": config, "tokenizer": name, "data": data, "error": f"over {args.timeout} s"}
                        runs[config].append(row)
                        print(f"  {'' if args.rounds == 1 else f'[{rnd + 1}/{args.rounds}] '}{describe(row)}", flush=True)
                rows += [combine(runs[config]) for config in configs]
    machine["memory latency ns, end"] = memory_latency()
    print(f"memory latency at the end (ns per load): {machine['memory latency ns, end']}")
    print(table(rows))
    if args.latency:
        print(latency_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "versions": versions(), "repeat": args.repeat, "runs": args.runs,
                       "rounds": args.rounds, "rows": rows}, f, indent=1)
    if args.png:
        chart(rows, args.png, machine)
    return 0


def combine(runs):
    """One row for a configuration's rounds: the medians, and each round's figures (`rounds`) for the
    ratios and ranges. A round that failed or differed stands for the configuration."""
    bad = [r for r in runs if not r.get("exact")]
    if bad:
        return bad[0]
    row = dict(runs[0])
    for key in ("first_pass_MBps", "warm_MBps", "first_pass_s", "warm_s"):
        row[key] = float(np.median([r[key] for r in runs]))
    if row.get("latency_ms"):
        row["latency_ms"] = {k: float(np.median([r["latency_ms"][k] for r in runs])) for k in row["latency_ms"]}
    if len(runs) > 1:
        row["rounds"] = [{"first_pass_MBps": r["first_pass_MBps"], "warm_MBps": r["warm_MBps"]} for r in runs]
    return row


def _ratio(r, base, key):
    # median of the ratios within each round (rows of one run share their rounds' order)
    a = [x[key] for x in r.get("rounds", [r])]
    b = [x[key] for x in base.get("rounds", [base])]
    return float(np.median([x / y for x, y in zip(a, b)])) if len(a) == len(b) else r[key] / base[key]


def _figure(r, key):
    if "rounds" not in r:
        return f"{r[key]:.1f}"
    v = [x[key] for x in r["rounds"]]
    d = 1 if max(v) < 10 else 0
    return f"{r[key]:.1f} ({min(v):.{d}f}-{max(v):.{d}f})"


def describe(r):
    if "skipped" in r:
        return f"{r['config']}: skipped ({r['skipped']})"
    if "error" in r:
        return f"{r['config']}: failed: {r['error']}"
    if not r.get("exact"):
        return f"{r['config']}: ids differ from tokenizers on {r.get('differing_rows', '?')} documents: NOT TIMED"
    return f"{r['config']}: first pass {r['first_pass_MBps']:.1f} MB/s, warm {r['warm_MBps']:.1f} MB/s"


def table(rows):
    out = ["", "| tokenizer | data | configuration | first pass MB/s | warm MB/s | x tokenizers (first / warm) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        if not r.get("exact"):
            continue
        base = next((b for b in rows if b.get("exact") and b["config"].startswith("tokenizers")
                     and b["tokenizer"] == r["tokenizer"] and b["data"] == r["data"]), None)
        ratio = (f"{_ratio(r, base, 'first_pass_MBps'):.1f} / {_ratio(r, base, 'warm_MBps'):.1f}" if base else "-")
        out.append(f"| {r['tokenizer']} | {r['data']} | {r['config']} | {_figure(r, 'first_pass_MBps')} | "
                   f"{_figure(r, 'warm_MBps')} | {ratio} |")
    return "\n".join(out)


def _ms(x):
    """ms with three significant digits down to the microsecond (a one-row call is a few us)."""
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def latency_table(rows):
    keys = ["batch 1", "batch 64", "batch 4096", "one 10 MB document"]
    out = ["", "| tokenizer | data | configuration | " + " | ".join(f"{k} (ms)" for k in keys) + " |",
           "|---|---|---|" + "---|" * len(keys)]
    for r in rows:
        if r.get("latency_ms"):
            out.append(f"| {r['tokenizer']} | {r['data']} | {r['config']} | "
                       + " | ".join(_ms(r['latency_ms'][k]) for k in keys) + " |")
    return "\n".join(out)


def chart(rows, path, machine):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart")
        return
    ok = [r for r in rows if r.get("exact")]
    groups = sorted({(r["tokenizer"], r["data"]) for r in ok})
    configs = list(dict.fromkeys(r["config"] for r in ok))
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.2 + 0.5 * len(configs) * len(groups)), squeeze=False)
    for ax, (tok, data) in zip(axes[:, 0], groups):
        sub = {r["config"]: r for r in ok if r["tokenizer"] == tok and r["data"] == data}
        names = [c for c in configs if c in sub]
        y = np.arange(len(names))
        ax.barh(y - 0.2, [sub[c]["first_pass_MBps"] for c in names], 0.4, label="first pass")
        ax.barh(y + 0.2, [sub[c]["warm_MBps"] for c in names], 0.4, label="warm")
        ax.set_yticks(y, names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(f"{tok}, {data}: MB/s ({machine['cores']} cores, GPU: {machine['gpu']})", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
