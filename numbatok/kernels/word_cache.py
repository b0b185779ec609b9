"""Word -> ids cache in flat arrays, kept by a Tokenizer across calls (CPU fast path).

A word's tokens depend only on its model-space bytes (the virtual prefix space included), so a
word seen once never runs the model again: real text repeats words heavily, and re-encoding a
corpus is then mostly hashing and copying.

Words of up to KEY_BYTES model-space bytes (nearly all words of alphabetic prose) have their bytes
packed into two uint64 in the record itself, so a probe reads one 32-byte record and compares whole
keys exactly: no collision can hand a word another word's ids, and nothing else is touched until
the ids are copied. Record (uint64 x 4, hash 0 = empty):
    hash | 1,  key bytes 0-7,  key bytes 8-15,  length | n_ids << 8 | ids offset << 16
(a word of up to three ids under 2**16 each, or of two under 2**24, holds them in place of the
offset, with bit 15 set: 16 bits each with bit 14 set as well, else 24; the offset is into `idata`)
Longer words, up to LONG_BYTES (CJK runs and code identifiers are often longer than 16 bytes), keep
their bytes outside the record, in `kdata` (a virtual space included), and are compared 8 bytes at
a time once hash and length match:
    hash | 1,  key bytes offset,  0,  length | n_ids << 8 | ids offset << 16
The loops add a new word as soon as they have its ids (`insert_word`), from every thread at once.
"""
import mmap
import threading

import numpy as np

from .._numba import compare_swap, cpu_kernel, fetch_add, jitable, load_acquire, prange, store_release
from .lines import load8

KEY_BYTES = 16
LONG_BYTES = 255
MAX_IDS = 127                 # words of more ids are not cached
INLINE = np.uint64(1 << 15)   # flag: the record holds its ids itself, one or two under 2**24 each,
PACK16 = np.uint64(1 << 14)   # or, with this flag too, up to three under 2**16 each
ID_MASK = np.uint64((1 << 24) - 1)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@jitable
def pack_key(data, s, e, virt):
    """(hash, k0, k1) of a word of at most KEY_BYTES model-space bytes: two 8-byte loads, masked, where
    16 bytes from its start lie within `data` (a byte at a time, it was a tenth of a warm pass over
    the UDHR and a sixth of a WordPiece one)."""
    m = e - s + virt
    if s + 16 <= data.shape[0]:
        if virt:
            k0 = (load8(data, s) << np.uint64(8)) | np.uint64(32)
            k1 = load8(data, s + 7)
        else:
            k0 = load8(data, s)
            k1 = load8(data, s + 8)
        if m < 8:
            k0 &= ~(_ONES << np.uint64(8 * m))
        if m <= 8:
            k1 = np.uint64(0)
        elif m < 16:
            k1 &= ~(_ONES << np.uint64(8 * (m - 8)))
        return key_hash(k0, k1, m), k0, k1
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
    return key_hash(k0, k1, j), k0, k1


@jitable
def key_hash(k0, k1, m):
    """Hash of a packed key of m bytes (never 0: 0 marks an empty slot)."""
    h = (k0 * np.uint64(0x9E3779B97F4A7C15)) ^ (k1 * np.uint64(0xC2B2AE3D27D4EB4F)) ^ np.uint64(m)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h | np.uint64(1)


@jitable
def home(h, n_slots):
    """A key's first slot. Bit 0 of every hash is 1 (0 marks an empty slot): the slot comes from the
    bits above it, else only odd slots would be first slots (the table half as large as it is, and
    every collision a step into the next cache line)."""
    return np.int64((h >> np.uint64(1)) & np.uint64(n_slots - 1))


@jitable
def probe(rec, h, k0, k1, m):
    """Slot holding the key, or -(empty slot where it would go) - 1. The table is never full."""
    mask = rec.shape[0] - 1
    i = home(h, rec.shape[0])
    while True:
        r = rec[i, 0]
        if r == 0:
            return -i - 1
        if r == h and rec[i, 1] == k0 and rec[i, 2] == k1 and (rec[i, 3] & np.uint64(255)) == np.uint64(m):
            return i
        i = (i + 1) & mask


