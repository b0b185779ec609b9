"""Added tokens: found in the text before pre-tokenization, exactly as the reference's AddedVocabulary.

The reference runs two leftmost-longest Aho-Corasick passes: tokens with `normalized=false` over
the raw text, then tokens with `normalized=true` over the remaining pieces (after normalization).
Added-token lists are short, so a kernel scans candidates sorted longest first, filtered by a
first-byte bitmap; that is the same leftmost-longest match without an automaton.
"""
from dataclasses import dataclass

import numpy as np

from ._numba import jitable
from .kernels.hashing import same_bytes
from .kernels.utf8 import char_start_before, decode, skip_backward, skip_forward
from .unicode_tables import SPACE, WORD

F_SINGLE_WORD = 1
F_LSTRIP = 2
F_RSTRIP = 4
F_NORMALIZED = 8
F_SPECIAL = 16


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = True
    special: bool = False

    @property
    def flags(self):
        return (F_SINGLE_WORD * self.single_word | F_LSTRIP * self.lstrip | F_RSTRIP * self.rstrip
                | F_NORMALIZED * self.normalized | F_SPECIAL * self.special)


class AddedTable:
    """Flat arrays for the kernels: contents longest first, ids, flags, first-byte bitmap per pass."""

    def __init__(self, tokens, encode_special_tokens=False, normalized=None):
        # encode_special_tokens: special tokens are not matched at all (the reference's flag).
        # normalized: {id: content} for normalized=true tokens the normalizer changes: they are
        # matched in the normalized text by their normalized content, as the reference does.
        normalized = normalized or {}
        live = [(t, normalized.get(t.id, t.content)) for t in tokens if not (encode_special_tokens and t.special)]
        live = [(t, c) for t, c in live if c]
        live.sort(key=lambda tc: -len(tc[1].encode()))
        blobs = [c.encode() for _, c in live]
        live = [t for t, _ in live]
        self.data = np.frombuffer(b"".join(blobs), dtype=np.uint8).copy() if blobs else np.zeros(1, np.uint8)
        self.offsets = np.zeros(len(live) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in blobs], out=self.offsets[1:])
        self.ids = np.array([t.id for t in live], dtype=np.int32)
        self.flags = np.array([t.flags for t in live], dtype=np.int32)
        # first[pass, byte]: 1 when some token of that pass (0: normalized=false, 1: normalized=true) starts with byte
        self.first = np.zeros((2, 256), dtype=np.uint8)
        for t, b in zip(live, blobs):
            self.first[1 if t.normalized else 0, b[0]] = 1
        self.count = len(live)

    def arrays(self):
        return self.data, self.offsets, self.ids, self.flags, self.first


@jitable
def holds_token(data, a, b, first4, table, flag, at_data, at_off, at_flags):
    """Whether bytes [a, b) hold the bytes of some added token (of either pass): `may_start` first
    (most rows hold no byte a token starts with), then, where one does, the tokens compared there (a
    '<' in prose is rarely '<|endoftext|>', and a long document cut into segments has one somewhere)."""
    if not may_start(data, a, b, first4, table, flag):
        return False
    for p in range(a, b):
        if table[data[p]] & flag and (_match_here(data, p, b, at_data, at_off, at_flags, 0) >= 0
                                      or _match_here(data, p, b, at_data, at_off, at_flags, 1) >= 0):
            return True
    return False


@jitable
def _match_here(data, p, b, at_data, at_off, at_flags, which):
    """Index of the longest token of pass `which` that matches at p (within [.., b)), or -1."""
    for t in range(at_off.shape[0] - 1):
        if ((at_flags[t] & F_NORMALIZED) != 0) != (which == 1):
            continue
        s = at_off[t]
        n = at_off[t + 1] - s
        if p + n <= b and same_bytes(data, p, at_data, s, n):
            return t
    return -1


@jitable
def find_next(data, pos, a, b, start_offset, which, classes, at_data, at_off, at_flags, at_first):
    """Next accepted match of pass `which` in piece [a, b) searching from pos.

    Returns (token index or -1, split start, split stop, position to resume searching from).
    """
    p = pos
    while p < b:
        if at_first[which, data[p]] == 0:
            p += 1
            continue
        t = _match_here(data, p, b, at_data, at_off, at_flags, which)
        if t < 0:
            p += 1
            continue
        start = p
        stop = p + at_off[t + 1] - at_off[t]
        fl = at_flags[t]
        if fl & F_SINGLE_WORD:
            ok = True
            if start > a:
                c, _ = decode(data, char_start_before(data, start, a))
                if classes[c] & WORD:
                    ok = False
            if stop < b:
                c, _ = decode(data, stop)
                if classes[c] & WORD:
                    ok = False
            if not ok:
                p = stop  # the reference's iterator resumes after the discarded match
                continue
        if fl & F_LSTRIP:
            q, _ = skip_backward(data, start, a, classes, SPACE)
            start = q if q > start_offset else start_offset
        resume = stop
        if fl & F_RSTRIP:
            stop, _ = skip_forward(data, stop, b, classes, SPACE)
        return t, start, stop, resume
    return -1, b, b, b


def first_bytes(first):
    """For `may_start`: the bytes some token starts with (`first`, a 256-entry bitmap), as four
    (repeated); none when no token; one placeholder byte when more than four (then `may_start`
    reads its table)."""
    f = np.flatnonzero(first != 0).astype(np.uint8)
    return np.resize(f, 4) if 0 < f.shape[0] <= 4 else f[:0] if f.shape[0] == 0 else np.zeros(1, np.uint8)


@jitable
def may_start(data, a, b, first4, table, flag):
    """Whether bytes [a, b) hold a byte some added token starts with: a compare per byte that the
    compiler vectorizes when `first4` holds them (else a lookup of `table[x] & flag` per byte). Most
    rows have none, and then skip the token search."""
    if first4.shape[0] == 0:
        return False
    if first4.shape[0] == 4:
        c0, c1, c2, c3 = first4[0], first4[1], first4[2], first4[3]
        hit = False  # (an OR of booleans stays byte-wide when vectorized; a count widens each to 64 bits)
        for x in data[a:b]:
            hit |= (x == c0) | (x == c1) | (x == c2) | (x == c3)
        return hit
    for x in data[a:b]:
        if table[x] & flag:
            return True
    return False
