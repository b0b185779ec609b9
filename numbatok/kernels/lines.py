"""Lines of a byte buffer, found 8 bytes at a time on every thread: the .txt and .jsonl readers (the
`preprocess` and `encode` commands) cut their blocks with these, not a Python split or a numpy mask."""
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from .._numba import cpu_kernel, jitable, prange, readonly_view


@jitable
def equal_bytes(x, c):
    """0x80 in each byte of the 8-byte word x that equals byte c (exact: no carry crosses a byte)."""
    x ^= np.uint64(c) * np.uint64(0x0101010101010101)
    return ~(((x & np.uint64(0x7F7F7F7F7F7F7F7F)) + np.uint64(0x7F7F7F7F7F7F7F7F)) | x) & \
        np.uint64(0x8080808080808080)


@jitable
def load8(buf, j):
    """buf[j:j + 8] as one little-endian word (an unsigned index: one load, no negative-index check)."""
    v = np.uint64(0)
    u = np.uint64(j)
    for q in range(8):
        v |= np.uint64(buf[u + np.uint64(q)]) << np.uint64(8 * q)
    return v


@jitable
def _newlines(x):
    return equal_bytes(x, 10)


# Both passes read whole 8-byte words through a uint64 view, segments of `seg` bytes (a multiple of 8)
# per iteration. (Words assembled from single bytes were vectorized into slow code in the cached
# build: 8x slower loaded from the cache than freshly compiled.)

@cpu_kernel(parallel=True)
def _count_newlines(buf, seg, counts):
    n8 = buf.shape[0] // 8
    words = buf[:n8 * 8].view(np.uint64)
    for k in prange(counts.shape[0]):
        n = np.uint64(0)
        for i in range(k * (seg // 8), min((k + 1) * (seg // 8), n8)):
            n += ((_newlines(words[i]) >> np.uint64(7)) * np.uint64(0x0101010101010101)) >> np.uint64(56)
        if k == counts.shape[0] - 1:
            for i in range(n8 * 8, buf.shape[0]):
                n += np.uint64(buf[i] == 10)
        counts[k] = n


@cpu_kernel(parallel=True)
def _fill_lines(buf, seg, first, starts, ends):
    n8 = buf.shape[0] // 8
    words = buf[:n8 * 8].view(np.uint64)
    for k in prange(first.shape[0] - 1):
        p = first[k]
        for i in range(k * (seg // 8), min((k + 1) * (seg // 8), n8)):
            m = _newlines(words[i])
            while m:
                e = 8 * i + (np.int64(trailing_zeros(m)) >> 3)
                ends[p] = e
                starts[p + 1] = e + 1
                p += 1
                m &= m - np.uint64(1)
        if k == first.shape[0] - 2:
            for i in range(n8 * 8, buf.shape[0]):
                if buf[i] == 10:
                    ends[p] = i
                    starts[p + 1] = i + 1
                    p += 1


def _counts(buf, seg):
    buf = readonly_view(buf)
    counts = np.empty(max(-(-buf.shape[0] // seg), 1), np.int64)
    _count_newlines(buf, seg, counts)
    return counts


def count(buf, seg=1 << 16):
    """How many newlines `buf` holds."""
    return int(_counts(buf, seg).sum())


def lines(buf, seg=1 << 16):
    """(starts, ends) of the lines of `buf`, split as bytes.split(b"\\n") splits them (without the empty
    line after a final newline); `seg` bytes per parallel iteration (a multiple of 8)."""
    buf = readonly_view(buf)
    counts = _counts(buf, seg)
    first = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    n = int(first[-1]) + 1
    starts, ends = np.empty(n, np.int64), np.empty(n, np.int64)
    starts[0] = 0
    ends[n - 1] = buf.shape[0]
    _fill_lines(buf, seg, first, starts, ends)
    if buf.shape[0] and buf[-1] == 10:
        return starts[:-1], ends[:-1]
    return starts, ends


@cpu_kernel(parallel=True)
def copy_rows(buf, starts, offsets, out):
    """Row r, buf[starts[r]:], to out[offsets[r]:offsets[r + 1]]: the rows side by side (Arrow's layout)."""
    for r in prange(starts.shape[0]):
        out[offsets[r]:offsets[r + 1]] = buf[starts[r]:starts[r] + offsets[r + 1] - offsets[r]]