@jitable
def _mix8(h, w):
    h = (h ^ w) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ (h >> np.uint64(29))


@jitable
def hash_long(data, s, e, virt):
    """Hash of a word of more than KEY_BYTES model-space bytes, 8 bytes at a time (a byte at a time,
    these were a sixth of a warm pass over Japanese prose). It depends on the model-space bytes
    alone: their first byte (the virtual space, else data[s]), then the rest as 8-byte words, the
    last one overlapping the one before it (the rest has 16 bytes or more)."""
    first = np.uint64(32) if virt else np.uint64(data[s])
    a = s + 1 - virt
    n = e - a
    h = _mix8(np.uint64(0xCBF29CE484222325) ^ np.uint64(n), first)
    for i in range(a, e - 8, 8):
        h = _mix8(h, load8(data, i))
    h = _mix8(h, load8(data, e - 8))
    h ^= h >> np.uint64(32)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h | np.uint64(1)


@jitable
def _same_long(data, s, virt, m, buf, b0, bvirt):
    """The m model-space bytes of data[s:] (a virtual space first if virt) == those of buf[b0:]
    (bvirt), m > KEY_BYTES: the first byte, then the rest 8 bytes at a time (the last word overlapping)."""
    x = 32 if virt else data[s]
    y = 32 if bvirt else buf[b0]
    if x != y:
        return False
    a = s + 1 - virt
    b = b0 + 1 - bvirt
    n = m - 1
    for j in range(0, n - 8, 8):
        if load8(data, a + j) != load8(buf, b + j):
            return False
    return load8(data, a + n - 8) == load8(buf, b + n - 8)


@jitable
def probe_long(rec, h, m, data, s, virt, buf):
    """`probe` for a long word data[s:] (m model-space bytes, a virtual space first if virt): key bytes
    in buf (the table's `kdata`)."""
    mask = rec.shape[0] - 1
    i = home(h, rec.shape[0])
    while True:
        r = rec[i, 0]
        if r == 0:
            return -i - 1
        if r == h and (rec[i, 3] & np.uint64(255)) == np.uint64(m) and _same_long(
                data, s, virt, m, buf, np.int64(rec[i, 1]), np.int64(rec[i, 2])):
            return i
        i = (i + 1) & mask


@jitable
def meta(m, n_ids, off):
    return np.uint64(m) | (np.uint64(n_ids) << np.uint64(8)) | (np.uint64(off) << np.uint64(16))


@jitable
def inline_meta(m, k, out, pos):
    """The last word of a record for a word of m bytes whose k ids are at out[pos:] that holds them
    itself: up to three under 2**16 (PACK16), or one or two under 2**24 (a vocabulary over 2**16);
    0 when they do not fit (their place in `idata` goes there instead)."""
    top = 0
    for q in range(min(k, 3)):
        top = max(top, out[pos + q])
    if k <= 3 and top < (1 << 16):
        x = np.uint64(0)
        for q in range(k):
            x |= np.uint64(out[pos + q]) << np.uint64(16 * q)
        return np.uint64(m) | ((np.uint64(k) | np.uint64(64 + 128)) << np.uint64(8)) | (x << np.uint64(16))
    if k <= 2 and top < (1 << 24):
        x = np.uint64(out[pos]) | (np.uint64(out[pos + 1]) << np.uint64(24) if k == 2 else np.uint64(0))
        return np.uint64(m) | ((np.uint64(k) | np.uint64(128)) << np.uint64(8)) | (x << np.uint64(16))
    return np.uint64(0)


