"""Text in any accepted form -> one batch: `data` (uint8, all rows' UTF-8 back to back) and
`offsets` (int64, n + 1; row i is data[offsets[i]:offsets[i + 1]]), the Arrow string layout.

Turning a list of str into this layout is itself a hot path (it can cost more than a GPU encode),
so it is done by pyarrow when installed (one C pass) and otherwise by one join + one encode with a
compiled character-to-byte walk, never by per-document Python work.
"""
import itertools
import struct
import sys

import numpy as np

from ._numba import cpu_kernel, readonly_view
from .kernels import lines as _lines
from .errors import InvalidInputError


def _pyarrow():
    """pyarrow if installed (optional, and the fastest str -> UTF-8 path there is), imported on first
    need so that `import numbatok` stays fast."""
    if "pyarrow" in sys.modules:
        return sys.modules["pyarrow"]
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - exercised where pyarrow is absent
        return None
    return pyarrow


class Batch:
    """Rows of UTF-8 text in the Arrow layout. `data` and `offsets` may live on the host or a GPU."""

    __slots__ = ("data", "offsets")

    def __init__(self, data, offsets):
        self.data = data
        self.offsets = offsets

    def __len__(self):
        return len(self.offsets) - 1

    @property
    def nbytes(self):
        return int(self.data.shape[0])


def rows(b, lo, hi):
    """Rows lo..hi-1 of Batch `b` as a batch of their own (views; host or device arrays alike)."""
    a, z = int(b.offsets[lo]), int(b.offsets[hi])
    return Batch(b.data[a:z], b.offsets[lo:hi + 1] - a)


@cpu_kernel
def _char_to_byte_offsets(data, char_offsets):
    # Walks the joined UTF-8 once, turning character offsets into byte offsets.
    out = np.empty_like(char_offsets)
    n = char_offsets.shape[0]
    pos = 0
    chars = 0
    for i in range(n):
        target = char_offsets[i]
        while chars < target:
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif b < 0xE0:
                pos += 2
            elif b < 0xF0:
                pos += 3
            else:
                pos += 4
            chars += 1
        out[i] = pos
    return out


@cpu_kernel
def _first_invalid_utf8(data, offsets):
    """(row, byte offset in row) of the first invalid UTF-8 sequence, or (-1, -1)."""
    n = offsets.shape[0] - 1
    for r in range(n):
        p = offsets[r]
        end = offsets[r + 1]
        while p < end:
            b = data[p]
            if b < 0x80:
                p += 1
                continue
            if 0xC2 <= b <= 0xDF:
                need = 1
                lo = 0x80
                hi = 0xBF
            elif b == 0xE0:
                need = 2
                lo = 0xA0
                hi = 0xBF
            elif 0xE1 <= b <= 0xEC or b == 0xEE or b == 0xEF:
                need = 2
                lo = 0x80
                hi = 0xBF
            elif b == 0xED:
                need = 2
                lo = 0x80
                hi = 0x9F
            elif b == 0xF0:
                need = 3
                lo = 0x90
                hi = 0xBF
            elif 0xF1 <= b <= 0xF3:
                need = 3
                lo = 0x80
                hi = 0xBF
            elif b == 0xF4:
                need = 3
                lo = 0x80
                hi = 0x8F
            else:
                return r, p - offsets[r]
            if p + need >= end:
                return r, p - offsets[r]
            c = data[p + 1]
            if c < lo or c > hi:
                return r, p - offsets[r]
            for k in range(2, need + 1):
                c = data[p + k]
                if c < 0x80 or c > 0xBF:
                    return r, p - offsets[r]
            p += need + 1
    return -1, -1


def _bad_item(texts, kind):
    for i, t in enumerate(texts):
        if not isinstance(t, kind):
            return i, t
    return None, None


PARALLEL_STR_ITEMS = 256  # from this many items a list of str is read by all threads (kernels.pystr)


FEW_STR_ITEMS = 8  # up to this many items a list of str is encoded item by item (`_from_few_str`)


def _not_str(i, bad):
    return InvalidInputError(
        f"batch item {i} is {type(bad).__name__}, not str: pass text as str (or bytes), "
        "and replace missing documents with '' before encoding")


def _lone_surrogate(row, ch):
    return InvalidInputError(
        f"batch item {row} contains a lone surrogate ({ch!r}) that has no UTF-8 form: "
        "fix the text, e.g. text.encode('utf-8', 'replace').decode()")


def _from_few_str(texts):
    """A call of one or a few documents: each str encoded on its own, whose byte length is its offset
    step (the join's character offsets and their conversion to bytes cost more than such a call's text)."""
    parts = []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise _not_str(i, t)
        try:
            parts.append(t.encode("utf-8"))
        except UnicodeEncodeError as e:
            raise _lone_surrogate(i, t[e.start]) from None
    data = np.frombuffer(parts[0] if len(parts) == 1 else b"".join(parts), dtype=np.uint8)
    offsets = np.array([0, *itertools.accumulate(map(len, parts))], dtype=np.int64)
    offsets.flags.writeable = False  # (as the kernels take it: no read-only view made per call)
    return Batch(data, offsets)


