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


if __name__ == "__main__":
    main()
