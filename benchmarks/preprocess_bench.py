"""Files -> token shards: `numbatok preprocess` against its peers fed the same files, ids checked first.

    python benchmarks/preprocess_bench.py                     # big.txt paragraphs, as .txt and .jsonl
    python benchmarks/preprocess_bench.py --repeat 4 --json out.json

The documents (big.txt's paragraphs, `--repeat` times) are written once as a .txt file (a document per
line, so a paragraph's newlines become spaces) and as a .jsonl file ({"text": paragraph}). Every
configuration runs in a fresh process: it loads its tokenizer and warms up on files of random
pseudo-words (not timed: imports, JIT-compiled code loaded), then turns the file into ids on disk (.npy, as `preprocess --format npy` writes them)
once, a first pass, and again, warm (the file is in the page cache both times). A peer is what a user
would write around it: read the lines, `json.loads` each record, encode in 16 MB batches, write the
ids. Every configuration's ids are compared with `tokenizers` on the same documents before its time
counts. Throughput is input file bytes per second.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (corpus, warm-up text and peers shared with the main benchmark)

BATCH_BYTES = 16 << 20


def write_inputs(folder, docs):
    """(path of the .txt, its documents), (path of the .jsonl, its documents)."""
    lines = [d.replace("\r", " ").replace("\n", " ") for d in docs]
    txt = os.path.join(folder, "docs.txt")
    with open(txt, "w", encoding="utf-8", newline="") as f:
        f.writelines(line + "\n" for line in lines)
    jsonl = os.path.join(folder, "docs.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs)
    return (txt, lines), (jsonl, docs)


def read_documents(path):
    """The peers' reader: a document per line (.txt), or json.loads per record (.jsonl)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        if path.endswith(".jsonl"):
            return [json.loads(line)["text"] for line in f]
        return [line[:-1] if line.endswith("\n") else line for line in f]


def batches(docs):
    out, size = [], 0
    for d in docs:
        out.append(d)
        size += len(d)
        if size >= BATCH_BYTES:
            yield out
            out, size = [], 0
    if out:
        yield out


