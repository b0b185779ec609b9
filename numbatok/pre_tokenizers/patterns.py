"""Split with the regex of a known tokenizer family, as hand-written scanners.

The reference runs a Split's regex with a backtracking engine (leftmost-first alternation, greedy
quantifiers). Each `*_end` function here walks forward once and returns the same end for the match
at p. Their match covers every character, so Split(Isolated) and Split(Removed, invert) of these
patterns give the same pieces: one per match. Patterns are recognized by their exact text:

  CL100K   cl100k_base (GPT-4, Llama 3); arg: the most digits in a number (3; 1 for Qwen2's variant)
  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+

  O200K    o200k_base (GPT-4o): cased letter runs with an optional contraction, '/' after symbols
  [^\\r\\n\\p{L}\\p{N}]?[UP]*[LO]+(?i:'s|...)?|[^\\r\\n\\p{L}\\p{N}]?[UP]+[LO]*(?i:'s|...)?|\\p{N}{1,3}|
  ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+      (UP = [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}],
                                                           LO = [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])

The GPT-2 pattern itself maps to the ByteLevel scanner (`byte_level.match_end`). The character
classes are the reference engine's (`unicode_tables`).
"""
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from .._numba import jitable
from ..kernels.utf8 import decode
from ..unicode_tables import LOWERISH, L, N, S, UPPERISH
from .byte_level import _byte_classes, block_masks, word_starts


