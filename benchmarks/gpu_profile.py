"""Where the GPU path's time goes: each kernel and host step of one encode, timed with the device
synchronized around it (so the stages add up to a little more than an unprofiled call).

    python benchmarks/gpu_profile.py [--tokenizer gpt2] [--repeat 4] [--reps 3]

Prints, for big.txt paragraphs x repeat: the host conversion (list[str] -> bytes + offsets), the copy to
the device, every kernel launch and the CuPy steps between them (scans, sorts, searches), the rest
(gathers, reads of sizes) and the copy back; the best of --reps runs, beside the first (the process's
first full-size call). Then the copies both ways against their alternatives, the device memory a
pass holds per input byte, and a batch under a small gpu_memory_budget (in groups of rows), from an
emptied pool and again.
"""
import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

# CuPy calls between the kernels, timed apart; the rest of that time is indexing (gathers, scatters)
# and reads of single values back to the host.
BETWEEN = ("searchsorted", "cumsum", "flatnonzero", "where", "arange", "zeros", "empty")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--docs", type=int, help="only the first N documents")
    ap.add_argument("--corpus")
    a = ap.parse_args()
    import bench
    import numbatok
    from numbatok import batch as _batch
    from numbatok.backends import cuda as bc

    docs = bench.load_docs(bench.find_corpus(a.corpus), "big", a.repeat)[:a.docs]
    tok = numbatok.Tokenizer.from_pretrained(a.tokenizer, device="cuda")
    m = bc.xp()
    sync = (lambda: None) if bc.SIMULATOR else m.cuda.Device().synchronize
    times = collections.defaultdict(float)
    launches = collections.Counter()

    depth = [0]

    def timed(name, f):
        def g(*args, **kw):
            if depth[0]:  # inside a step already timed (a CuPy call inside the long-words step)
                return f(*args, **kw)
            depth[0] += 1
            sync()
            t0 = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                sync()
                times[name] += time.perf_counter() - t0
                depth[0] -= 1
        return g

    class Timed:
        """The array module the kernels' driver sees, with its whole-array steps timed one by one."""
        def __getattr__(self, k):
            f = getattr(m, k)
            return timed(f"between: {k}", f) if k in BETWEEN else f

    plain_launch = bc._launch

    def launch(kernel, n, *args):
        name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "py_func", None), "__name__", "kernel")
        launches[name] += 1
        timed(f"kernel {name}", plain_launch)(kernel, n, *args)

    bc._launch = launch
    if not bc.SIMULATOR:
        bc.xp = Timed
    bc._long_words_on_cpu = timed("long words on the CPU", bc._long_words_on_cpu)
    nbytes = sum(len(d.encode()) for d in docs)
    tok.encode_ragged(docs[:200], add_special_tokens=False)  # compile and load every kernel
    best = first = None
    for _ in range(a.reps):
        times.clear()
        launches.clear()
        t_all = time.perf_counter()
        t0 = time.perf_counter()
        b = _batch.to_batch(docs)
        times["host: list[str] -> bytes + offsets"] = time.perf_counter() - t0
        db = timed("host -> device copy", lambda: _batch.Batch(bc.to_device(b.data), bc.to_device(b.offsets)))()
        t0 = time.perf_counter()
        r = tok.encode_ragged(db, add_special_tokens=False)
        sync()
        t_enc = time.perf_counter() - t0
        t0 = time.perf_counter()
        h = r.to_host()
        times["device -> host copy"] = time.perf_counter() - t0
        staged = sum(v for k, v in times.items() if k.startswith(("kernel", "long", "between")))
        times["encode: the rest between kernels (indexing, reads of sizes)"] = t_enc - staged
        total = time.perf_counter() - t_all
        if best is None or total < best[0]:
            best = (total, dict(times), dict(launches), t_enc, len(h.ids))
        if first is None:  # the process's first full-size call (after a 200-document warm-up)
            first = (total, dict(times))
    total, t, n_launch, t_enc, ntok = best
    from numbatok.kernels import pystr
    print(f"{a.tokenizer}, big.txt x{a.repeat}: {len(docs)} documents, {nbytes / 1e6:.1f} MB, {ntok} tokens; "
          f"str read in parallel: {pystr.convert(docs[:1]) is not None}")
    print(f"end to end {total * 1e3:.1f} ms = {nbytes / total / 1e6:.0f} MB/s; encode on the device "
          f"{t_enc * 1e3:.1f} ms = {nbytes / t_enc / 1e6:.0f} MB/s")
    print(f"the first full-size call: {first[0] * 1e3:.1f} ms (each step's time in it after the best's)")
    for k, v in sorted(t.items(), key=lambda kv: -kv[1]):
        extra = f"  ({n_launch[k[7:]]} launches)" if k.startswith("kernel") else ""
        print(f"  {v * 1e3:9.2f} ms {first[1].get(k, 0) * 1e3:9.2f} ms  {k}{extra}")
    if not bc.SIMULATOR:
        copies(b, r, bc, sync)
        memory(tok, db, h, nbytes, m, sync)


