"""ByteLevel pre-tokenizer: the GPT-2 split pattern as a hand-written scanner, plus the byte <-> char map.

The reference matches
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
with a backtracking engine, leftmost-first. `match_end` reproduces it exactly with one forward
walk (the classes come from `unicode_tables`, verified against the reference per code point). The
byte-to-unicode map is applied implicitly: numbatok keeps words as raw bytes and keys the
vocabulary by the bytes each token stands for, which is the same bijection without the detour.

Left out: `add_prefix_space` is a virtual leading space (a flag on the word), never a copy.
"""
import types

import numpy as np

from numba.cpython.unsafe.numbers import trailing_zeros

from ..kernels.lines import load8
from ..kernels.utf8 import decode
from ..unicode_tables import L, N, S
from .._numba import ascii_masks, jitable

NAME = "ByteLevel"


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


# str.translate + latin-1 does the per-character map in C (vocabulary loading calls this for every
# token); characters outside the map become U+FFFF, which latin-1 refuses.
_TO_LATIN1 = {ord(c): chr(b) for c, b in CHAR_TO_BYTE.items()}
_TO_LATIN1.update({o: "\uffff" for o in range(256) if chr(o) not in CHAR_TO_BYTE})


def token_to_bytes(token):
    """The raw bytes a byte-level token stands for, or None if it has characters outside the map."""
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return None


@jitable
def _cp(data, p, a, virt):
    # Character at position p of the piece [a, ...) whose virtual leading space (if any) is at a - 1.
    if virt and p == a - 1:
        return 32, 1
    return decode(data, p)


@jitable
def match_end(data, p, a, b, virt, classes):
    """End of the pre-token starting at p inside piece [a, b) (p may be a - 1 for the virtual space)."""
    c, n = _cp(data, p, a, virt)
    if c == 39 and p + 1 < b:  # contractions, case-sensitive as in the pattern
        c1 = data[p + 1]
        if c1 == 115 or c1 == 116 or c1 == 109 or c1 == 100:  # s t m d
            return p + 2
        if p + 2 < b:
            c2 = data[p + 2]
            if (c1 == 114 and c2 == 101) or (c1 == 118 and c2 == 101) or (c1 == 108 and c2 == 108):
                return p + 3
    k = classes[c] & (L | N | S)
    q = p + n
    want = -1  # the class of the run to extend: L, N, or 0 for [^\s\p{L}\p{N}]
    if c == 32 and q < b:  # ' ?' before a letter, number or other run
        c1, n1 = decode(data, q)
        k1 = classes[c1] & (L | N | S)
        if k1 == L or k1 == N or k1 == 0:
            want = k1
            q += n1
    if want < 0 and (k == L or k == N or k == 0):
        want = k
    if want >= 0:
        # one loop for the three runs, with ASCII read directly (the hot path of every encode)
        while q < b:
            x = data[q]
            if x < 128:
                k1 = classes[x] & (L | N | S)
                n1 = 1
            else:
                c1, n1 = decode(data, q)
                k1 = classes[c1] & (L | N | S)
            if k1 != want and (want == 0 or (k1 & want) == 0):
                break
            q += n1
        return q
    # Whitespace: \s+(?!\S) gives back the last character of a run followed by non-space; a run of
    # one such character falls through to \s+.
    last = p
    while q < b:
        c1, n1 = decode(data, q)
        if (classes[c1] & S) == 0:
            return last if last > p else q
        last = q
        q += n1
    return q


# `match_end` inlined in the lean loop for cached words (`cached_prefix`; warm passes over the UDHR
# 0.81-0.90x the time). A function object of its own, since one object takes one registration; the
# loops that run the model keep the call, and so do the CUDA kernels (numba-cuda fails to type an
# inlined overload).
match_end_inline = jitable(inline="always")(types.FunctionType(match_end.__code__, match_end.__globals__,
                                                                "match_end_inline"))


# The fused CPU loop's ASCII table (`ascii_classes`): low bits, the run a byte continues (0: the first
# byte of a multi-byte character); flags for the bytes it leaves to `match_end` or to the row's
# general path.
RUN_WS = 4
A_GENERAL = 8    # apostrophe (contractions), whitespace other than ' ', non-ASCII: match_end starts the word
A_ADDED = 16     # may start an added token: the row takes the general path (added-token split first)