_CONTRACTIONS = "'s|'t|'re|'ve|'m|'ll|'d"
GPT2_PATTERN = _CONTRACTIONS + r"| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
CL100K_PATTERN = (r"(?i:" + _CONTRACTIONS + r")|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = CL100K_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
_UP, _LO = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
O200K_PATTERN = (rf"[^\r\n\p{{L}}\p{{N}}]?{_UP}*{_LO}+(?i:{_CONTRACTIONS})?|"
                 rf"[^\r\n\p{{L}}\p{{N}}]?{_UP}+{_LO}*(?i:{_CONTRACTIONS})?|"
                 r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@jitable
def _char(data, q, classes):
    """(code point, its classes, its length) of the character at q."""
    x = data[q]
    if x < 128:
        return int(x), classes[x], 1
    c, n = decode(data, q)
    return c, classes[c], n


@jitable
def _run(data, q, b, classes, mask):
    """End of the run of characters with any bit of `mask` from q."""
    while q < b:
        _, k, n = _char(data, q, classes)
        if (k & mask) == 0:
            break
        q += n
    return q


@jitable
def contraction_end(data, q, b):
    """End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at q, or q. Case folding as the reference's: 's' also
    matches U+017F (long s, UTF-8 C5 BF); no other character folds to these letters."""
    if q + 1 >= b or data[q] != 39:
        return q
    x = data[q + 1] | 32
    if x == 115 or x == 116 or x == 109 or x == 100:  # s t m d (upper case too: | 32)
        if data[q + 1] < 128:
            return q + 2
    if data[q + 1] == 0xC5 and q + 2 < b and data[q + 2] == 0xBF:
        return q + 3
    if q + 2 < b and data[q + 1] < 128 and data[q + 2] < 128:
        y = data[q + 2] | 32
        if (x == 114 and y == 101) or (x == 118 and y == 101) or (x == 108 and y == 108):  # re ve ll
            return q + 3
    return q


@jitable
def _symbols_end(data, p, b, classes, slash):
    """` ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*` (with '/' in the last class when `slash`) at p, or -1."""
    q = p
    if data[q] == 32 and q + 1 < b:
        _, k, _n = _char(data, q + 1, classes)
        if (k & (L | N | S)) == 0:
            q += 1
    _, k, n = _char(data, q, classes)
    if (k & (L | N | S)) != 0:
        return -1
    q += n
    while q < b:
        _, k, n = _char(data, q, classes)
        if (k & (L | N | S)) != 0:
            break
        q += n
    while q < b and (data[q] == 10 or data[q] == 13 or (slash and data[q] == 47)):
        q += 1
    return q


@jitable
def _spaces_end(data, p, b, classes):
    """`\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+` at p, where a whitespace character starts."""
    q = p
    nl = -1   # the run's last \r or \n: \s* gives back the run down to it, [\r\n]+ takes it
    last = p  # the run's last character: \s+(?!\S) gives it back before a non-space
    while q < b:
        c, k, n = _char(data, q, classes)
        if (k & S) == 0:
            break
        if c == 10 or c == 13:
            nl = q
        last = q
        q += n
    if nl >= 0:
        return nl + 1
    if q < b and last > p:
        return last
    return q


@jitable
def _symbols_or_spaces_end(data, p, b, classes, c, k, slash):
    """The patterns' last four branches at p, whose character c (classes k) is neither a letter nor a
    digit: the symbol run (with '/' after it when `slash`), else the whitespace ones."""
    if (k & S) == 0 or c == 32:
        e = _symbols_end(data, p, b, classes, slash)
        if e >= 0:
            return e
    return _spaces_end(data, p, b, classes)


@jitable
def _digits_end(data, p, b, classes, most):
    q = p
    i = 0
    while q < b and i < most:
        _, k, n = _char(data, q, classes)
        if (k & N) == 0:
            break
        q += n
        i += 1
    return q


@jitable
def cl100k_end(data, p, b, classes, most_digits):
    """End of the cl100k pattern's match at p < b (Llama 3's and, with most_digits 1, Qwen2's)."""
    c, k, n = _char(data, p, classes)
    if c == 39:
        e = contraction_end(data, p, b)
        if e > p:
            return e
    if (k & L) != 0:
        return _run(data, p + n, b, classes, L)
    if (k & N) != 0:
        return _digits_end(data, p, b, classes, most_digits)
    if c != 10 and c != 13 and p + n < b:  # [^\r\n\p{L}\p{N}]? before \p{L}+
        _, k1, n1 = _char(data, p + n, classes)
        if (k1 & L) != 0:
            return _run(data, p + n + n1, b, classes, L)
    return _symbols_or_spaces_end(data, p, b, classes, c, k, False)


@jitable
def _cased_lower_end(data, s, b, classes):
    """`[UP]*[LO]+` then an optional contraction at s, or -1: UP* gives back down to the last
    character that can start LO+ (a character in both classes, or the first one after the run)."""
    q = s
    both = -1
    while q < b:
        _, k, n = _char(data, q, classes)
        if (k & UPPERISH) == 0:
            break
        if (k & LOWERISH) != 0:
            both = q
        q += n
    if q < b and (_char(data, q, classes)[1] & LOWERISH) != 0:
        i = q
    elif both >= 0:
        i = both
    else:
        return -1
    return contraction_end(data, _run(data, i, b, classes, LOWERISH), b)


@jitable
def _cased_upper_end(data, s, b, classes):
    """`[UP]+[LO]*` then an optional contraction at s, or -1."""
    q = _run(data, s, b, classes, UPPERISH)
    if q == s:
        return -1
    return contraction_end(data, _run(data, q, b, classes, LOWERISH), b)


@jitable
def o200k_end(data, p, b, classes):
    """End of the o200k pattern's match at p < b."""
    c, k, n = _char(data, p, classes)
    lead = c != 10 and c != 13 and (k & (L | N)) == 0 and p + n < b  # [^\r\n\p{L}\p{N}]? can take c
    cased = (k & (UPPERISH | LOWERISH)) != 0
    if lead:
        e = _cased_lower_end(data, p + n, b, classes)
        if e >= 0:
            return e
    if cased:
        e = _cased_lower_end(data, p, b, classes)
        if e >= 0:
            return e
    if lead:
        e = _cased_upper_end(data, p + n, b, classes)
        if e >= 0:
            return e
    if cased:
        return _cased_upper_end(data, p, b, classes)  # (never -1: c itself is in UP or LO)
    if (k & N) != 0:
        return _digits_end(data, p, b, classes, 3)
    return _symbols_or_spaces_end(data, p, b, classes, c, k, True)


@jitable
def pattern_end(data, p, b, classes, kind, arg):
    """End of the match at p of the cl100k (kind 3, arg: its most digits) or o200k (kind 4) pattern."""
    if kind == 3:
        return cl100k_end(data, p, b, classes, arg)
    return o200k_end(data, p, b, classes)


# ---- the cached-words loops' starts for ASCII text (`byte_level.next_start`), as GPT-2's `word_starts` ----
# Where a pre-token starts follows from the classes of the two bytes before a byte, the byte and the
# one after it, for ASCII without apostrophes, except in a whitespace run that holds a \r or \n
# before its end (`\s*[\r\n]+` reaches back to its first character): the caller reads a word that
# starts with two whitespace characters with `pattern_end`. A letter starts one unless a letter, or a
# space or tab (the optional character before it), comes just before it, or a symbol that does not
# follow another symbol or a space (a symbol run takes those). A digit starts one after a non-digit
# (the caller cuts a run at its most digits); a symbol after anything but a symbol or a space; a \r or
# \n after a letter or digit (a symbol run or whitespace before it takes it); a whitespace character
# other than those after a non-space, after a \r or \n, or when the next byte is not whitespace.
# o200k also starts a word at an upper-case letter after a lower-case one.


@jitable
def _one(data, i, a):
    """`_byte_classes` of data[i] and whether it is a symbol (not a letter, digit or whitespace),
    all 0 when i is before the piece's start a."""
    z = np.uint64(0)
    if i < a:
        return z, z, z, z, z, z, z
    w, s, l, d, n, u = _byte_classes(data[i])
    return w, s, l, d, n, u, np.uint64(1) - (w | l | d)


@jitable
def pattern_starts(data, q, a, b, cased):
    """Bit i set: a pre-token of the cl100k pattern (o200k's when `cased`) in piece [a, b) starts at
    q + i, where the rules above hold. Bytes from b on count as whitespace."""
    one = np.uint64(1)
    ws, sp, le, di, nl, up = block_masks(data, q, b)
    sym = ~(ws | le | di)
    w1, s1, l1, d1, n1, u1, o1 = _one(data, q - 1, a)
    _, s2, _, _, _, _, o2 = _one(data, q - 2, a)
    nw = one
    if q + 64 < b:
        nw = _byte_classes(data[q + 64])[0]
    pw = (ws << one) | w1
    ps = (sp << one) | s1
    pl = (le << one) | l1
    pd = (di << one) | d1
    pn = (nl << one) | n1
    po = (sym << one) | o1
    ppo = (sym << np.uint64(2)) | (o1 << one) | o2
    pps = (sp << np.uint64(2)) | (s1 << one) | s2
    nw = (ws >> one) | (nw << np.uint64(63))
    st = le & ~pl & ~(pw & ~pn) & ~(po & ~(ppo | pps))
    if cased:
        st |= up & pl & ~((up << one) | u1)
    st |= di & ~pd
    st |= sym & ~po & ~ps
    st |= nl & (pl | pd)
    st |= ws & ~nl & (~pw | pn | ~nw)
    if q == a:
        st |= one
    return st


@jitable
def _starts(data, q, a, b, kind):
    return word_starts(data, q, a, b) if kind == 0 else pattern_starts(data, q, a, b, kind == 2)


@jitable(inline="always")  # (CPU loops only: as a call, once a word, the patterns' loops took 1.25x the time)
def next_start(data, p, a, b, q, st, kind):
    """(the first pre-token start after p in piece [a, b), or b; q and st updated): the start bits st of
    data[q:q + 64] (`word_starts` for GPT-2's pattern, kind 0; `pattern_starts` for cl100k's, 1, and
    o200k's, 2) are reused while p moves through those bytes (start a piece with q = a - 128)."""
    if kind == 0:  # (a constant in GPT-2's loops, whose version LLVM inlines whole: 0.8x the time of this split)
        return _next_start_on(data, p, a, b, q, st, 0)
    t = p + 1
    if q <= t < q + 64:
        bits = st >> np.uint64(t - q)
        if bits != 0:
            return t + np.int64(trailing_zeros(bits)), q, st
    return _next_start_on(data, p, a, b, q, st, kind)


@jitable
def _next_start_on(data, p, a, b, q, st, kind):
    """`next_start` past the bits it holds: the next blocks' masks."""
    t = p + 1
    while t < b:
        if t < q or t >= q + 128:
            q = t
            st = _starts(data, q, a, b, kind)
        elif t >= q + 64:
            q += 64
            st = _starts(data, q, a, b, kind)
        bits = st >> np.uint64(t - q)
        if bits != 0:
            return t + np.int64(trailing_zeros(bits)), q, st
        t = q + 64
    return b, q, st