def write_npy(prefix, parts):
    """Peers' writer: the ids as uint16 and the row offsets, what `--format npy` writes."""
    ids = np.concatenate([p[0] for p in parts]).astype(np.uint16)
    lengths = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(lengths.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    np.save(prefix + ".ids.npy", ids)
    np.save(prefix + ".offsets.npy", offsets)


def _peer(encode):
    """A peer's file -> shard run around a batch encoder returning bench.to_flat-able output."""
    def prepare(name):
        run_batch = encode(name)
        run_batch(bench.warm_up_text())

        def run(path, prefix):
            write_npy(prefix, [bench.to_flat(run_batch(b)) for b in batches(read_documents(path))])
        return run
    return prepare


def _numbatok(device):
    def prepare(name):
        import numbatok
        from numbatok import preprocess
        tok = numbatok.Tokenizer.from_pretrained(name, device=device)
        tok.encode_ragged(bench.warm_up_text())

        def run(path, prefix):
            opts = preprocess.Options(inputs=[path], output_prefix=prefix, fmt="npy", progress=False)
            with open(os.devnull, "w") as quiet:
                summary, = preprocess.preprocess(tok, tok.sha256, opts, out=quiet)
            for ext in (".ids.npy", ".offsets.npy"):  # one shard: its name without the shard suffix
                os.replace(preprocess.shard_stem(prefix, 0, 1) + ext, prefix + ext)
            return summary["stage_seconds"]
        return run
    return prepare


CONFIGS = {
    "numbatok preprocess (cpu)": _numbatok("cpu"),
    "numbatok preprocess (cuda)": _numbatok("cuda"),
    "gigatoken encode_batch + json.loads + np.save": _peer(lambda n: bench._gigatoken(n, os.cpu_count())),
    "fastokens encode_batch_flat + json.loads + np.save": _peer(lambda n: bench._fastokens(n, os.cpu_count())),
    "tokenizers encode_batch + json.loads + np.save": _peer(lambda n: bench._tokenizers(n, os.cpu_count())),
}


def child(args):
    out = {"config": args.child, "tokenizer": args.tokenizer, "input": os.path.basename(args.file)}
    try:
        run = CONFIGS[args.child](args.tokenizer)
    except Exception as e:  # not installed, no GPU, or the peer does not support this tokenizer.json
        out["skipped"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}"
        print(json.dumps(out))
        return
    ref = np.load(args.ref)
    size = os.path.getsize(args.file)
    # every reader, parser and writer loaded before timing, on files of pseudo-words
    for path, _ in write_inputs(args.out, bench.warm_up_text()[:200]):
        run(path, os.path.join(args.out, "warm-up"))
    times, stages = [], []
    for k in range(1 + args.runs):
        prefix = os.path.join(args.out, f"run{k}")
        t0 = time.perf_counter()
        stages.append(run(args.file, prefix))  # (numbatok: where its time went; peers: None)
        times.append(time.perf_counter() - t0)
        if k == 0:
            ids = np.load(prefix + ".ids.npy").astype(np.int64)
            offsets = np.load(prefix + ".offsets.npy")
            if not (np.array_equal(ids, ref["ids"]) and np.array_equal(offsets, ref["offsets"])):
                out["exact"] = False
                print(json.dumps(out))
                return
    warm = float(np.median(times[1:]))
    out.update(exact=True, bytes=size, first_pass_s=times[0], warm_s=warm,
               first_pass_MBps=size / times[0] / 1e6, warm_MBps=size / warm / 1e6)
    if stages[0] is not None:
        out.update(first_pass_stages_s=stages[0], last_run_stages_s=stages[-1])
    print(json.dumps(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--repeat", type=int, default=1, help="big.txt's paragraphs repeated this many times")
    ap.add_argument("--runs", type=int, default=2, help="warm runs after the first pass (median reported)")
    ap.add_argument("--configs", help="comma-separated subset of: " + "; ".join(CONFIGS))
    ap.add_argument("--formats", default="txt,jsonl", help="comma-separated: txt, jsonl")
    ap.add_argument("--corpus")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per configuration")
    ap.add_argument("--json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--ref", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)

    from tokenizers import Tokenizer
    import numbatok
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("preprocess needs pyarrow (pip install 'numbatok[arrow]'): nothing to measure here")
        return 0
    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    docs = bench.load_docs(bench.find_corpus(args.corpus), "big", args.repeat)
    ref_tok = Tokenizer.from_file(numbatok.tokenizer.resolve_path(args.tokenizer))
    print(f"{os.cpu_count()} cores; {bench.versions()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, texts in write_inputs(tmp, docs):
            if os.path.splitext(path)[1][1:] not in args.formats.split(","):
                continue
            ids, offsets = bench.to_flat(ref_tok.encode_batch(texts, add_special_tokens=False))
            ref = os.path.join(tmp, "ref.npz")
            np.savez(ref, ids=ids, offsets=offsets)
            print(f"\n{args.tokenizer}, {os.path.basename(path)}: {len(texts)} documents, "
                  f"{os.path.getsize(path) / 1e6:.1f} MB", flush=True)
            for config in configs:
                out = tempfile.mkdtemp(dir=tmp)
                cmd = [sys.executable, os.path.abspath(__file__), "--child", config, "--tokenizer", args.tokenizer,
                       "--file", path, "--ref", ref, "--out", out, "--runs", str(args.runs)]
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    line = [x for x in p.stdout.splitlines() if x.startswith("{")]
                    row = json.loads(line[-1]) if line else {"config": config, "input": os.path.basename(path),
                                                             "error": (p.stderr or "no output")[-300:]}
                except subprocess.TimeoutExpired:
                    row = {"config": config, "input": os.path.basename(path), "error": f"over {args.timeout} s"}
                rows.append(row)
                print("  " + bench.describe(row), flush=True)
                for when in ("first_pass", "last_run"):
                    if f"{when}_stages_s" in row:
                        print(f"    {when.replace('_', ' ')}: " + ", ".join(
                            f"{k} {v * 1e3:.1f} ms" for k, v in row[f"{when}_stages_s"].items()), flush=True)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "versions": bench.versions(), "repeat": args.repeat, "rows": rows},
                      f, indent=1)
    return 0


def table(rows):
    out = ["", "| input | configuration | first pass MB/s | warm MB/s | x gigatoken (first / warm) |", "|---|---|---|---|---|"]
    for r in rows:
        if not r.get("exact"):
            continue
        base = next((b for b in rows if b.get("exact") and b["config"].startswith("gigatoken")
                     and b["input"] == r["input"]), None)
        ratio = (f"{r['first_pass_MBps'] / base['first_pass_MBps']:.2f} / {r['warm_MBps'] / base['warm_MBps']:.2f}"
                 if base else "-")
        out.append(f"| {r['input']} | {r['config']} | {r['first_pass_MBps']:.1f} | {r['warm_MBps']:.1f} | {ratio} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