@jitable
def cached_ids(v, idata, out, pos):
    """Writes the ids of a shared-table record's last word `v` at out[pos:]; returns how many. Up to
    three ids are kept in the record itself: most words of prose, read without touching `idata`."""
    if v & INLINE:
        k = np.int64((v >> np.uint64(8)) & np.uint64(63))
        if v & PACK16:
            for q in range(k):
                out[pos + q] = np.int32((v >> np.uint64(16 + 16 * q)) & np.uint64(0xFFFF))
            return k
        out[pos] = np.int32((v >> np.uint64(16)) & ID_MASK)
        if k == 2:
            out[pos + 1] = np.int32(v >> np.uint64(40))
        return k
    k = np.int64((v >> np.uint64(8)) & np.uint64(127))
    p0 = np.int64(v >> np.uint64(16))
    for q in range(k):
        out[pos + q] = idata[p0 + q]
    return k


COPY_IDS = 8  # ids `copy_ids` stores as one block


@jitable(inline="always")
def copy_ids(v, idata, out, pos):
    """`cached_ids` for the CPU loops, whose output has room for COPY_IDS ids past any word's: inline
    ids, and up to COPY_IDS ids from `idata`, are stored without a loop or a count test (a branch a
    word less to mispredict: a quarter of the UDHR's words read theirs from `idata`)."""
    if v & INLINE:
        if v & PACK16:
            out[pos] = np.int32((v >> np.uint64(16)) & np.uint64(0xFFFF))
            out[pos + 1] = np.int32((v >> np.uint64(32)) & np.uint64(0xFFFF))
            out[pos + 2] = np.int32(v >> np.uint64(48))
        else:
            out[pos] = np.int32((v >> np.uint64(16)) & ID_MASK)
            out[pos + 1] = np.int32(v >> np.uint64(40))
        return np.int64((v >> np.uint64(8)) & np.uint64(63))
    k = np.int64((v >> np.uint64(8)) & np.uint64(127))
    p0 = np.int64(v >> np.uint64(16))
    if k <= COPY_IDS and p0 + COPY_IDS <= idata.shape[0]:
        for q in range(COPY_IDS):
            out[pos + q] = idata[p0 + q]
        return k
    return cached_ids(v, idata, out, pos)


BUSY = np.uint64(2)  # a slot being written (never a hash: bit 0 of every hash is 1)


@jitable
def insert_word(rec, rec_flat, h, k0, k1, m, s, virt, out, pos, k, idata, kdata, text, state, lim):
    """Adds a word (key h, k0, k1 of m model-space bytes at text[s:], a virtual space first if virt, as
    the loops key it; its k ids at out[pos:]) to the shared table from inside a parallel loop, while
    other threads read and add. A slot is claimed by compare-and-swap (0 -> BUSY), filled, then its
    hash stored last with release order, so a reader sees the whole record or none of it (a word a
    reader misses meanwhile is only a miss); an adder waits for a slot being written, which may hold
    its own word; room for ids and long keys is taken from `state`'s
    counters (entries, ids, key bytes) with atomic adds, up to lim = (entries, ids, key bytes). A word
    that does not fit, or that another thread added first, is left out: it stays exact, only uncached."""
    if fetch_add(state, 0, 1) >= lim[0]:
        fetch_add(state, 0, -1)
        return
    v = inline_meta(m, k, out, pos)
    if v == 0:
        base = fetch_add(state, 1, k)
        if base + k + 8 > lim[1]:
            fetch_add(state, 0, -1)
            return
        for q in range(k):
            idata[base + q] = out[pos + q]
        v = meta(m, k, base)
    if m > KEY_BYTES:
        kb = fetch_add(state, 3, m)
        if kb + m > lim[2]:
            fetch_add(state, 0, -1)
            return
        if virt:
            kdata[kb] = 32
        for q in range(m - virt):
            kdata[kb + virt + q] = text[s + q]
        k0 = np.uint64(kb)
        k1 = np.uint64(0)
    mask = rec.shape[0] - 1
    i = home(h, rec.shape[0])
    while True:
        r = load_acquire(rec_flat, 4 * i)
        if r == 0:
            if compare_swap(rec_flat, 4 * i, np.uint64(0), BUSY):
                rec[i, 1] = k0
                rec[i, 2] = k1
                rec[i, 3] = v
                store_release(rec_flat, 4 * i, h)
                return
            continue  # (taken meanwhile: read it again)
        if r == BUSY:  # (being written, perhaps with this very word: passing it by could add the word twice)
            continue
        if r == h and (rec[i, 3] & np.uint64(255)) == np.uint64(m):
            if m > KEY_BYTES:
                if _same_long(text, s, virt, m, kdata, np.int64(rec[i, 1]), np.int64(rec[i, 2])):
                    break
            elif rec[i, 1] == k0 and rec[i, 2] == k1:
                break
        i = (i + 1) & mask
    fetch_add(state, 0, -1)  # (another thread's copy of the word is in)