def copies(b, r, bc, sync):
    """The copies both ways, best of 5: in through the pinned staging buffer (what numbatok does) and
    through CuPy; out with .get() and into a pinned block; then out into fresh memory (each result
    kept) with .get() and with its pages touched on every thread first (what numbatok does)."""
    import cupy
    import cupyx

    def best(f, n=5):
        ts = []
        for _ in range(n):
            sync()
            t0 = time.perf_counter()
            f()
            sync()
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3
    pinned = cupyx.empty_pinned(r.ids.shape, r.ids.dtype)
    print(f"copy in, {b.data.nbytes / 1e6:.1f} MB: staging {best(lambda: bc.to_device(b.data)):.2f} ms, "
          f"cupy.asarray {best(lambda: cupy.asarray(b.data)):.2f} ms; copy out, ids {r.ids.nbytes / 1e6:.1f} MB: "
          f".get() {best(lambda: r.ids.get()):.2f} ms, "
          f"into a pinned block {best(lambda: r.ids.get(out=pinned)):.2f} ms")
    kept, ts = [], {".get()": [], "pages touched first (numbatok)": []}  # results kept, as callers keep them
    for i in range(8):  # alternated, so that neither takes the other's freed memory more often
        for name in sorted(ts, reverse=i % 2 == 1):
            f = (lambda: r.ids.get()) if name == ".get()" else (lambda: bc.to_host(r.ids))
            sync()
            t0 = time.perf_counter()
            kept.append(f())
            ts[name].append(time.perf_counter() - t0)
    print("copy out into fresh memory, each result kept (median of 8, alternated): " +
          ", ".join(f"{k} {np.median(v) * 1e3:.2f} ms" for k, v in ts.items()))


def memory(tok, db, want, nbytes, m, sync):
    """Device memory one pass holds at its peak (the pool's high-water mark, from an empty pool), per
    input byte, against the estimate the budget uses; then the same batch under a budget of a quarter
    of the ids pass's need: it must run in groups, give the same ids and stay within the budget."""
    from numbatok.backends import cuda as bc
    pool = m.get_default_memory_pool()
    for spans in (False, True):
        pool.free_all_blocks()
        base = pool.total_bytes()
        r = tok.encode_ragged(db, add_special_tokens=False, return_offsets=spans)
        sync()
        peak = pool.total_bytes() - base
        del r
        print(f"device memory, {'ids and offsets' if spans else 'ids'}: peak {peak / nbytes:.0f} bytes per input "
              f"byte (the budget assumes {bc.work_per_byte(tok, spans)})")
    tok.gpu_memory_budget = bc.work_per_byte(tok, False) * nbytes // 4
    pool.free_all_blocks()
    base = pool.total_bytes()
    ts = []
    for _ in range(2):  # the first run fills the emptied pool; the second reuses its blocks
        sync()
        t0 = time.perf_counter()
        r = tok.encode_ragged(db, add_special_tokens=False)
        sync()
        ts.append(time.perf_counter() - t0)
        if len(ts) == 1:
            peak = pool.total_bytes() - base
    groups = len(tok._row_groups([db], False))
    same = bool(np.array_equal(r.ids.get(), want.ids) and np.array_equal(r.row_offsets.get(), want.row_offsets))
    print(f"budget {tok.gpu_memory_budget / 1e6:.0f} MB: {groups} groups, {ts[0] * 1e3:.1f} ms then "
          f"{ts[1] * 1e3:.1f} ms, peak "
          f"{peak / 1e6:.0f} MB, same ids: {same}")
    tok.gpu_memory_budget = None


if __name__ == "__main__":
    main()
