"""A first pass with the word cache's inserts on one thread against on every thread, in one process.

    python benchmarks/first_pass_adds.py [--rounds 5] [--tokenizers gpt2,bert-base-uncased]

Between a first pass's waves the new words go into the shared table; on one thread that step is
serial, a growing share of the pass as threads are added. Each round clears the cache and encodes
big.txt's paragraphs and the UDHR once per mode, the modes alternating; ids are compared. Prints the
median pass and the median time in `WordCache.add` per mode.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokenizers", default="gpt2,bert-base-uncased")
    ap.add_argument("--corpus")
    args = ap.parse_args()
    import numba
    import numbatok
    from bench import find_corpus, load_docs, warm_up_text
    from numbatok.batch import to_batch
    from numbatok.backends import cpu
    from numbatok.kernels import word_cache as wc

    corpus = find_corpus(args.corpus)
    spent = [0.0]
    add = wc.WordCache.add

    def timed_add(self, *a):
        t0 = time.perf_counter()
        add(self, *a)
        spent[0] += time.perf_counter() - t0
    wc.WordCache.add = timed_add
    print(f"{numba.get_num_threads()} threads")
    default = wc.PARALLEL_THREADS
    for name in args.tokenizers.split(","):
        tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
        tok.encode_ragged(warm_up_text())
        for data in ("big", "udhr"):
            b = to_batch(load_docs(corpus, data, 1))
            times = {1 << 30: [], 1: []}  # PARALLEL_THREADS: never, always (the order alternates)
            want = None
            for r in range(args.rounds):
                for mode in (list(times) if r % 2 == 0 else list(times)[::-1]):
                    wc.PARALLEL_THREADS = mode
                    tok._word_cache.clear()
                    spent[0] = 0.0
                    t0 = time.perf_counter()
                    ids, off = cpu.encode_ids(tok, b)
                    times[mode].append((time.perf_counter() - t0, spent[0]))
                    if want is None:
                        want = ids
                    assert np.array_equal(ids, want), "ids differ between the modes"
            (s, sa), (p, pa) = (np.median(np.array(times[m]), axis=0) * 1e3 for m in times)
            print(f"{name} {data}: inserts on one thread {s:.1f} ms (adds {sa:.1f}), "
                  f"on every thread {p:.1f} ms (adds {pa:.1f}): {p / s:.2f}x", flush=True)
    wc.PARALLEL_THREADS = default


if __name__ == "__main__":
    main()