def ascii_classes(classes, at_first):
    """The 256-entry table `ascii_word` reads, for character classes `classes` and the added tokens'
    first-byte bitmap `at_first`."""
    k = classes[:128] & (L | N | S)
    t = np.full(256, A_GENERAL, np.uint8)
    t[:128] = np.select([k == L, k == N, k == S], [1, 2, RUN_WS], 3)
    t[39] |= A_GENERAL
    t[:128][(k == S) & (np.arange(128) != 32)] |= A_GENERAL
    t[(at_first[0] | at_first[1]) != 0] |= A_ADDED
    return t


@jitable
def _letters8(data, q):
    """(how many of data[q:q + 8] are ASCII letters before the first other byte, those 8 bytes as
    one little-endian word): the bytes classified with a few word-wide operations instead of a
    lookup and a branch per byte (most words of prose are a few letters)."""
    v = np.uint64(0)
    u = np.uint64(q)  # (an unsigned index has no negative-index check: the 8 loads become one)
    for i in range(8):
        v |= np.uint64(data[u + np.uint64(i)]) << np.uint64(8 * i)
    hi = np.uint64(0x8080808080808080)
    x = (v | np.uint64(0x2020202020202020)) & np.uint64(0x7F7F7F7F7F7F7F7F)  # lower case, under 128
    ge_a = (x + np.uint64(0x1F1F1F1F1F1F1F1F)) & hi  # >= 'a' (0x61)
    gt_z = (x + np.uint64(0x0505050505050505)) & hi  # >= '{' (0x7B)
    other = ~(ge_a & ~gt_z & ~v) & hi  # not an ASCII letter (bytes of 128 and up included)
    if other == 0:
        return 8, v
    return np.int64(trailing_zeros(other)) >> 3, v


@jitable(inline="always")  # (left to LLVM, it stops being inlined into the fused loop)
def ascii_word(data, p, b, asc):
    """The pre-token at p when `match_end` would give an all-ASCII letter, number or other run (with
    its optional leading space), read with one table lookup per byte: (end, length, k0, k1), its
    first 16 bytes packed as the word cache's `pack_key` packs them. end = -1: ask `match_end`."""
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    x = data[p]
    cx = asc[x]
    if cx & A_GENERAL:
        return -1, 0, k0, k1
    q = p + 1
    want = cx & 7
    if x == 32:
        if q >= b:
            return -1, 0, k0, k1
        y = data[q]
        want = asc[y]
        if (want & A_GENERAL) or (want & 7) == RUN_WS:
            return -1, 0, k0, k1
        want &= 7
        k0 = np.uint64(32) | (np.uint64(y) << np.uint64(8))
        q += 1
    else:
        k0 = np.uint64(x)
    j = q - p
    if want == 1 and q + 8 <= b:  # letters: the next 8 bytes at once
        t, v = _letters8(data, q)
        if t < 8 and data[q + t] >= 128:
            return -1, 0, k0, k1  # a multi-byte character next: it may continue the run
        run = v if t == 8 else v & ((np.uint64(1) << np.uint64(8 * t)) - np.uint64(1))
        k0 |= run << np.uint64(8 * j)  # (j is 1 or 2 here)
        k1 = run >> np.uint64(64 - 8 * j)
        q += t
        j += t
        if t < 8:
            return q, j, k0, k1
    while q < b:
        y = data[q]
        cy = asc[y] & 7
        if cy != want:
            if cy == 0:
                return -1, 0, k0, k1  # a multi-byte character next: it may continue the run
            break
        if j < 8:
            k0 |= np.uint64(y) << np.uint64(8 * j)
        elif j < 16:
            k1 |= np.uint64(y) << np.uint64(8 * (j - 8))
        j += 1
        q += 1
    return q, j, k0, k1


# ---- the cached-words loop's scanner for ASCII text: pre-token starts from 64-byte bit masks ----
# A byte-at-a-time scanner mispredicts a branch or two at every word's end (a plain loop that only
# splits big.txt into its runs takes 17 ns a word). Here 64 bytes are classified at once by vector
# compares (`ascii_masks`), and a pre-token's start follows from the classes of the byte before it,
# the byte itself and the byte after it; words are then read off the set bits (`word_starts`,
# `next_start`). That holds for ASCII letters, digits, other symbols and whitespace. Apostrophes
# (contractions) and bytes of 128 and up are the exceptions (`next_special`): a word whose bytes, or
# the byte after it, include one is left to `ascii_word` and `match_end`.

