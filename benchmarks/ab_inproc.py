"""Two revisions of numbatok in one process, their passes interleaved: for effects smaller than the
spread between processes (`ab.py`), which on a shared machine moves by 10-15% and more.

    python benchmarks/ab_inproc.py HEAD~1 HEAD --data ja,zh,udhr

Each revision's package is copied under a name of its own (numbatok_a, numbatok_b: the package
imports itself relatively), with its own JIT cache, and both encode the same batches in turn,
A B B A ..., warm passes, first passes (the word cache cleared before each) and, for data of more than
one row, `next` passes: the second half of the rows after the first half, in a cache cleared before
the first (a batch of a long job, mostly cached, some words new). The table gives each
side's minimum and the median of the paired ratios B / A. Both sides share the process's memory and
threads, so what differs between them is the code alone, not where a process's tables landed.

With --latency it times small calls of the public API instead (a warm cache): `encode_ragged` of 1,
8 and 64 rows, `encode` of one document and `__call__` of one, the median of many calls a round.
"""
import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load(rev, name, tmp):
    """The package of git revision `rev` as module `name`."""
    tree = os.path.join(tmp, "tree-" + name)
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", tree, rev], check=True)
    try:
        shutil.copytree(os.path.join(tree, "numbatok"), os.path.join(tmp, name))
        shutil.copytree(os.path.join(tree, "vocab"), os.path.join(tmp, name, "vocab"), dirs_exist_ok=True)
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tmp, "cache-" + name)
    return importlib.import_module(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--data", default="big,udhr")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--corpus")
    ap.add_argument("--latency", action="store_true", help="small calls of the public API (see above)")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    from bench import find_corpus, load_docs, warm_up_text
    corpus = find_corpus(args.corpus)
    with tempfile.TemporaryDirectory(prefix="numbatok-ab-") as tmp:
        sys.path.insert(0, tmp)
        sides = {}
        for key, rev in (("A", args.a), ("B", args.b)):
            pkg = load(rev, "numbatok_" + key.lower(), tmp)
            cpu = importlib.import_module(pkg.__name__ + ".backends.cpu")
            batch = importlib.import_module(pkg.__name__ + ".batch")
            tok = pkg.Tokenizer.from_pretrained(args.tokenizer, device="cpu")
            tok.encode_ragged(warm_up_text())
            sides[key] = (tok, cpu, batch)
        if args.latency:
            return latency(sides, load_docs(corpus, args.data.split(",")[0], 1), args)
        print("| data | pass | A (%s) ms | B (%s) ms | B / A (median of pairs, range) | ids agree |" % (args.a, args.b))
        print("|---|---|---|---|---|---|")
        for data in args.data.split(","):
            docs = load_docs(corpus, data, 1)
            t = {(k, p): [] for k in sides for p in ("warm", "first", "next")}
            sums = set()
            for key, (tok, cpu, batch) in sides.items():
                ids, _ = cpu.encode_ids(tok, batch.to_batch(docs))
                sums.add(int(ids.astype(np.int64).sum()))
            for i in range(args.rounds):
                for key in ("AB" if i % 2 == 0 else "BA"):
                    tok, cpu, batch = sides[key]
                    b = batch.to_batch(docs)
                    t0 = time.perf_counter()
                    cpu.encode_ids(tok, b)
                    t[(key, "warm")].append(time.perf_counter() - t0)
                    tok._word_cache.clear()
                    t0 = time.perf_counter()
                    cpu.encode_ids(tok, b)
                    t[(key, "first")].append(time.perf_counter() - t0)
                    if len(docs) < 2:
                        continue
                    # a batch whose words are mostly cached, some new: the second half after the first
                    tok._word_cache.clear()
                    cpu.encode_ids(tok, batch.to_batch(docs[:len(docs) // 2]))
                    half = batch.to_batch(docs[len(docs) // 2:])
                    t0 = time.perf_counter()
                    cpu.encode_ids(tok, half)
                    t[(key, "next")].append(time.perf_counter() - t0)
            for p in ("warm", "first", "next"):
                if not t[("A", p)]:
                    continue
                a, b = np.array(t[("A", p)]), np.array(t[("B", p)])
                r = np.sort(b / a)
                print(f"| {data} | {p} | {a.min() * 1e3:.2f} | {b.min() * 1e3:.2f} | {np.median(r):.3f} "
                      f"({r[0]:.3f}-{r[-1]:.3f}) | {'yes' if len(sums) == 1 else 'NO'} |", flush=True)


def latency(sides, docs, args):
    """Small calls of the public API on both sides, interleaved by round (A B, then B A)."""
    calls = {
        "encode_ragged, 1 row": lambda tok: tok.encode_ragged(docs[:1]),
        "encode_ragged, 8 rows": lambda tok: tok.encode_ragged(docs[:8]),
        "encode_ragged, 64 rows": lambda tok: tok.encode_ragged(docs[:64]),
        "encode, 1 document": lambda tok: tok.encode(docs[0]),
        "__call__, 1 document": lambda tok: tok(docs[0]),
    }
    print("| call | A (%s) | B (%s) | B / A (median of rounds, range) | ids agree |" % (args.a, args.b))
    print("|---|---|---|---|---|")
    for name, call in calls.items():
        got = {k: call(tok) for k, (tok, _, _) in sides.items()}
        same = all(_ids(got["A"]) == _ids(v) for v in got.values())
        t = {k: [] for k in sides}
        for i in range(args.rounds):
            for key in ("AB" if i % 2 == 0 else "BA"):
                tok = sides[key][0]
                ts = []
                for _ in range(300):
                    t0 = time.perf_counter()
                    call(tok)
                    ts.append(time.perf_counter() - t0)
                t[key].append(np.median(ts))
        a, b = np.array(t["A"]), np.array(t["B"])
        r = np.sort(b / a)
        print(f"| {name} | {np.median(a) * 1e6:.1f} us | {np.median(b) * 1e6:.1f} us | {np.median(r):.3f} "
              f"({r[0]:.3f}-{r[-1]:.3f}) | {'yes' if same else 'NO'} |", flush=True)


def _ids(got):
    if isinstance(got, dict):
        return got["input_ids"]
    return got.ids if not hasattr(got, "to_list") else got.to_list()


if __name__ == "__main__":
    main()