def _from_str_list(texts):
    if len(texts) <= FEW_STR_ITEMS:
        return _from_few_str(texts)
    if len(texts) >= PARALLEL_STR_ITEMS:
        from .kernels import pystr
        got = pystr.convert(texts)
        if got is not None:
            return Batch(*got)
    try:
        joined = "".join(texts)  # also the type check: it fails on any non-str item
    except TypeError:
        raise _not_str(*_bad_item(texts, str)) from None
    # Measured: for ASCII text one join + encode beats pyarrow; for mixed scripts pyarrow's
    # conversion is 3-5x faster than the widened join, so it takes over when installed.
    _pa = None if joined.isascii() else _pyarrow()
    if _pa is not None:
        try:
            return from_arrow(_pa.array(texts, type=_pa.large_string()))
        except (_pa.ArrowInvalid, UnicodeEncodeError):
            pass  # lone surrogates: the precise error comes below
    try:
        data = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    except UnicodeEncodeError as e:
        raise _lone_surrogate(_row_of_char(texts, e.start), joined[e.start]) from None
    if len(texts) < PARALLEL_STR_ITEMS:  # (numpy's cumsum into a slice costs ~2 us before its first element)
        char_offsets = np.array([0, *itertools.accumulate(map(len, texts))], dtype=np.int64)
    else:
        char_offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=char_offsets[1:])
    if data.shape[0] == char_offsets[-1]:  # all ASCII: characters are bytes
        return Batch(data, char_offsets)
    return Batch(data, _char_to_byte_offsets(data, char_offsets))


def _row_of_char(texts, char_index):
    total = 0
    for i, t in enumerate(texts):
        total += len(t)
        if char_index < total:
            return i
    return len(texts) - 1


def _from_bytes_list(items):
    i, bad = _bad_item(items, (bytes, bytearray, memoryview))
    if i is not None:
        raise InvalidInputError(
            f"batch item {i} is {type(bad).__name__}: a batch is all str or all bytes")
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(items), dtype=np.uint8)
    return validated(Batch(data, offsets))


def from_lines(block):
    """Whole lines of bytes -> Batch (not yet validated): every "\n", and one "\r" right before it, is
    cut out. A final "\n" does not start another, empty row."""
    arr = readonly_view(np.frombuffer(block, dtype=np.uint8))
    if arr.shape[0] == 0:
        return Batch(np.zeros(0, np.uint8), np.zeros(1, np.int64))
    starts, ends = _lines.lines(arr)
    ends -= (ends > starts) & (arr[ends - 1] == 13)
    offsets = np.zeros(ends.shape[0] + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    _lines.copy_rows(arr, starts, offsets, data)
    return Batch(data, offsets)


def validated(batch):
    """Checks host bytes are UTF-8; the reference only accepts text, so neither do we."""
    row, pos = _first_invalid_utf8(readonly_view(batch.data), readonly_view(batch.offsets))
    if row >= 0:
        raise InvalidInputError(
            f"batch item {row} is not valid UTF-8 (bad byte at offset {pos}): decode it yourself "
            "with errors='replace' (or fix the source encoding) before encoding")
    return batch


def from_arrow(arr):
    """A pyarrow string / large_string array (or chunked array) -> Batch, sharing its buffers."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        first = arr.is_null().index(True).as_py()
        raise InvalidInputError(
            f"batch item {first} is null: fill missing documents (e.g. pyarrow.compute.fill_null(arr, '')) first")
    if pa.types.is_string(arr.type):
        arr = arr.cast(pa.large_string())
    elif not pa.types.is_large_string(arr.type):
        raise InvalidInputError(f"arrow array of type {arr.type} is not text: pass a string column")
    return Batch(*arrow_buffers(arr))


def arrow_buffers(arr):
    """(data, offsets) of a large_string / large_binary array, sharing its data buffer."""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    if offsets.shape[0] and offsets[0] != 0:
        data = data[offsets[0]: offsets[-1]]
        offsets = offsets - offsets[0]
    return data, np.ascontiguousarray(offsets)


def _from_one_str(t):
    """One text: the commonest small call (`encode`, a one-row batch), in the fewest steps."""
    try:
        raw = t.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _lone_surrogate(0, t[e.start]) from None
    # (read-only as the kernels take it, see `_from_few_str`: arrays over bytes are, and made so in
    # half the time of np.array and a flag set)
    return Batch(np.frombuffer(raw, np.uint8), np.frombuffer(_TWO_INT64(0, len(raw)), np.int64))


_TWO_INT64 = struct.Struct("=2q").pack


def to_batch(texts):
    """Accepts str, bytes, a list/tuple of either, a pyarrow string array, a numpy str array or a Batch."""
    if type(texts) is list and len(texts) == 1 and type(texts[0]) is str:
        return _from_one_str(texts[0])
    if isinstance(texts, Batch):
        return texts
    if isinstance(texts, str):
        return _from_one_str(texts)
    elif isinstance(texts, (bytes, bytearray, memoryview)):
        texts = [bytes(texts)]
    if texts is None:
        raise InvalidInputError("expected text, got None")
    _pa = sys.modules.get("pyarrow")  # an Arrow array means pyarrow is already imported
    if _pa is not None and isinstance(texts, (_pa.Array, _pa.ChunkedArray)):
        return from_arrow(texts)
    if isinstance(texts, np.ndarray):
        texts = texts.tolist()
    if not isinstance(texts, list):
        try:
            texts = list(texts)
        except TypeError:
            raise InvalidInputError(
                f"cannot encode a {type(texts).__name__}: pass str, bytes, or a list of them") from None
    if len(texts) == 0:
        return Batch(np.zeros(0, np.uint8), np.zeros(1, np.int64))
    if isinstance(texts[0], (bytes, bytearray, memoryview)):
        return _from_bytes_list(texts)
    return _from_str_list(texts)
