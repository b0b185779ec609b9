"""Cold start, pathological words and peak memory of the CPU path (numbatok and `tokenizers`).

    python benchmarks/edge_cases.py [--tokenizer gpt2]
    python benchmarks/edge_cases.py --cold-start-only cuda     # the GPU path's cold start alone

Cold start is timed in fresh processes with the JIT cache already warm (run anything once first):
`import numbatok`, loading the tokenizer, and the first encode. Each pathological input (one
document: a 1 MB word of one letter, 1 MB of random base64, 100k emoji) is encoded by both
libraries in the same process after a warm-up, ids compared. Peak memory is the process's maximum
resident size around encoding big.txt paragraphs, against input + output sizes.
"""
import argparse
import base64
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cold_start(name, device="cpu"):
    # on the GPU the first call is 2 MB of text, all of it through the GPU path (words over 64 bytes too)
    text = "['Hello world, a first call.']" if device == "cpu" else "['Hello world, a first call. ' * 9 + 'x' * 70] * 7000"
    code = ("import time; t0 = time.perf_counter(); import numbatok; t1 = time.perf_counter(); "
            f"tok = numbatok.Tokenizer.from_pretrained({name!r}, device={device!r}); t2 = time.perf_counter(); "
            f"tok.encode_ragged({text}).to_host(); t3 = time.perf_counter(); "
            "print(f'{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f}')")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # warms the cache
    runs = [subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
            .stdout.split() for _ in range(3)]
    best = [min(float(r[i]) for r in runs) for i in range(3)]
    print(f"cold start on the {device.upper()} (best of 3 fresh processes, warm JIT cache): import numbatok {best[0]:.2f} s, "
          f"from_pretrained {best[1]:.2f} s, first encode {best[2]:.2f} s; total {sum(best):.2f} s")


def pathological(name):
    sys.path.insert(0, ROOT)
    import numbatok
    from tokenizers import Tokenizer
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    ref = Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
    cases = {"'a' * 10**6": "a" * 10**6,
             "1 MB random base64": base64.b64encode(os.urandom(750_000)).decode(),
             "100k emoji": "\U0001F600" * 100_000}
    # one-time costs first (pyarrow's import for non-ASCII text, the long-document path's kernels):
    # what is timed below is the word itself (too long to be cached: every call runs the model)
    tok.encode_ragged(["warm up " + "z" * 300, "naïve 😀", "long " * 60_000])
    for label, text in cases.items():
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            mine = tok.encode_ragged([text], add_special_tokens=False).ids.tolist()
            times.append(time.perf_counter() - t0)
        t1 = time.perf_counter()
        theirs = ref.encode(text, add_special_tokens=False).ids
        t2 = time.perf_counter()
        mb = len(text.encode()) / 1e6
        print(f"{label}: numbatok {mb / min(times):.2f} MB/s (best of 3), tokenizers {mb / (t2 - t1):.2f} MB/s, "
              f"ids {'identical' if mine == theirs else 'DIFFERENT'}")


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def memory(name, corpus):
    """Peak resident size during one call, sampled every millisecond (Linux), minus the size before."""
    import threading
    sys.path.insert(0, ROOT)
    import numbatok
    with open(os.path.join(corpus, "big.txt"), encoding="utf-8") as f:
        docs = f.read().split("\n\n") * 4
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    tok.encode_ragged(["warm up"])
    before = _rss_mb()
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.001)
    t = threading.Thread(target=sample)
    t.start()
    r = tok.encode_ragged(docs)
    done.set()
    t.join()
    text_mb = sum(len(d.encode()) for d in docs) / 1e6
    out_mb = (r.ids.nbytes + r.row_offsets.nbytes) / 1e6
    grew = peak[0] - before
    print(f"memory: {text_mb:.1f} MB of text -> {out_mb:.1f} MB of ids; resident size peaked {grew:.0f} MB above "
          f"its size before the call ({grew / (text_mb + out_mb):.1f}x input + output, word cache included; "
          "the Python list of str is not counted)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--corpus", default=os.environ.get("NUMBATOK_CORPUS") or os.path.join(ROOT, "..", "shared", "corpus"))
    ap.add_argument("--cold-start-only", choices=["cpu", "cuda"], help="only the cold start, on that device")
    args = ap.parse_args()
    if args.cold_start_only:
        return cold_start(args.tokenizer, args.cold_start_only)
    cold_start(args.tokenizer)
    pathological(args.tokenizer)
    if os.path.isfile(os.path.join(args.corpus, "big.txt")):
        memory(args.tokenizer, args.corpus)


if __name__ == "__main__":
    main()
