"""What each character normalizes to on its own, for the ids-only path's rows that are not all ASCII.

A normalizer whose passes have the heads identity, NFD or NFKD and only per-character ops (clean
text, CJK padding, strip accents, lowercase: BertNormalizer and the like) maps a text to the
concatenation of what each of its characters maps to, with one exception: canonical reordering,
which can move a combining mark past the marks that its neighbours decompose to. So a character
is "unsafe" when a decomposition in its passes yields a mark (combining class above 0) that the
pass keeps; a row holding one takes the passes. Any other row is mapped a character at a time:
one lookup per character instead of the passes' several sweeps, each writing 16 bytes of
alignments per byte, that the ids-only path then drops.

The map is filled in for the characters the batches bring (each normalized alone by the passes
themselves, so a mapped row gets exactly the bytes the passes would write), and kept by the
normalizer across calls.
"""
import threading

import numpy as np

from . import passes
from .unicode_data import CANON, CCC, COMPAT, NCP

UNKNOWN, UNSAFE = -1, -2


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

    def __getstate__(self):  # a pickled tokenizer starts with an empty map
        return {"norm": self.norm}

    def __setstate__(self, state):
        self.__init__(state["norm"])

    def arrays(self):
        return self.cmap, self.data

    def learn(self, cps):
        """Maps the code points `cps` (int64; those already known are skipped)."""
        with self.lock:
            cps = cps[self.cmap[cps] == UNKNOWN]
            if not cps.shape[0]:
                return
            out, lens = _each_alone(self.norm, cps)
            grown = np.zeros(self.size + out.shape[0] + 1, np.uint8)
            grown[:self.size] = self.data[:self.size]
            grown[self.size:self.size + out.shape[0]] = out
            grown.flags.writeable = False
            vals = (((self.size + np.cumsum(lens) - lens) << 8) | lens).astype(np.int32)
            vals[_unsafe(self.norm, cps)] = UNSAFE
            self.data, self.size = grown, self.size + out.shape[0]
            self.cmap[cps] = vals


def _each_alone(norm, cps):
    """What each code point normalizes to as a text of its own, by the passes: (bytes, lengths)."""
    from .. import unicode_tables
    from ..added_tokens import AddedTable
    from ..backends import cpu
    raw = np.frombuffer("".join(map(chr, cps.tolist())).encode("utf-8"), np.uint8)
    offsets = np.zeros(cps.shape[0] + 1, np.int64)
    np.cumsum(1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000), out=offsets[1:])
    text, pb, _, row_piece, _, _ = cpu.normalize_rows(norm, raw, offsets, AddedTable([]).arrays(), unicode_tables.load())
    ends = pb[row_piece]
    return np.asarray(text[ends[0]:ends[-1]]), np.diff(ends)


def _unsafe(norm, cps):
    """For each code point: does a decomposition in the normalizer's passes yield a combining mark
    that the pass keeps? Followed through the passes, as (owner, code point) pairs: a pass's input
    is what the passes before it made of the character."""
    t = norm.tables
    owner, cur = np.arange(cps.shape[0]), cps.astype(np.int64)
    out = np.zeros(cps.shape[0], bool)
    for head, _, _, cmap, coff, cdata in norm.passes:
        if head != passes.IDENT:
            owner, cur = _expand(owner, cur, t.maps[CANON if head == passes.NFD else COMPAT, cur], t.map_off,
                                 t.map_data)
        j = cmap[cur] if cmap.shape[0] > 1 else np.zeros(cur.shape[0], np.int64)
        kept = (j == 0) | (coff[j + 1] > coff[j])
        if head != passes.IDENT:
            out[owner[kept & ((t.props[cur] & CCC) != 0)]] = True
        owner, cur = _expand(owner, cur, j, coff, cdata)
    return out


def _expand(owner, cur, j, off, data):
    # each cur[i] with j[i] > 0 replaced by data[off[j[i]]:off[j[i] + 1]] (nothing, when that is empty)
    lens = np.where(j == 0, 1, off[j + 1] - off[j])
    start = np.repeat(np.where(j == 0, -1, off[j]), lens)
    pos = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    vals = np.where(start < 0, np.repeat(cur, lens), data[np.maximum(start, 0) + pos])
    return np.repeat(owner, lens), vals.astype(np.int64)
