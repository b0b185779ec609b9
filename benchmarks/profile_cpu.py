"""Where a CPU encode's time goes, per compiled function: `perf record` over repeated passes, with
Numba's JIT code named through a perf map (perf cannot see names in code compiled at run time).

    python benchmarks/profile_cpu.py --tokenizer gpt2 --data big --pass first --seconds 15

A first pass clears the word cache before each pass (the same process: no fresh memory); a warm pass
re-encodes. The kernels compile in the process first, about a minute (perf can only name code whose
LLVM module the process holds). Needs `perf` (Debian's linux-perf) with permission to attach to it.
The table gives each function's share of all samples of the process (every thread, so a worker
spinning in libgomp while the other works, or during a serial step, shows up as libgomp). A
parallel loop's body is named after its kernel with [prange].
"""
import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _demangle(name):
    """numbatok.models.bpe.merge_byte_word from Numba's mangled symbol (the name itself if not one)."""
    if not name.startswith("_ZN"):
        return name
    parts, i = [], 3
    while i < len(name) and name[i].isdigit():
        j = i
        while name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
    return ".".join(p.replace("_3c", "<").replace("_3e", ">") for p in parts) or name


def write_perf_map():
    """/tmp/perf-PID.map for every function Numba compiled or loaded in this process. Sizes are the
    gaps between entry points (the map needs one; the last gets 4 KB)."""
    from numba.core.registry import CPUDispatcher

    entries = set()

    def visit(lib, owner, seen):
        if id(lib) in seen:
            return
        seen.add(id(lib))
        module = getattr(lib, "_final_module", None)
        if module is not None:
            engine = lib._codegen._engine
            for f in module.functions:
                if f.is_declaration:
                    continue
                addr = engine.get_function_address(f.name)
                if not addr:
                    continue
                label = _demangle(f.name)
                if "__numba_parfor_gufunc" in f.name:
                    label = owner + (" [prange wrapper]" if f.name.startswith("__gufunc__") else " [prange]")
                entries.add((addr, label))
        for sub in getattr(lib, "_linking_libraries", ()):
            visit(sub, owner, seen)

    for obj in gc.get_objects():
        if isinstance(obj, CPUDispatcher):
            owner = obj.py_func.__module__ + "." + obj.py_func.__qualname__
            for cres in obj.overloads.values():
                visit(cres.library, owner, set())
    entries = sorted(entries)
    with open("/tmp/perf-%d.map" % os.getpid(), "w") as f:
        for k, (addr, label) in enumerate(entries):
            size = entries[k + 1][0] - addr if k + 1 < len(entries) else 4096
            if size > 0:
                f.write("%x %x %s\n" % (addr, min(size, 1 << 20), label))
    return len(entries)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="gpt2")
    ap.add_argument("--data", default="big", help="as bench.py: big, doc, udhr, code, ja, zh")
    ap.add_argument("--pass", dest="which", choices=("first", "warm"), default="first")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--corpus")
    args = ap.parse_args()
    # Kernels loaded from the JIT cache keep no LLVM module to read their names from: compile them in
    # this process, into a cache folder of its own (about a minute on two cores).
    cache = tempfile.mkdtemp(prefix="numbatok-profile-")
    os.environ["XDG_CACHE_HOME"] = cache
    try:
        profile(args)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def profile(args):
    sys.path.insert(0, HERE)
    from bench import find_corpus, load_docs, warm_up_text
    import numbatok
    from numbatok.backends import cpu
    from numbatok.batch import to_batch

    tok = numbatok.Tokenizer.from_pretrained(args.tokenizer, device="cpu")
    for _ in range(2):
        tok.encode_ragged(warm_up_text())
    b = to_batch(load_docs(find_corpus(args.corpus), args.data, 1))
    cpu.encode_ids(tok, b)
    if not write_perf_map():
        print("no compiled functions found: perf will show addresses, not names")
    data = os.path.join(os.environ.get("TMPDIR", "/tmp"), "numbatok-profile-%d.data" % os.getpid())
    rec = subprocess.Popen(["perf", "record", "-F", "999", "-o", data, "-p", str(os.getpid())],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # (perf attaching)
    gc.disable()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < args.seconds:
        if args.which == "first":
            tok._word_cache.clear()
        cpu.encode_ids(tok, b)
        n += 1
    elapsed = time.perf_counter() - t0
    rec.send_signal(2)
    rec.wait()
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "-g", "none",
                             "--percent-limit", "0.3"], capture_output=True, text=True).stdout
    os.remove(data)
    print(f"{args.tokenizer} {args.data}, {args.which} pass: {n} passes, {elapsed / n * 1e3:.1f} ms each "
          f"({len(b.data) / 1e6:.2f} MB)\n")
    print("| share | where | function |\n|---|---|---|")
    rows = 0
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s+\[\.\]\s+(.*\S)", line)
        if m and rows < args.top:
            dso = "JIT" if m.group(2).startswith("[JIT]") else m.group(2)
            name = re.sub(r"(\s+-)+$", "", m.group(3))  # (perf's empty columns)
            print(f"| {m.group(1)}% | {dso} | {name} |")
            rows += 1


if __name__ == "__main__":
    main()