_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)


@jitable
def _zero_bytes(t):  # bytes of t equal to 0, as bit 7 of each byte (exact: no borrow between bytes)
    return ~(((t & _LOW7) + _LOW7) | t | _LOW7)


@jitable
def _byte_classes(x):
    """(whitespace, space, letter, digit, \\r or \\n, upper-case letter) of one byte, each 0 or 1, as
    `ascii_masks` classes them."""
    one = np.uint64(1)
    zero = np.uint64(0)
    space = x == 32
    ws = space or 9 <= x <= 13  # \t \n \v \f \r and ' ': \s in ASCII
    letter = 97 <= (x | 32) <= 122
    digit = 48 <= x <= 57
    nl = x == 10 or x == 13
    upper = 65 <= x <= 90
    return (one if ws else zero, one if space else zero, one if letter else zero, one if digit else zero,
            one if nl else zero, one if upper else zero)


@jitable
def next_special(data, p, b):
    """First position >= p in [p, b) of a byte of 128 and up or an apostrophe, else b."""
    while p + 8 <= b:
        v = load8(data, p)
        m = (v & _HIGH) | (_zero_bytes((v & _LOW7) ^ np.uint64(0x2727272727272727)) & ~v & _HIGH)
        if m != 0:
            return p + (np.int64(trailing_zeros(m)) >> 3)
        p += 8
    while p < b:
        x = data[p]
        if x >= 128 or x == 39:
            return p
        p += 1
    return b


@jitable(inline="always")  # (CPU only. Left to LLVM it stayed a call: word_starts took 1.5x the time)
def block_masks(data, q, b):
    """`ascii_masks` of data[q:q + 64] for a piece ending at b: the bytes from b on as whitespace (no
    other class), read one at a time where the buffer ends within the 64 bytes."""
    if q + 64 <= data.shape[0]:  # (the bytes past b are the next piece's: they are masked off below)
        ws, sp, le, di, nl, up = ascii_masks(data, q)
    else:
        ws = sp = le = di = nl = up = np.uint64(0)
        for k in range(b - q):  # (the end of the buffer: b - q < 64)
            w, s, l, d, n, u = _byte_classes(data[q + k])
            sh = np.uint64(k)
            ws |= w << sh
            sp |= s << sh
            le |= l << sh
            di |= d << sh
            nl |= n << sh
            up |= u << sh
    if q + 64 > b:
        beyond = ALL_BITS << np.uint64(b - q)
        keep = ~beyond
        return ws | beyond, sp & keep, le & keep, di & keep, nl & keep, up & keep
    return ws, sp, le, di, nl, up


@jitable
def word_starts(data, q, a, b):
    """Bit i set: a pre-token of piece [a, b) starts at q + i, for ASCII without apostrophes around it.
    Within a run of whitespace the last character before a non-space starts one (a space joins the word
    after it, any other character stands alone); a non-space starts one unless a space comes just before it
    or it continues the run (letters, digits, other) of the byte before it. Bytes from b on count as
    whitespace, so that a run of whitespace at the end stays whole."""
    ws, sp, le, di, _, _ = block_masks(data, q, b)
    pw = np.uint64(0)
    ps = np.uint64(0)
    pl = np.uint64(0)
    pd = np.uint64(0)
    if q > a:
        pw, ps, pl, pd, _, _ = _byte_classes(data[q - 1])
    nw = np.uint64(1)
    if q + 64 < b:
        nw = _byte_classes(data[q + 64])[0]
    pw |= ws << np.uint64(1)
    ps |= sp << np.uint64(1)
    pl |= le << np.uint64(1)
    pd |= di << np.uint64(1)
    nw = (ws >> np.uint64(1)) | (nw << np.uint64(63))
    st = (ws & (~pw | ~nw)) | (~ws & pw & ~ps) | (~ws & ~pw & ((le ^ pl) | (di ^ pd)))
    if q == a:
        st |= np.uint64(1)
    return st