@cpu_kernel(parallel=True)
def _zero(rec):
    # np.empty, then zeroed by every thread: the first touch of fresh pages, the costly part of a
    # grown table, is shared (np.zeros would leave it all to the one thread that rehashes)
    for i in prange(rec.shape[0]):
        for q in range(4):
            rec[i, q] = 0


@cpu_kernel
def _rehash(old, rec, which):
    """The records old[which] into `rec` (keys all distinct: each takes the first empty slot of its
    probe sequence)."""
    mask = rec.shape[0] - 1
    for j in which:
        h = old[j, 0]
        if h != 0:
            slot = home(h, rec.shape[0])
            while rec[slot, 0] != 0:
                slot = (slot + 1) & mask
            for q in range(4):
                rec[slot, q] = old[j, q]


@cpu_kernel(parallel=True)
def _rehash_parts(old, rec, parts, deferred):
    """`_rehash` of every record into a table 2, 4, ... times the size, on every thread. A key's first
    slot there is its old first slot f plus a multiple of n (n old slots), so thread q moves the
    records at old slots [a, b), its range, into slots [a, b) + i * n, which no other thread writes.
    A record that had spilled into [a, b) from before a, or whose probe would leave its range, goes
    to deferred[:returned count]."""
    n = old.shape[0]
    size = n // parts
    ndef = np.zeros(parts, np.int64)
    for q in prange(parts):
        a = q * size
        b = a + size
        for j in range(a, b):
            h = old[j, 0]
            if h == 0:
                continue
            f = home(h, n)
            slot = home(h, rec.shape[0])
            top = slot - f + b
            if f < a or f > j:
                top = slot  # (spilled over from an earlier range, or around the table's end)
            while slot < top and rec[slot, 0] != 0:
                slot += 1
            if slot >= top:
                deferred[a + ndef[q]] = j
                ndef[q] += 1
                continue
            for k in range(4):
                rec[slot, k] = old[j, k]
    d = 0
    for q in range(parts):
        for t in range(ndef[q]):
            deferred[d] = deferred[q * size + t]
            d += 1
    return d


def _parts(threads, slots):
    """Ranges for the parallel rehash: a power of two, a few per thread (uneven ranges balance), each
    of at least 1,024 slots (a probe seldom reaches its end)."""
    parts = 1
    while parts < 4 * threads and parts * 2048 <= slots:
        parts *= 2
    return parts


# A grown table's words are rehashed on every thread when there are this many (and that many threads):
# on one, the rehash is a serial step of a first pass.
PARALLEL_REHASH = 4096
PARALLEL_THREADS = 2

# The largest ids buffer kept between calls (int32: 256 MB of address space; only the pages a call
# wrote, about its ids, are resident)
KEEP_OUT = 1 << 26


class Spare:
    """One large scratch array kept between calls, one call holding it at a time: `take(n)` gives it
    (or a new one from `alloc(n)` when it is out or too small), `give_back` keeps the larger of it and
    the one there, up to `keep` elements. A fresh array is a page fault for every page written."""

    def __init__(self, alloc, keep):
        self._lock = threading.Lock()
        self._buf = None
        self._alloc = alloc
        self._keep = keep

    def take(self, n):
        with self._lock:
            buf, self._buf = self._buf, None
        if buf is None or buf.shape[0] < n:
            buf = self._alloc(max(n, 1))
        return buf

    def give_back(self, buf):
        if buf.shape[0] > self._keep:
            return
        with self._lock:
            if self._buf is None or self._buf.shape[0] < buf.shape[0]:
                self._buf = buf


