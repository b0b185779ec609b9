"""Pre-tokenizers: each turns a piece of text into words (byte spans) inside the row kernels.

`split_piece` is the single dispatch point the row kernels call; a new pre-tokenizer adds a kind
code here and a module beside this one.
"""
from .._numba import jitable
from . import byte_level

WHOLE = 0        # no pre-tokenizer, or ByteLevel(use_regex=False): the piece is one word
GPT2 = 1         # ByteLevel(use_regex=True)


@jitable
def split_piece(data, a, b, kind, add_prefix_space, classes, write, ws, we, wv, wk, k):
    """Appends the words of piece [a, b) at index k (when `write`) and returns the new count."""
    if a >= b:
        return k
    virt = 1 if (add_prefix_space and data[a] != 32) else 0
    if kind == WHOLE:
        if write:
            ws[k] = a
            we[k] = b
            wv[k] = virt
            wk[k] = -1
        return k + 1
    p = a - virt
    while p < b:
        e = byte_level.match_end(data, p, a, b, virt, classes)
        if write:
            ws[k] = a if p < a else p
            we[k] = e
            wv[k] = 1 if p < a else 0
            wk[k] = -1
        k += 1
        p = e
    return k
