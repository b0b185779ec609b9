"""UTF-8 stepping and decoding on byte arrays (input is validated before it reaches a kernel)."""
from .._numba import jitable


@jitable
def seq_len(b):
    """Length of the UTF-8 sequence that starts with byte `b`."""
    if b < 0x80:
        return 1
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 3
    return 4


@jitable
def decode(data, p):
    """(code point, length) of the character starting at data[p]."""
    b0 = int(data[p])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (int(data[p + 1]) & 0x3F), 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((int(data[p + 1]) & 0x3F) << 6) | (int(data[p + 2]) & 0x3F), 3
    return (((b0 & 0x07) << 18) | ((int(data[p + 1]) & 0x3F) << 12)
            | ((int(data[p + 2]) & 0x3F) << 6) | (int(data[p + 3]) & 0x3F)), 4


@jitable
def char_start_before(data, p, lo):
    """Start of the character that ends right before byte p (p > lo)."""
    q = p - 1
    while q > lo and (int(data[q]) & 0xC0) == 0x80:
        q -= 1
    return q


@jitable
def encoded_len(c):
    """Length of code point c in UTF-8."""
    if c < 0x80:
        return 1
    if c < 0x800:
        return 2
    if c < 0x10000:
        return 3
    return 4


@jitable
def encode(out, o, c):
    """Writes code point c as UTF-8 at out[o]; returns its length."""
    if c < 0x80:
        out[o] = c
        return 1
    if c < 0x800:
        out[o] = 0xC0 | (c >> 6)
        out[o + 1] = 0x80 | (c & 0x3F)
        return 2
    if c < 0x10000:
        out[o] = 0xE0 | (c >> 12)
        out[o + 1] = 0x80 | ((c >> 6) & 0x3F)
        out[o + 2] = 0x80 | (c & 0x3F)
        return 3
    out[o] = 0xF0 | (c >> 18)
    out[o + 1] = 0x80 | ((c >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((c >> 6) & 0x3F)
    out[o + 3] = 0x80 | (c & 0x3F)
    return 4


@jitable
def skip_forward(data, p, end, table, mask):
    """(first position from p, before end, whose character has no `mask` bit in `table`; characters skipped)."""
    k = 0
    while p < end:
        c, n = decode(data, p)
        if (table[c] & mask) == 0:
            break
        p += n
        k += 1
    return p, k


@jitable
def skip_backward(data, p, lo, table, mask):
    """The same walking left from p (not below lo): (start of the run of `mask` characters ending at p; count)."""
    k = 0
    while p > lo:
        r = char_start_before(data, p, lo)
        c, _ = decode(data, r)
        if (table[c] & mask) == 0:
            break
        p = r
        k += 1
    return p, k
