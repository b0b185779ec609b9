"""A list of Python str -> one UTF-8 buffer with byte offsets, read in parallel from the str objects.

Joining and encoding in Python is one serial copy of the batch, then another, and asking every str
its length is a cache miss per object: together most of an encode of English text on many cores.
CPython keeps a compact str's characters right after its header (1, 2 or 4 bytes each), so compiled
code can size and transcode every item on all threads, given only the objects' addresses.

The header layout is read off fresh sample strings at first use, and every kind of string is
round-tripped through the converter before it is trusted; anything else (another interpreter, a
free-threaded build, a layout that does not check out, a str subclass or non-str item, a lone
surrogate) takes the plain path in `numbatok.batch`, which also raises the errors.
"""
import ctypes
import struct
import sys
import sysconfig

import numpy as np
from numba import carray, types
from numba.extending import intrinsic

from .._numba import cpu_kernel, jitable, prange
from .utf8 import encode


def _loader(ty):
    @intrinsic
    def load(typingctx, addr):
        def codegen(context, builder, signature, args):
            return builder.load(builder.inttoptr(args[0], context.get_value_type(types.CPointer(ty))))
        return ty(types.int64), codegen
    return load


def _pointer(ty):
    @intrinsic
    def pointer(typingctx, addr):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(ty)))
        return types.CPointer(ty)(types.int64), codegen
    return pointer


_u32, _u64 = _loader(types.uint32), _loader(types.uint64)
_LIST_SIZE, _LIST_ITEMS = 16, 24  # a list's length and its pointer to its items, after refcount and type
_p8, _p16, _p32 = _pointer(types.uint8), _pointer(types.uint16), _pointer(types.uint32)


@jitable
def _utf8_size(chars):
    """UTF-8 size of the code points, -1 if a surrogate is among them: counted without a branch, so that
    the loop runs on vectors (0.4x the time of a per-character `encoded_len` with an early exit)."""
    extra = 0
    bad = 0
    for j in range(chars.shape[0]):
        c = np.uint32(chars[j])
        extra += (c >= 0x80) + (c >= 0x800) + (c >= 0x10000)
        bad += (c - np.uint32(0xD800)) < np.uint32(0x800)
    return -1 if bad else chars.shape[0] + extra


@jitable
def _encode(chars, out, p):
    for j in range(chars.shape[0]):
        p += encode(out, p, np.int64(chars[j]))


@cpu_kernel(parallel=True, nogil=False)
def _sizes(addrs, str_type, layout, nbytes):
    """UTF-8 size of every item, or -1 where it is not a plain compact str without surrogates."""
    len_off, state_off, kind_shift, compact_bit, ascii_bit, ascii_data, compact_data = layout
    for i in prange(addrs.shape[0]):
        a = addrs[i]
        if np.int64(_u64(a + 8)) != str_type:
            nbytes[i] = -1
            continue
        n = np.int64(_u64(a + len_off))
        st = np.int64(_u32(a + state_off))
        kind = (st >> kind_shift) & 7
        d = a + compact_data
        if (st >> compact_bit) & 1 == 0:
            nbytes[i] = -1
        elif (st >> ascii_bit) & 1 == 1:
            nbytes[i] = n
        elif kind == 1:
            nbytes[i] = _utf8_size(carray(_p8(d), n))
        elif kind == 2:
            nbytes[i] = _utf8_size(carray(_p16(d), n))
        else:
            nbytes[i] = _utf8_size(carray(_p32(d), n))


@cpu_kernel(parallel=True, nogil=False)
def _fill(addrs, layout, offsets, out):
    len_off, state_off, kind_shift, compact_bit, ascii_bit, ascii_data, compact_data = layout
    for i in prange(addrs.shape[0]):
        a = addrs[i]
        n = np.int64(_u64(a + len_off))
        st = np.int64(_u32(a + state_off))
        kind = (st >> kind_shift) & 7
        p = offsets[i]
        if (st >> ascii_bit) & 1 == 1:
            out[p:p + n] = carray(_p8(a + ascii_data), n)
        elif kind == 1:
            _encode(carray(_p8(a + compact_data), n), out, p)
        elif kind == 2:
            _encode(carray(_p16(a + compact_data), n), out, p)
        else:
            _encode(carray(_p32(a + compact_data), n), out, p)


