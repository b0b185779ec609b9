"""Two revisions of numbatok side by side: the same passes in alternating fresh processes.

    python benchmarks/ab.py HEAD~1 HEAD                      # gpt2 on big.txt and the UDHR
    python benchmarks/ab.py main my-branch --tokenizer bert-base-uncased --processes 6

Each revision is checked out into a worktree of its own (in a temporary folder) with its own JIT
cache folder, so neither recompiles the other's kernels. Each process warms up like `bench.py`, then
per data set times its first encode in the process ("fresh": for the first data set, what
`bench.py` calls the first pass, with the process's fresh memory), then warm passes and first passes
(the word cache cleared before each), the minimum of seven of each, and sums the ids (the two
revisions must agree). The revisions alternate, A B B A ...; the table gives the median of each
revision's figures and the median ratio B / A of the processes paired in order. A shared machine
moves one process's figures by 10-15% (and, between minutes, by up to 2x), so a change is only as
real as its ratio's agreement across the pairs.
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
ROOT = os.path.dirname(HERE)


def child(repo, name, datasets, corpus):
    sys.path.insert(0, repo)
    sys.path.insert(0, HERE)
    import numbatok
    from bench import load_docs, warm_up_text
    from numbatok.backends import cpu
    from numbatok.batch import to_batch

    assert os.path.dirname(os.path.dirname(os.path.abspath(numbatok.__file__))) == os.path.abspath(repo)
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    tok.encode_ragged(warm_up_text())
    res = {}
    for data in datasets:
        b = to_batch(load_docs(corpus, data, 1))
        t = time.perf_counter()
        ids, _ = cpu.encode_ids(tok, b)
        fresh = time.perf_counter() - t
        warm, first = [], []
        for _ in range(7):
            t = time.perf_counter()
            cpu.encode_ids(tok, b)
            warm.append(time.perf_counter() - t)
            tok._word_cache.clear()
            t = time.perf_counter()
            cpu.encode_ids(tok, b)
            first.append(time.perf_counter() - t)
        res[data] = {"fresh": fresh * 1e3, "warm": min(warm) * 1e3, "first": min(first) * 1e3,
                     "sum": int(ids.astype(np.int64).sum())}
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="revision A (any git revision)")
    ap.add_argument("b", help="revision B")
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--data", default="big,udhr", help="comma-separated, as bench.py's --data")
    ap.add_argument("--processes", type=int, default=4, help="fresh processes per revision")
    ap.add_argument("--corpus")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # (a worktree: time it, print JSON)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    from bench import find_corpus
    corpus = find_corpus(args.corpus)
    datasets = args.data.split(",")
    if args.child:
        return child(args.child, args.tokenizer, datasets, corpus)
    with tempfile.TemporaryDirectory(prefix="numbatok-ab-") as tmp:
        trees = {}
        for key, rev in (("A", args.a), ("B", args.b)):
            trees[key] = os.path.join(tmp, key)
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", trees[key], rev], check=True)
        try:
            runs = {"A": [], "B": []}
            for i in range(args.processes):
                for key in ("AB" if i % 2 == 0 else "BA"):
                    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "cache-" + key))
                    out = subprocess.run([sys.executable, os.path.abspath(__file__), args.a, args.b, "--tokenizer",
                                          args.tokenizer, "--data", args.data, "--corpus", corpus,
                                          "--child", trees[key]],
                                         env=env, capture_output=True, text=True, check=True).stdout
                    runs[key].append(json.loads(out.strip().splitlines()[-1]))
                    print(f"{key} {i + 1}/{args.processes}: " + ", ".join(
                        f"{d} fresh {r['fresh']:.1f} warm {r['warm']:.1f} first {r['first']:.1f} ms"
                        for d, r in runs[key][-1].items()),
                        flush=True)
        finally:
            for key in trees:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", trees[key]], check=False)
    print(f"\n| data | pass | A ({args.a}) ms | B ({args.b}) ms | B / A (pairs) | ids agree |")
    print("|---|---|---|---|---|---|")
    for d in datasets:
        agree = len({r[d]["sum"] for r in runs["A"] + runs["B"]}) == 1
        for p in ("fresh", "warm", "first"):
            a = [r[d][p] for r in runs["A"]]
            b = [r[d][p] for r in runs["B"]]
            ratios = sorted(y / x for x, y in zip(a, b))
            print(f"| {d} | {p} | {np.median(a):.2f} | {np.median(b):.2f} | {np.median(ratios):.3f} "
                  f"({ratios[0]:.3f}-{ratios[-1]:.3f}) | {'yes' if agree else 'NO'} |")


if __name__ == "__main__":
    main()
