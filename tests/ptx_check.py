"""Compiles every @cuda.jit kernel of numbatok to PTX for sm_90 without a GPU (run as a script).

Typing errors in kernels surface here: the simulator runs kernels as Python and type-checks nothing.
Argument types are taken from the arrays the CUDA driver really passes (the gpt2 tables).
"""
import sys

import numba
import numpy as np
from numba import cuda


class _Device:
    compute_capability = (9, 0)
    id = 0


# compile_ptx of a kernel that calls device functions asks the driver for the current device.
cuda.dispatcher.get_current_device = lambda: _Device()

from numbatok import Tokenizer  # noqa: E402
from numbatok.backends import cuda as bc  # noqa: E402
from numbatok.kernels import jsonl  # noqa: E402
from numbatok.normalizers.unicode_data import load as normalizer_tables  # noqa: E402


def sig(*args):
    return tuple(numba.typeof(a) for a in args)


def main():
    tok = Tokenizer.from_pretrained("gpt2", device="cpu")
    at = tok._added.arrays()
    bpe = tok._model.arrays()
    u8, i64, i32 = np.zeros(4, np.uint8), np.zeros(4, np.int64), np.zeros(4, np.int32)
    cls = tok._classes
    nt = normalizer_tables().arrays()
    kernels = {
        "count_words_kernel": sig(u8, i64, i64, True, cls, *at, i64, u8, i32, i64),
        "fill_words_kernel": sig(u8, i64, i64, True, cls, *at, i64, i64, i64, u8, i32),
        "encode_words_kernel": sig(u8, i64, i64, u8, i32, i64, *bpe, i32, i64, i64, i64),
        "compact_kernel": sig(u8, i64, i64, u8, i32, i64, i64, i64, i32, i64, i64, i64, True, cls,
                              i32, i32, i32, i64, i64, i32, i32, u8),
        "char_start_kernel": sig(u8, i64),
        "split_pieces_kernel": sig(True, u8, i64, cls, *at, i64, i64, i64, i32, i64),
        "identity_alignment_kernel": sig(u8, i64, i64),
        "nf_items_kernel": sig(True, 1, u8, i64, i64, i32, *nt, i64, i32, i32, i64),
        "normalize_pieces_kernel": sig(True, 1, 1, 1, i32, i64, i32, u8, i64, nt[0], u8, i64, i64, i64, i64, i32,
                                       i64, i32, i32, i64, i64, i64, u8, i64, i64, i64),
        "piece_words_kernel": sig(True, u8, i64, i32, i64, i64, True, cls, *at, i64, i64, i64, u8, i32, i64),
        "cut_points_kernel": sig(u8, 1, 1, 1, True, i64),
        "claim_words_kernel": sig(u8, i64, i64, u8, i32, np.zeros(4, np.uint64), i64, i64, i64, i64),
        "word_uids_kernel": sig(u8, i64, i64, u8, i32, i64, i64, i64, i64, i64),
    }
    missing = {k.__name__ if hasattr(k, "__name__") else k.py_func.__name__ for k in bc.KERNELS} - set(kernels)
    if missing:
        print("kernels without a PTX signature here:", sorted(missing))
        return 1
    for k in bc.KERNELS:
        name = k.py_func.__name__
        ptx, _ = cuda.compile_ptx(k.py_func, kernels[name], cc=(9, 0))
        assert ".target sm_90" in ptx, name
        print(f"{name}: {len(ptx)} bytes of PTX for sm_90")
    # the JSON Lines helpers, which say a CUDA kernel can call them (none does yet)
    ptx, _ = cuda.compile_ptx(_jsonl_line, sig(u8, i64, i64, u8, i64, u8), cc=(9, 0))
    assert ".target sm_90" in ptx
    print(f"JSON Lines helpers: {len(ptx)} bytes of PTX for sm_90")
    return 0


def _jsonl_line(buf, starts, ends, key, out, data):
    r = cuda.grid(1)
    if r < starts.shape[0]:
        status, s, e, n = jsonl.record(buf, starts[r], ends[r], key)
        j = jsonl.next_escape(buf, s, e)
        o = 0
        while j < e:
            j, o = jsonl.escape(buf, j, e, data, o)
        out[r] = status + n + o


if __name__ == "__main__":
    sys.exit(main())
