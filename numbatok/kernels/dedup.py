"""Word deduplication: the model runs once per distinct word of a batch, not once per occurrence.

Real text repeats words heavily (big.txt: 1.3M words, ~60k distinct), and a word's tokens depend
only on its bytes, its virtual prefix space and its added-token kind. Hashes are computed in
parallel; the table is filled in one pass with a byte-exact comparison on every hash match, so a
collision can never give a word another word's tokens.
"""
import numpy as np

from .._numba import cpu_kernel, jitable, prange
from .hashing import fnv1a, same_bytes


@jitable
def word_hash(data, ws, we, wv, wk, i):
    h = fnv1a(data, ws[i], we[i])
    return (h ^ (np.uint64(wv[i]) << np.uint64(63))) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(wk[i] + 1)


@cpu_kernel(parallel=True)
def word_hashes(data, ws, we, wv, wk):
    out = np.empty(ws.shape[0], np.uint64)
    for i in prange(ws.shape[0]):
        out[i] = word_hash(data, ws, we, wv, wk, i)
    return out


@jitable
def same_word(data, ws, we, wv, wk, i, j):
    if wv[i] != wv[j] or wk[i] != wk[j] or we[i] - ws[i] != we[j] - ws[j]:
        return False
    return same_bytes(data, ws[i], data, ws[j], we[i] - ws[i])


@cpu_kernel
def distinct_words(data, ws, we, wv, wk, hashes):
    """(uid per word, first occurrence of each distinct word): words i and j get the same uid exactly
    when they are byte-identical with the same prefix flag and kind."""
    n = ws.shape[0]
    size = 1
    while size < 2 * n + 2:
        size *= 2
    mask = size - 1
    slots = np.full(size, -1, np.int64)
    uid = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        h = hashes[i]
        s = np.int64(h & np.uint64(mask))
        while True:
            u = slots[s]
            if u < 0:
                slots[s] = count
                first[count] = i
                uid[i] = count
                count += 1
                break
            j = first[u]
            if hashes[j] == h and same_word(data, ws, we, wv, wk, i, j):
                uid[i] = u
                break
            s = (s + 1) & mask
    return uid, first[:count]
