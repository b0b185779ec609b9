"""Word -> ids cache in flat arrays, kept by a Tokenizer across calls (CPU fast path).

A word's tokens depend only on its model-space bytes (the virtual prefix space included), so a
word seen once never runs the model again: real text repeats words heavily, and re-encoding a
corpus is then mostly hashing and copying.

Only words of up to KEY_BYTES model-space bytes are cached (nearly all words of prose); their bytes
are packed into two uint64 in the record itself, so a probe reads one 32-byte record and compares
whole keys exactly: no collision can hand a word another word's ids, and nothing else is touched
until the ids are copied. Record (uint64 x 4, hash 0 = empty):
    hash | 1,  key bytes 0-7,  key bytes 8-15,  length | n_ids << 8 | ids offset << 16
The same records serve the per-chunk tables of one call (ids offset = where the word's ids were
first written in that call's output) and the shared table (ids offset into `idata`).
"""
import threading

import numpy as np

from .._numba import cpu_kernel, jitable

KEY_BYTES = 16


@jitable
def pack_key(data, s, e, virt):
    """(hash, k0, k1) of a word of at most KEY_BYTES model-space bytes."""
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    j = 0
    if virt:
        k0 = np.uint64(32)
        j = 1
    for i in range(s, e):
        if j < 8:
            k0 |= np.uint64(data[i]) << np.uint64(8 * j)
        else:
            k1 |= np.uint64(data[i]) << np.uint64(8 * (j - 8))
        j += 1
    h = (k0 * np.uint64(0x9E3779B97F4A7C15)) ^ (k1 * np.uint64(0xC2B2AE3D27D4EB4F)) ^ np.uint64(j)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h | np.uint64(1), k0, k1


@jitable
def probe(rec, h, k0, k1, m):
    """Slot holding the key, or -(empty slot where it would go) - 1. The table is never full."""
    mask = rec.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    while True:
        r = rec[i, 0]
        if r == 0:
            return -i - 1
        if r == h and rec[i, 1] == k0 and rec[i, 2] == k1 and (rec[i, 3] & np.uint64(255)) == np.uint64(m):
            return i
        i = (i + 1) & mask


@jitable
def meta(m, n_ids, off):
    return np.uint64(m) | (np.uint64(n_ids) << np.uint64(8)) | (np.uint64(off) << np.uint64(16))


@jitable
def meta_ids(v):
    """(n_ids, ids offset) of a record's last word."""
    return np.int64((v >> np.uint64(8)) & np.uint64(255)), np.int64(v >> np.uint64(16))


@cpu_kernel
def insert_new(local, out, rec, idata, state):
    """Adds the words of one call's per-chunk tables (`local`, ids in `out`) to the shared table.
    state = [entries, ids used, max entries]. Returns how many did not fit (the caller grows the
    arrays and calls again)."""
    n = state[0]
    ni = state[1]
    left = 0
    for j in range(local.shape[0]):
        h = local[j, 0]
        if h == 0:
            continue
        k0, k1, v = local[j, 1], local[j, 2], local[j, 3]
        m = np.int64(v & np.uint64(255))
        slot = probe(rec, h, k0, k1, m)
        if slot >= 0:
            continue
        if n >= state[2]:
            break
        k, p = meta_ids(v)
        if 2 * (n + 1) > rec.shape[0] or ni + k > idata.shape[0]:
            left += 1
            continue
        for q in range(k):
            idata[ni + q] = out[p + q]
        slot = -slot - 1
        rec[slot, 1] = k0
        rec[slot, 2] = k1
        rec[slot, 3] = meta(m, k, ni)
        rec[slot, 0] = h  # last: a concurrent reader never sees a half-written record
        ni += k
        n += 1
    state[0] = n
    state[1] = ni
    return left


@cpu_kernel
def _rehash(old, rec):
    for j in range(old.shape[0]):
        h = old[j, 0]
        if h != 0:
            slot = -probe(rec, h, old[j, 1], old[j, 2], np.int64(old[j, 3] & np.uint64(255))) - 1
            for q in range(4):
                rec[slot, q] = old[j, q]


class WordCache:
    """One Tokenizer's word cache. Grows by doubling up to `max_entries` words, then stops adding
    (what is cached stays correct; new words just run the model)."""

    def __init__(self, max_entries=1 << 21):
        self.lock = threading.Lock()
        self.max_entries = max_entries
        self.readers = 0
        self.clear()

    def clear(self):
        self.rec = np.zeros((1 << 15, 4), np.uint64)
        self.idata = np.zeros(1 << 16, np.int32)
        self.state = np.array([0, 0, self.max_entries], np.int64)

    def __len__(self):
        return int(self.state[0])

    def __getstate__(self):  # a pickled tokenizer (multiprocessing, Ray) starts with an empty cache
        return {"max_entries": self.max_entries}

    def __setstate__(self, state):
        self.__init__(state["max_entries"])

    def add(self, local, out):
        with self.lock:
            if self.readers:  # another call is reading these records: write a copy
                self.rec = self.rec.copy()
            while insert_new(local, out, self.rec, self.idata, self.state):
                self._grow()

    def snapshot(self):
        """(records, ids) for a call's lookups, a pair that belongs together and that nobody writes
        to until `release` (ids are only appended; records are copied when a reader is active)."""
        with self.lock:
            self.readers += 1
            return self.rec, self.idata

    def release(self):
        with self.lock:
            self.readers -= 1

    def _grow(self):
        # New arrays, never resized in place: a call still reading the old pair stays consistent
        # (its records only ever point into its own ids array).
        n, ni = int(self.state[0]), int(self.state[1])
        size = self.rec.shape[0] * (2 if 2 * (n + 1) > self.rec.shape[0] else 1)
        idata = self.idata
        if 4 * ni > 3 * idata.shape[0]:
            idata = np.concatenate([idata, np.zeros_like(idata)])
        rec = np.zeros((size, 4), np.uint64)
        _rehash(self.rec, rec)
        self.rec, self.idata = rec, idata