def sparse_int32(n):
    """An int32 array of which only the pages written are ever backed: a call's ids buffer, where
    each chunk's room is sized for its worst case (an id per byte) and a quarter of it is used on
    prose. With transparent huge pages, the first write into each 2 MB of it zeroed all 2 MB: on a
    first pass over big.txt that was 40-60 ms of a 100-140 ms call, 4 KB pages 1-15 ms."""
    if n * 4 < 1 << 21 or not hasattr(mmap, "MADV_NOHUGEPAGE"):
        return np.empty(n, np.int32)
    m = mmap.mmap(-1, n * 4)
    try:
        m.madvise(mmap.MADV_NOHUGEPAGE)
    except OSError:  # (a kernel without transparent huge pages refuses the advice: nothing to avoid there)
        pass
    return np.frombuffer(m, np.int32)  # (the array keeps the mapping alive; unmapped with it)


def _threads():
    import numba
    return numba.get_num_threads()


_NO_ROOM = np.zeros(3, np.int64)  # (`open_small`'s limits when another call adds: nothing fits)


class WordCache:
    """One Tokenizer's word cache. Grows by doubling up to `max_entries` words (and `max_key_bytes`
    of long words' keys), then stops adding (what is cached stays correct; new words just run the
    model)."""

    def __init__(self, max_entries=1 << 21, max_key_bytes=1 << 26):
        self.lock = threading.Lock()
        self.max_entries = max_entries
        self.max_key_bytes = max_key_bytes
        self.readers = 0
        self.writer = threading.Lock()  # (one call at a time adds words: a kernel's `insert_word`)
        self._out = Spare(sparse_int32, KEEP_OUT)  # an earlier call's ids buffer (see `out_buffer`)
        self.clear()

    def clear(self):
        self.rec = np.zeros((1 << 15, 4), np.uint64)
        self.idata = np.zeros(1 << 16, np.int32)
        self.kdata = np.zeros(1 << 16, np.uint8)
        self.state = np.array([0, 0, self.max_entries, 0, self.max_key_bytes], np.int64)
        self._lim = self._lim_list = self._lim_key = None
        self._room = None  # (what `open_inserts` last handed out: the arrays as they stand, with their limits)

    def __len__(self):
        return int(self.state[0])

    def __getstate__(self):  # a pickled tokenizer (multiprocessing, Ray) starts with an empty cache
        return {"max_entries": self.max_entries, "max_key_bytes": self.max_key_bytes}

    def __setstate__(self, state):
        self.__init__(**state)

    def open_inserts(self, words, ids, key_bytes):
        """(records, ids, long keys, state, limits) for a kernel that adds words as it goes
        (`insert_word`), with room for about that many more words, ids and long-key bytes: the table
        may fill to 70% before the next call grows it back to half. None when another call is adding
        words: this call's new words then stay uncached. Close with `close_inserts`."""
        if not self.writer.acquire(blocking=False):
            return None
        room = self._room
        if room is not None:  # (room enough in the arrays as they stand: no lock, no copy; a small call's
            # opening and closing were 1.9 us of its ~15)
            n, ni, _, nk, _ = self.state.tolist()
            if 2 * (n + words + 1) <= room[0].shape[0] and ni + ids <= room[1].shape[0] and \
                    nk + key_bytes <= room[2].shape[0]:
                return room
        with self.lock:
            if self.readers:  # (a call reading these records holds the ids and keys arrays that go with them)
                self.rec = self.rec.copy()
            self._reserve(self.state.tolist(), words, ids, key_bytes)
            self._room = (self.rec, self.idata, self.kdata, self.state, self._limits())
            return self._room

    def open_small(self, total):
        """`open_inserts` for a small call of `total` bytes, in one step: (records, ids, long keys, state,
        limits), with room for its new words, or a snapshot and limits of nothing while another call
        adds (its new words then run the model uncached). Close with `close_small`."""
        est = total >> 4 if total > 256 else 16
        room = self.open_inserts(est, 8 * est, total if total > 4 * est else 4 * est)
        if room is not None:
            return room
        return self.snapshot() + (np.zeros(5, np.int64), _NO_ROOM)

    def close_small(self, lim):
        if lim is _NO_ROOM:
            self.release()
        else:
            self.close_inserts(lim)

    def _limits(self):
        """lim for `insert_word`: (entries, ids, key bytes) that fit the arrays. It changes only with
        their sizes, so it is made once per size (read-only to the kernels): a small call's opening
        and closing were a quarter of it."""
        key = (self.rec.shape[0], self.idata.shape[0], self.kdata.shape[0])
        if self._lim_key != key:
            lim = [min(self.max_entries, key[0] * 7 // 10), key[1], min(key[2], self.max_key_bytes)]
            self._lim, self._lim_list, self._lim_key = np.array(lim, np.int64), lim, key
        return self._lim

    def close_inserts(self, lim):
        _, ids, key_bytes = self._lim_list if lim is self._lim else lim.tolist()
        # (the counters may have run past the room where words no longer fit; no lock: only the writer
        # moves them)
        _, n_ids, _, n_key_bytes, _ = self.state.tolist()
        if n_ids > ids:
            self.state[1] = ids
        if n_key_bytes > key_bytes:
            self.state[3] = key_bytes
        self.writer.release()

    def out_buffer(self, n):
        """Room for n int32 (a call's ids at their worst-case places, before they are gathered): the
        buffer of an earlier call when it is free and large enough. A new one is fresh memory, a
        page fault for every page the call writes; over glibc's 32 MB mmap threshold (calls of 8 MB
        and more) every call's buffer was new, and one 10 MB document took 2-3x as long to encode as
        with the buffer kept. Return it with `give_back_out`."""
        return self._out.take(n)

    def give_back_out(self, buf):
        self._out.give_back(buf)

    def snapshot(self):
        """(records, ids, long keys) for a call's lookups, arrays that belong together and that nobody
        writes to until `release` (ids and keys are only appended; records are copied when a reader
        is active)."""
        with self.lock:
            self.readers += 1
            return self.rec, self.idata, self.kdata

    def release(self):
        with self.lock:
            self.readers -= 1

    def _reserve(self, st, words, ids, key_bytes):
        """Room for that many more words, ids and long-key bytes (within the limits), given the state
        st as a list.

        New arrays, never resized in place: a call still reading the old ones stays consistent (its
        records only ever point into its own ids array; `open_inserts` gives writers a copy of the
        records if a call is reading them). The records are rehashed only when their table grows."""
        n, ni, _, nk, _ = st
        size = self.rec.shape[0]
        if (2 * (min(n + words, self.max_entries) + 1) <= size and ni + ids <= self.idata.shape[0]
                and min(nk + key_bytes, self.max_key_bytes) <= self.kdata.shape[0]):
            return  # (room enough: most calls)
        while 2 * (min(n + words, self.max_entries) + 1) > size:
            size *= 2
        ilen, klen = self.idata.shape[0], self.kdata.shape[0]
        while ni + ids > ilen:
            ilen *= 2
        while min(nk + key_bytes, self.max_key_bytes) > klen:
            klen *= 2
        # (grown arrays: what lies past the used part is never read, so it is not zeroed)
        if ilen > self.idata.shape[0]:
            idata = np.empty(ilen, np.int32)
            idata[:ni] = self.idata[:ni]
            self.idata = idata
        if klen > self.kdata.shape[0]:
            kdata = np.empty(klen, np.uint8)
            kdata[:nk] = self.kdata[:nk]
            self.kdata = kdata
        if size > self.rec.shape[0]:
            rec = np.empty((size, 4), np.uint64)
            _zero(rec)
            old = self.rec
            threads = _threads()
            parts = _parts(threads, old.shape[0])
            if threads >= PARALLEL_THREADS and parts > 1 and n >= PARALLEL_REHASH:
                which = np.empty(old.shape[0], np.int64)
                which = which[:_rehash_parts(old, rec, parts, which)]
            else:
                which = np.arange(old.shape[0])
            _rehash(old, rec, which)
            self.rec = rec
