"""What each character normalizes to on its own, for the ids-only path's rows that are not all ASCII.

A normalizer whose passes have the heads identity, NFD or NFKD and only per-character ops (clean
text, CJK padding, strip accents, lowercase: BertNormalizer and the like) maps a text to the
concatenation of what each of its characters maps to, with one exception: canonical reordering,
which can move a combining mark past the marks that its neighbours decompose to. So a character
is "unsafe" when a decomposition in its passes yields a mark (combining class above 0) that the
pass keeps; a row holding one takes the passes. Any other row is mapped a character at a time:
one lookup per character instead of the passes' several sweeps, each writing 16 bytes of
alignments per byte, that the ids-only path then drops.

Each character is walked alone through the passes' own tables (`pass_alone`: the tests hold it to
what the passes write, for every code point). The map is made with the whole Basic Multilingual
Plane learned (~10 ms, once per normalizer: learning a script's characters as a batch brings them
had been half of a first pass over 45 KB of Japanese), and learns other characters as batches bring
them. The normalizer keeps it across calls.
"""
import threading

import numpy as np

from .._numba import cpu_kernel, prefetch
from ..kernels.utf8 import decode, encode, encoded_len
from .passes import IDENT, NFD, NFKD
from .unicode_data import CANON, CCC, COMPAT, NCP
from .unicode_nf import capacity, decompose

UNKNOWN, UNSAFE = -1, -2
BMP = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x10000)]).astype(np.int64)  # (no surrogates)


class CharMap:
    """cmap[cp]: UNKNOWN, UNSAFE, or (offset << 8) | length of the character's normalized UTF-8 bytes in
    `data`. Entries are set once, after `data` has grown (into a new array) to hold their bytes: a
    call that reads `data` after it has seen its characters' entries finds their bytes in it."""

    def __init__(self, norm):
        self.norm = norm
        self.lock = threading.Lock()
        self.cmap = np.full(NCP, UNKNOWN, np.int32)
        self.data = np.zeros(1, np.uint8)
        self.data.flags.writeable = False  # (one array type for the kernels, before and after `learn`)
        self.size = 0
        self._seen = []  # zeroed marking arrays of earlier calls (see `take_seen`)
        self.learn(BMP)

    def __getstate__(self):  # a pickled tokenizer starts with an empty map
        return {"norm": self.norm}

    def __setstate__(self, state):
        self.__init__(state["norm"])

    def arrays(self):
        return self.cmap, self.data

    def take_seen(self):
        """An all-zero array for a call to mark the characters it finds unknown (seen[cp]) and their
        block of 4,096 code points (seen[NCP + (cp >> 12)]): 1.1 MB, kept between calls rather than
        allocated and zeroed by each. Give it back, zero again, with `give_seen`."""
        with self.lock:
            if self._seen:
                return self._seen.pop()
        return np.zeros(NCP + (NCP >> 12), np.uint8)

    def give_seen(self, seen):
        with self.lock:
            self._seen.append(seen)

    def learn(self, cps):
        """Maps the code points `cps` (int64; those already known are skipped)."""
        with self.lock:
            cps = cps[self.cmap[cps] == UNKNOWN]
            if not cps.shape[0]:
                return
            out, lens, unsafe = _each_alone(self.norm, cps)
            grown = np.zeros(self.size + out.shape[0] + 1, np.uint8)
            grown[:self.size] = self.data[:self.size]
            grown[self.size:self.size + out.shape[0]] = out
            grown.flags.writeable = False
            vals = (((self.size + np.cumsum(lens) - lens) << 8) | lens).astype(np.int32)
            vals[unsafe] = UNSAFE
            self.data, self.size = grown, self.size + out.shape[0]
            self.cmap[cps] = vals


@cpu_kernel
def marked(seen):
    """The code points marked in `seen` (see `CharMap.take_seen`), their marks cleared: the array
    is all zero again."""
    n = 0
    for k in range(NCP >> 12):
        if seen[NCP + k]:
            for c in range(k << 12, (k + 1) << 12):
                n += seen[c]
    out = np.empty(n, np.int64)
    n = 0
    for k in range(NCP >> 12):
        if seen[NCP + k]:
            seen[NCP + k] = 0
            for c in range(k << 12, (k + 1) << 12):
                if seen[c]:
                    seen[c] = 0
                    out[n] = c
                    n += 1
    return out


