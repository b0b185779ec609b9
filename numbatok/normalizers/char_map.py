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
    `data`. Entries are set once; `data` only grows, into a new array: a call that took (cmap, data)
    after learning its own characters reads only entries that point into its `data`."""

    def __init__(self, norm):
        self.norm = norm
        self.lock = threading.Lock()
        self.cmap = np.full(NCP, UNKNOWN, np.int32)
        self.data = np.zeros(1, np.uint8)
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
            outs = [o.encode("utf-8") for o in self.norm.normalize_strs([chr(c) for c in cps.tolist()])]
            lens = np.array([len(o) for o in outs], np.int64)
            off = self.size + np.concatenate(([0], np.cumsum(lens)[:-1]))
            grown = np.zeros(max(self.size + int(lens.sum()), 1), np.uint8)
            grown[:self.size] = self.data[:self.size]
            grown[self.size:self.size + int(lens.sum())] = np.frombuffer(b"".join(outs), np.uint8)
            grown.flags.writeable = False
            self.data, self.size = grown, self.size + int(lens.sum())
            vals = ((off << 8) | lens).astype(np.int32)
            vals[_unsafe(self.norm, cps)] = UNSAFE
            self.cmap[cps] = vals


def _unsafe(norm, cps):
    """For each code point: does a decomposition in the normalizer's passes yield a combining mark
    that the pass keeps? (Followed through the passes: a pass's input is what the passes before it
    made of the character.)"""
    t = norm.tables
    out = np.zeros(cps.shape[0], bool)
    for i, c in enumerate(cps.tolist()):
        cur = [c]
        for head, _, _, cmap, coff, cdata in norm.passes:
            nxt = []
            for x in cur:
                if head in (passes.NFD, passes.NFKD):
                    j = t.maps[CANON if head == passes.NFD else COMPAT, x]
                    dec = t.map_data[t.map_off[j]:t.map_off[j + 1]].tolist() if j else [x]
                else:
                    dec = [x]
                for d in dec:
                    k = cmap[d] if cmap.shape[0] > 1 else 0
                    kept = [d] if k == 0 else cdata[coff[k]:coff[k + 1]].tolist()
                    if head != passes.IDENT and kept and t.props[d] & CCC:
                        out[i] = True
                    nxt += kept
            cur = nxt
    return out