# One call from the list to the buffer, with the GIL held all along (nogil=False): no other Python
# thread can change the list or drop a str while the threads read them.
@cpu_kernel(nogil=False)
def _convert(list_addr, str_type, layout):
    """(ok, UTF-8 bytes, byte offsets) of the list at list_addr (ok False: the plain path must run)."""
    n = np.int64(_u64(list_addr + _LIST_SIZE))
    items = np.int64(_u64(list_addr + _LIST_ITEMS))
    addrs = np.empty(n, np.int64)
    for i in range(n):
        addrs[i] = np.int64(_u64(items + 8 * i))
    nbytes = np.empty(n, np.int64)
    _sizes(addrs, str_type, layout, nbytes)
    offsets = np.zeros(n + 1, np.int64)
    total = 0
    for i in range(n):
        if nbytes[i] < 0:
            return False, np.empty(0, np.uint8), offsets
        total += nbytes[i]
        offsets[i + 1] = total
    out = np.empty(total, np.uint8)
    _fill(addrs, layout, offsets, out)
    return True, out, offsets


def _probe():
    """The header layout of this interpreter's str, or None where it cannot be relied on."""
    if sys.implementation.name != "cpython" or struct.calcsize("P") != 8 or sysconfig.get_config_var(
            "Py_GIL_DISABLED") or not _list_layout_ok():
        return None
    # built at run time, so that none is an interned (or statically allocated) string
    samples = {"".join(["a", "b"]): 1, "".join(["\xe9", "b"]): 1, "".join(["\u0100", "b"]): 2,
               "".join(["\U00010000", "b"]): 4}
    ascii_data = sys.getsizeof("") - 1  # header + the terminating NUL
    # (fresh strings: no cached UTF-8 copy, not a static one-character string)
    heads = {sys.getsizeof(t) - (len(t) + 1) * k for t, k in samples.items() if k > 1 or not t.isascii()}
    if len(heads) != 1:
        return None
    compact_data = heads.pop()
    len_off = 16  # after the reference count and the type pointer
    if any(ctypes.c_ssize_t.from_address(id(s) + len_off).value != len(s) for s in samples):
        return None
    state_off = len_off + 16  # after the length and the cached hash
    # the flags live in the state word's low byte (the bits above it are unused, even uninitialized)
    states = {s: ctypes.c_uint32.from_address(id(s) + state_off).value & 0xFF for s in samples}
    for kind_shift in range(0, 6):  # the kind field: 1, 1, 2, 4 for the samples
        if all((states[s] >> kind_shift) & 7 == k for s, k in samples.items()):
            break
    else:
        return None
    ascii_sample, *others = samples
    common = states[ascii_sample] & states[others[0]] & states[others[1]] & states[others[2]]
    only_ascii = states[ascii_sample] & ~(states[others[0]] | states[others[1]] | states[others[2]])
    kind_bits = 7 << kind_shift
    compact = [b for b in range(8) if (common >> b) & 1 and not (kind_bits >> b) & 1]
    ascii_ = [b for b in range(8) if (only_ascii >> b) & 1 and not (kind_bits >> b) & 1]
    if not compact or len(ascii_) != 1:
        return None
    for compact_bit in compact:  # the compact flag is set in every one of the samples; try each such bit
        layout = np.array([len_off, state_off, kind_shift, compact_bit, ascii_[0], ascii_data, compact_data], np.int64)
        if _check(layout):
            return layout
    return None


def _check(layout):
    texts = ["", "plain ascii", "caf\xe9 \xff", "\u0100\u4e00 x \uffff", "\U0001F600 \U00010000x", "a" * 1000,
             "\u00e9" * 300 + "\U0010FFFF", str(sys.maxsize)]
    got = convert(texts, layout)
    return got is not None and bytes(got[0]) == "".join(texts).encode("utf-8") and \
        got[1].tolist() == np.cumsum([0] + [len(t.encode("utf-8")) for t in texts]).tolist()


def _list_layout_ok():
    texts = ["".join(["a", str(i)]) for i in range(5)]
    if ctypes.c_ssize_t.from_address(id(texts) + _LIST_SIZE).value != len(texts):
        return False
    items = ctypes.c_void_p.from_address(id(texts) + _LIST_ITEMS).value
    return list((ctypes.c_void_p * len(texts)).from_address(items)) == [id(t) for t in texts]


def convert(texts, layout=None):
    """(UTF-8 bytes, byte offsets) of a list of str, or None when the plain path must take it."""
    if type(texts) is not list:
        return None
    global _LAYOUT
    if layout is None:
        if _LAYOUT is False:
            _LAYOUT = _probe()
        layout = _LAYOUT
    if layout is None:
        return None
    ok, out, offsets = _convert(id(texts), id(str), layout)
    return (out, offsets) if ok else None


_LAYOUT = False  # not probed yet (the first conversion does it)
