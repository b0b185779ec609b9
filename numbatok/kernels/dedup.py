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


@cpu_kernel(parallel=True)
def distinct_words(data, ws, we, wv, wk, hashes, parts):
    """(uid per word, first occurrence of each distinct word): words i and j get the same uid exactly
    when they are byte-identical with the same prefix flag and kind. The words are split into `parts`
    by their hash's high bits, each part deduplicated in a table of its own on its own thread (the
    hash kept in the slot, so that a probe that misses reads one line; the table sized by the
    distinct words found), then the parts' distinct words numbered one after another. On one thread
    this was a quarter of a 6.4 MB call's spans path; a small call runs its serial twin, one part."""
    n = ws.shape[0]
    part = np.empty(n, np.int64)
    pstart = np.zeros(parts + 1, np.int64)
    for i in range(n):
        p = np.int64((hashes[i] >> np.uint64(48)) % np.uint64(parts))
        part[i] = p
        pstart[p + 1] += 1
    for p in range(parts):
        pstart[p + 1] += pstart[p]
    order = np.empty(n, np.int64)
    fill = pstart[:parts].copy()
    for i in range(n):
        order[fill[part[i]]] = i
        fill[part[i]] += 1
    uid = np.empty(n, np.int64)
    firsts = np.empty(n, np.int64)  # part p's distinct words from pstart[p] on
    count = np.zeros(parts + 1, np.int64)
    for p in prange(parts):
        lo, hi = pstart[p], pstart[p + 1]
        size = 2
        while size < min(2 * (hi - lo) + 2, 1 << 10):
            size *= 2
        mask = size - 1
        slot = np.full((size, 2), -1, np.int64)  # (distinct word, its hash): one line per probe
        c = 0
        for k in range(lo, hi):
            i = order[k]
            h = hashes[i]
            s = np.int64(h & np.uint64(mask))
            while True:
                u = slot[s, 0]
                if u < 0:
                    slot[s, 0] = c
                    slot[s, 1] = np.int64(h)
                    firsts[lo + c] = i
                    uid[i] = c
                    c += 1
                    if 2 * c > size:  # (sized by the distinct words found, not by all: text repeats them)
                        size *= 2
                        mask = size - 1
                        slot = np.full((size, 2), -1, np.int64)
                        for v in range(c):
                            hv = hashes[firsts[lo + v]]
                            t = np.int64(hv & np.uint64(mask))
                            while slot[t, 0] >= 0:
                                t = (t + 1) & mask
                            slot[t, 0] = v
                            slot[t, 1] = np.int64(hv)
                    break
                if slot[s, 1] == np.int64(h) and same_word(data, ws, we, wv, wk, i, firsts[lo + u]):
                    uid[i] = u
                    break
                s = (s + 1) & mask
        count[p + 1] = c
    for p in range(parts):
        count[p + 1] += count[p]
    first = np.empty(count[parts], np.int64)
    for p in prange(parts):
        m = count[p + 1] - count[p]
        first[count[p]:count[p] + m] = firsts[pstart[p]:pstart[p] + m]
    for i in prange(n):
        uid[i] += count[part[i]]
    return uid, first
