"""Open-addressing hash tables over flat numpy arrays: the only kind that works inside CUDA kernels.

Bytes -> id tables store ids in power-of-two slot arrays and compare keys against the token-bytes
table (data + offsets), so a probe touches no Python object. Pair tables key (left id, right id)
packed into one int64, with the key and its value side by side in one 16-byte record, so a probe
reads one cache line.
"""
import numpy as np

from .._numba import jitable

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@jitable
def same_bytes(a, ai, b, bi, n):
    """a[ai:ai + n] == b[bi:bi + n]."""
    for j in range(n):
        if a[ai + j] != b[bi + j]:
            return False
    return True


@jitable
def fnv1a(data, s, e):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    return h


@jitable
def bytes_lookup(slots, tok_data, tok_offsets, key, s, e):
    """id whose bytes equal key[s:e], or -1."""
    return bytes_lookup_hashed(slots, tok_data, tok_offsets, fnv1a(key, s, e), key, 0, key, s, e)


@jitable
def bytes_lookup_hashed(slots, tok_data, tok_offsets, h, pre, npre, key, s, e):
    """id whose bytes equal pre[:npre] + key[s:e], whose FNV-1a hash is h; or -1."""
    mask = slots.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    n = npre + e - s
    while True:
        tid = slots[i]
        if tid < 0:
            return -1
        ts = tok_offsets[tid]
        if tok_offsets[tid + 1] - ts == n and same_bytes(tok_data, ts, pre, 0, npre) and \
                same_bytes(tok_data, ts + npre, key, s, e - s):
            return tid
        i = (i + 1) & mask


@jitable
def _pair_hash(key):
    return (np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)


@jitable
def pair_home(flat, compact, key):
    """Index in `flat` (the pair table as one int64 array) of the key's first slot: what to prefetch
    before `pair_value` (CPU loops that merge several words at once)."""
    if compact:
        return np.int64(_pair_hash(key) & np.uint64(flat.shape[0] - 1))
    return 2 * np.int64(_pair_hash(key) & np.uint64((flat.shape[0] >> 1) - 1))


@jitable
def pair_value(table, key):
    """Value stored for `key` in a pair table, or -1."""
    h = _pair_hash(key)
    if table.shape[1] == 4:  # compact: four 8-byte records per row
        mask = table.shape[0] * 4 - 1
        i = np.int64(h & np.uint64(mask))
        while True:
            r = table[i >> 2, i & 3]
            if r == -1:
                return np.int64(-1)
            if (r >> 32) & 0xFFFFFFFF == key:
                return r & 0xFFFFFFFF
            i = (i + 1) & mask
    mask = table.shape[0] - 1
    i = np.int64(h & np.uint64(mask))
    while True:
        k = table[i, 0]
        if k == key:
            return table[i, 1]
        if k < 0:
            return np.int64(-1)
        i = (i + 1) & mask


def build_bytes_table(tok_data, tok_offsets, ids):
    """Slots for the given ids (keys are their bytes in tok_data). Later ids never shadow earlier ones."""
    n = max(len(ids), 1)
    size = 1 << int(np.ceil(np.log2(n * 2 + 1)))
    slots = np.full(size, -1, dtype=np.int32)
    _fill_bytes(slots, tok_data, tok_offsets, np.asarray(ids, dtype=np.int32))
    return slots


def build_pair_table(keys, values, compact=False):
    """(slots, 2) int64 records [key, value] for non-negative int64 keys and values; the last of
    equal keys wins (as a repeated merge in the reference's merge map).

    compact (keys under 2**32 - 1, values under 2**32): 8-byte records key << 32 | value, four per
    row of a (slots / 4, 4) array, which `pair_value` tells by its shape. Half the bytes: more of the
    table stays in cache while a word merges."""
    n = max(len(keys), 1)
    size = 1 << int(np.ceil(np.log2(n * 2 + 1)))  # (at least 4)
    table = np.full((size, 2), -1, dtype=np.int64)
    _fill_pairs(table, np.asarray(keys, np.int64), np.asarray(values, np.int64))
    if compact:  # the same slots, each record packed into 8 bytes (empty stays -1)
        return np.where(table[:, 0] >= 0, (table[:, 0] << 32) | table[:, 1], -1).reshape(size // 4, 4)
    return table


from .._numba import cpu_kernel  # noqa: E402


@cpu_kernel
def _fill_bytes(slots, tok_data, tok_offsets, ids):
    mask = slots.shape[0] - 1
    for t in ids:
        s = tok_offsets[t]
        e = tok_offsets[t + 1]
        if bytes_lookup(slots, tok_data, tok_offsets, tok_data, s, e) >= 0:
            continue
        i = np.int64(fnv1a(tok_data, s, e) & np.uint64(mask))
        while slots[i] >= 0:
            i = (i + 1) & mask
        slots[i] = t


@cpu_kernel
def _fill_pairs(table, keys, values):
    mask = table.shape[0] - 1
    for j in range(keys.shape[0]):
        key = keys[j]
        h = _pair_hash(key)
        i = np.int64(h & np.uint64(mask))
        while table[i, 0] >= 0 and table[i, 0] != key:
            i = (i + 1) & mask
        table[i, 0] = key
        table[i, 1] = values[j]

