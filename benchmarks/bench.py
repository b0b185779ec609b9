"""Throughput of numbatok against its peers, same documents, same run, ids checked before timing.

    python benchmarks/bench.py                       # gpt2, big.txt paragraphs x4, every device present
    python benchmarks/bench.py --repeat 1 --runs 3 --json results.json

Each configuration is timed on a first pass (what a fresh process sees; the fastest peers cache
words, so re-runs flatter them) and as the median of --runs warm re-runs. Every configuration's ids
are compared with `tokenizers` on all documents before it is timed; a mismatch is reported and the
row is not timed. Peers that are not installed are skipped.
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numbatok  # noqa: E402
from numbatok.backends import gpu_available  # noqa: E402


def find_corpus(arg):
    for c in [arg, os.environ.get("NUMBATOK_CORPUS"), os.path.join(HERE, "..", "..", "shared", "corpus"),
              os.path.join(HERE, "..", ".device-carry", "corpus")]:
        if c and os.path.isfile(os.path.join(c, "big.txt")):
            return c
    sys.exit("big.txt not found: pass --corpus DIR (a folder holding big.txt)")


def sync():
    if gpu_available():
        import cupy
        cupy.cuda.Device().synchronize()


def to_lists(r):
    return numbatok.RaggedEncoding(*(x.get() if hasattr(x, "get") else x for x in (r.ids, r.row_offsets))).to_list() \
        if hasattr(r, "row_offsets") else r


def configurations(name, cores):
    """(label, prepare() -> run(docs) -> ids as lists or RaggedEncoding)."""
    out = []

    def numbatok_list(device):
        def prepare():
            tok = numbatok.Tokenizer.from_pretrained(name, device=device)
            return lambda docs: tok.encode_ragged(docs, add_special_tokens=False).to_host() \
                if device == "cuda" else tok.encode_ragged(docs, add_special_tokens=False)
        return prepare

    out.append(("numbatok cpu, list[str] -> host arrays", numbatok_list("cpu")))
    if gpu_available():
        out.append(("numbatok cuda, list[str] -> host arrays", numbatok_list("cuda")))

        def device_resident():
            import cupy
            from numbatok.batch import Batch, to_batch
            tok = numbatok.Tokenizer.from_pretrained(name, device="cuda")
            cache = {}

            def run(docs):
                key = id(docs)
                if key not in cache:
                    b = to_batch(docs)
                    cache[key] = Batch(cupy.asarray(b.data), cupy.asarray(b.offsets))
                return tok.encode_ragged(cache[key], add_special_tokens=False)
            return run
        out.append(("numbatok cuda, bytes on device -> ids on device", device_resident))

    def hf():
        from tokenizers import Tokenizer
        ref = Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
        return lambda docs: [e.ids for e in ref.encode_batch(docs, add_special_tokens=False)]
    out.append(("tokenizers encode_batch", hf))

    def tk():
        from numbatok.compat import to_tiktoken
        enc = to_tiktoken(numbatok.Tokenizer.from_pretrained(name, device="cpu"))
        return lambda docs: enc.encode_ordinary_batch(docs, num_threads=cores)
    out.append((f"tiktoken encode_ordinary_batch ({cores} threads)", tk))

    def gigatoken():
        import gigatoken as gt  # optional peer
        enc = gt.Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
        return lambda docs: enc.encode_batch(docs).tolist()
    out.append(("gigatoken encode_batch", gigatoken))

    def fastokens():
        import fastokens  # optional peer
        enc = fastokens.Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
        return lambda docs: [e.ids for e in enc.encode_batch(docs, add_special_tokens=False)]
    out.append(("fastokens encode_batch", fastokens))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--corpus")
    ap.add_argument("--repeat", type=int, default=4, help="big.txt paragraphs repeated this many times")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    corpus = find_corpus(args.corpus)
    with open(os.path.join(corpus, "big.txt"), encoding="utf-8") as f:
        paras = f.read().split("\n\n")
    docs = paras * args.repeat
    nbytes = sum(len(d.encode()) for d in docs)
    cores = os.cpu_count()
    print(f"{args.tokenizer}: {len(docs)} documents, {nbytes / 1e6:.1f} MB; {cores} cores; "
          f"{platform.processor() or platform.machine()}; numbatok {numbatok.__version__}", flush=True)
    from tokenizers import Tokenizer
    ref_ids = [e.ids for e in Tokenizer.from_file(numbatok.tokenizer.resolve_path(args.tokenizer))
               .encode_batch(docs, add_special_tokens=False)]
    rows = []
    for label, prepare in configurations(args.tokenizer, cores):
        try:
            run = prepare()
        except ImportError:
            print(f"  {label}: not installed, skipped")
            continue
        t0 = time.perf_counter()
        got = run(docs)
        sync()
        first = time.perf_counter() - t0
        if to_lists(got) != ref_ids:
            print(f"  {label}: ids differ from tokenizers: NOT TIMED")
            rows.append({"config": label, "exact": False})
            continue
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            run(docs)
            sync()
            times.append(time.perf_counter() - t0)
        warm = float(np.median(times))
        rows.append({"config": label, "exact": True, "first_pass_s": first, "warm_s": warm,
                     "first_pass_MBps": nbytes / first / 1e6, "warm_MBps": nbytes / warm / 1e6})
        print(f"  {label}: first pass {nbytes / first / 1e6:.1f} MB/s, warm {nbytes / warm / 1e6:.1f} MB/s", flush=True)
    base = next((r["warm_MBps"] for r in rows if r["config"].startswith("tokenizers") and r.get("exact")), None)
    print(f"\n| configuration | first pass MB/s | warm MB/s | x tokenizers (warm) |\n|---|---|---|---|")
    for r in rows:
        if r.get("exact"):
            ratio = f"{r['warm_MBps'] / base:.1f}" if base else "-"
            print(f"| {r['config']} | {r['first_pass_MBps']:.1f} | {r['warm_MBps']:.1f} | {ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokenizer": args.tokenizer, "documents": len(docs), "bytes": nbytes, "cores": cores,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