def _each_alone(norm, cps):
    """What each code point normalizes to as a text of its own: (bytes, lengths, unsafe). One compiled
    call per pass over all of them (through the batch kernels, learning took ~1 us a character: most
    of a first pass over 45 KB of Japanese)."""
    data, offsets = _utf8(cps)
    unsafe = np.zeros(cps.shape[0], np.uint8)
    props, maps, map_off, map_data, comp = norm.tables.arrays()
    for head, _, _, cmap, coff, cdata in norm.passes:
        assert head in (IDENT, NFD, NFKD), "a char map is only made for these heads (Normalizer.char_map)"
        data, offsets = pass_alone(head, cmap, coff, cdata, props, maps, map_off, map_data, comp, data, offsets, unsafe)
    return data, np.diff(offsets), unsafe.view(np.bool_)


@cpu_kernel
def _utf8(cps):
    """The code points as UTF-8, a row each: (bytes, offsets)."""
    offsets = np.zeros(cps.shape[0] + 1, np.int64)
    for i in range(cps.shape[0]):
        offsets[i + 1] = offsets[i] + encoded_len(cps[i])
    out = np.empty(offsets[-1], np.uint8)
    for i in range(cps.shape[0]):
        encode(out, offsets[i], cps[i])
    return out, offsets


@cpu_kernel
def pass_alone(head, cmap, coff, cdata, props, maps, map_off, map_data, comp, data, offsets, unsafe):
    """One pass (head identity, NFD or NFKD) over every row data[offsets[r]:offsets[r + 1]] as a text of
    its own: (bytes, offsets). What `passes.run_piece` writes for it, without the alignments and
    without a call per row (a call that passes its two dozen arrays cost ~140 ns a character). Sets
    unsafe[r] when the head decomposes row r into a combining mark (class above 0) that the pass's
    chain keeps: canonical reordering could move it past a neighbour's marks, so a text holding the
    character takes the passes."""
    n = offsets.shape[0] - 1
    nf = head == NFD or head == NFKD
    compat = head == NFKD
    cap = 1
    for r in range(n):
        cap = max(cap, offsets[r + 1] - offsets[r])
        if nf:  # (decompose's items, then its sorting scratch)
            cap = max(cap, 2 * capacity(compat, data, offsets[r], offsets[r + 1], maps, map_off))
    icp = np.empty(cap, np.int32)
    ich = np.empty(cap, np.int32)
    chain = cmap.shape[0] > 1
    mk = maps[COMPAT if compat else CANON]
    p = offsets[0]
    while p < offsets[n]:  # (a fresh process: the tables' lines for these characters all load at once)
        c, L = decode(data, p)
        prefetch(props, c)
        if chain:
            prefetch(cmap, c)
        if nf:
            prefetch(mk, c)
        p += L
    out_off = np.zeros(n + 1, np.int64)
    out = np.empty(0, np.uint8)
    for write in (False, True):
        if write:
            out = np.empty(out_off[n], np.uint8)
        o = 0
        for r in range(n):
            a = offsets[r]
            b = offsets[r + 1]
            if nf:
                k = decompose(compat, False, data, a, b, props, maps, map_off, map_data, comp, icp, ich, 0)
            else:
                k = 0
                p = a
                while p < b:
                    c, L = decode(data, p)
                    icp[k] = c
                    p += L
                    k += 1
            for q in range(k):
                c = icp[q]
                j = cmap[c] if chain else 0
                if nf and (props[c] & CCC) != 0 and (j == 0 or coff[j + 1] > coff[j]):
                    unsafe[r] = 1
                if j == 0:
                    o += encode(out, o, c) if write else encoded_len(c)
                else:
                    for t in range(coff[j], coff[j + 1]):
                        o += encode(out, o, cdata[t]) if write else encoded_len(cdata[t])
            if not write:
                out_off[r + 1] = o
    return out, out_off
