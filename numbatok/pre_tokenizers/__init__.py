"""Pre-tokenizers: each turns a piece of text into words (byte spans) inside the row kernels.

A pre-tokenizer is compiled into a small program (`prog`, int64): prog[0] is the number of stages,
then (kind, arg) per stage. GPT2 and WHOLE are single-stage byte-level programs (they may carry the
virtual prefix space); SPLIT stages (arg = class mask | behaviour << 8) nest, each applied to the
pieces of the one before, as the reference applies a Sequence; CL100K and O200K are Splits by those
families' regexes (`patterns`), single-stage. `split_piece` is the single dispatch
point the row kernels call; a new pre-tokenizer adds a kind here and a module beside this one.
"""
from .._numba import jitable
from . import byte_level
from ..kernels.utf8 import decode
from .patterns import pattern_end
from .splitting import ISOLATED, REMOVED, next_split

WHOLE = 0        # no pre-tokenizer, or ByteLevel(use_regex=False): the piece is one word
GPT2 = 1         # ByteLevel(use_regex=True)
SPLIT = 2        # split by a character class with a delimiter behaviour
CL100K = 3       # Split by the cl100k pattern (arg: the most digits in a number)
O200K = 4        # Split by the o200k pattern
MAX_STAGES = 3


@jitable
def _emit(write, ws, we, wv, wk, k, s, e, virt):
    if write:
        ws[k] = s
        we[k] = e
        wv[k] = virt
        wk[k] = -1
    return k + 1


@jitable
def split_piece(data, a, b, prog, add_prefix_space, classes, write, ws, we, wv, wk, k):
    """Appends the words of piece [a, b) at index k (when `write`) and returns the new count."""
    if a >= b:
        return k
    kind = prog[1]
    if kind == SPLIT:
        return _split_stages(data, a, b, prog, classes, write, ws, we, wv, wk, k)
    if kind == CL100K or kind == O200K:
        p = a
        while p < b:
            e = pattern_end(data, p, b, classes, kind, prog[2])
            k = _emit(write, ws, we, wv, wk, k, p, e, 0)
            p = e
        return k
    virt = 1 if (add_prefix_space and data[a] != 32) else 0
    if kind == WHOLE:
        return _emit(write, ws, we, wv, wk, k, a, b, virt)
    p = a - virt
    while p < b:
        e = byte_level.match_end(data, p, a, b, virt, classes)
        k = _emit(write, ws, we, wv, wk, k, a if p < a else p, e, 1 if p < a else 0)
        p = e
    return k


@jitable
def _split_stages(data, a, b, prog, classes, write, ws, we, wv, wk, k):
    # Up to MAX_STAGES nested SPLIT stages, written out (kernels cannot recurse).
    n = prog[0]
    m1, b1 = prog[2] & 0xFF, prog[2] >> 8
    if n == 2 and b1 == REMOVED and (prog[4] >> 8) == ISOLATED:
        return _removed_isolated(data, a, b, m1, prog[4] & 0xFF, classes, write, ws, we, wv, wk, k)
    p1 = a
    while True:
        s1, e1 = next_split(data, p1, b, m1, b1, classes)
        if s1 >= b:
            break
        p1 = e1
        if n == 1:
            k = _emit(write, ws, we, wv, wk, k, s1, e1, 0)
            continue
        m2, b2 = prog[4] & 0xFF, prog[4] >> 8
        p2 = s1
        while True:
            s2, e2 = next_split(data, p2, e1, m2, b2, classes)
            if s2 >= e1:
                break
            p2 = e2
            if n == 2:
                k = _emit(write, ws, we, wv, wk, k, s2, e2, 0)
                continue
            m3, b3 = prog[6] & 0xFF, prog[6] >> 8
            p3 = s2
            while True:
                s3, e3 = next_split(data, p3, e2, m3, b3, classes)
                if s3 >= e2:
                    break
                p3 = e3
                k = _emit(write, ws, we, wv, wk, k, s3, e3, 0)
    return k


@jitable
def _removed_isolated(data, a, b, m1, m2, classes, write, ws, we, wv, wk, k):
    # The two stages of BertPreTokenizer (whitespace removed, then punctuation isolated) as one walk:
    # the same words as the nested loops, one class lookup per character.
    p = a
    while p < b:
        c, n = decode(data, p)
        cl = classes[c]
        if cl & m1:
            p += n
            continue
        if cl & m2:
            k = _emit(write, ws, we, wv, wk, k, p, p + n, 0)
            p += n
            continue
        q = p + n
        while q < b:
            x = data[q]
            if x < 128:
                if classes[x] & (m1 | m2):
                    break
                q += 1
            else:
                c, n = decode(data, q)
                if classes[c] & (m1 | m2):
                    break
                q += n
        k = _emit(write, ws, we, wv, wk, k, p, q, 0)
        p = q
    return k
