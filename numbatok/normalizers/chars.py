"""Per-character normalizer ops, tabulated: a chain of them becomes one code point map per pass.

Each op turns one character into zero or more, and every character it emits keeps the alignment of
the character it came from: that is what the reference's filter, map, lowercase and BertNormalizer
transforms all amount to. A chain of such ops is therefore a pure function of the code point, so
`chain_map` computes it once for every code point (with numpy, when the normalizer is loaded) and
the kernels apply a whole chain with one lookup per character (see `passes`).
"""
import numpy as np

from .unicode_data import F_BERT_SPACE, F_DROP, F_MARK, F_MN, LOWER, NCP

CLEAN = 1       # BertNormalizer clean_text: drop controls, NUL and U+FFFD; whitespace -> ' '
CJK = 2         # BertNormalizer handle_chinese_chars: ' ' c ' ' around each CJK ideograph
STRIP_MN = 3    # BertNormalizer strip_accents (after its NFD pass): drop nonspacing marks
STRIP_MARK = 4  # StripAccents: drop combining marks
LOWERCASE = 5   # Lowercase (and BertNormalizer lowercase): char::to_lowercase, 1 or 2 characters
NMT = 6         # Nmt: drop some controls, map some spaces and separators to ' '

NAMES = {CLEAN: "clean_text", CJK: "handle_chinese_chars", STRIP_MN: "strip_accents", STRIP_MARK: "StripAccents",
         LOWERCASE: "Lowercase", NMT: "Nmt"}

# BertNormalizer's own list of CJK ranges (not a Unicode property), inclusive
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
NMT_DROPPED = [(0x1, 0x8), (0xB, 0xB), (0xE, 0x1F), (0x7F, 0x7F), (0x8F, 0x8F), (0x9F, 0x9F)]
NMT_SPACES = [(0x9, 0xA), (0xC, 0xD), (0x1680, 0x1680), (0x200B, 0x200F), (0x2028, 0x2029), (0x2581, 0x2581),
              (0xFEFF, 0xFEFF), (0xFFFD, 0xFFFD)]


def _in(ranges, v):
    hit = np.zeros(v.shape[0], bool)
    for lo, hi in ranges:
        hit |= (v >= lo) & (v <= hi)
    return hit


def _expand(vals, counts, value_at):
    # Element i becomes counts[i] characters: value_at(element index, position within it) for each.
    idx = np.repeat(np.arange(vals.shape[0]), counts)
    starts = np.cumsum(counts) - counts
    return idx, value_at(idx, np.arange(idx.shape[0]) - starts[idx])


def _apply(op, vals, tables):
    """One op over every element: (index of the element each output comes from, output values)."""
    props, maps, map_off, map_data = tables.props, tables.maps, tables.map_off, tables.map_data
    if op == CJK:
        counts = np.where(_in(CJK_RANGES, vals), 3, 1)
        return _expand(vals, counts, lambda i, k: np.where((counts[i] == 3) & (k != 1), 32, vals[i]))
    if op == LOWERCASE:
        j = maps[LOWER][vals]
        counts = np.where(j == 0, 1, map_off[j + 1] - map_off[j])
        return _expand(vals, counts, lambda i, k: np.where(j[i] == 0, vals[i], map_data[map_off[j[i]] + k]))
    if op == CLEAN:
        keep = (props[vals] & F_DROP) == 0
        vals = np.where((props[vals] & F_BERT_SPACE) != 0, 32, vals)
    elif op == NMT:
        keep = ~_in(NMT_DROPPED, vals)
        vals = np.where(_in(NMT_SPACES, vals), 32, vals)
    else:
        keep = (props[vals] & (F_MN if op == STRIP_MN else F_MARK)) == 0
    idx = np.flatnonzero(keep)
    return idx, vals[idx]


def chain_map(ops, tables):
    """The chain `ops` as a code point map: (cmap, coff, cdata) where cmap[cp] == 0 leaves cp as it is
    and cmap[cp] == j turns it into cdata[coff[j]:coff[j + 1]] (nothing, when that is empty)."""
    owner = np.arange(NCP, dtype=np.int64)
    vals = owner.copy()
    for op in ops:
        idx, vals = _apply(op, vals, tables)
        owner = owner[idx]
    counts = np.bincount(owner, minlength=NCP)
    single = np.zeros(NCP, bool)
    ones = np.flatnonzero(counts[owner] == 1)
    single[owner[ones]] = vals[ones] == owner[ones]
    changed = np.flatnonzero(~single)
    cmap = np.zeros(NCP, np.int32)
    cmap[changed] = np.arange(1, changed.shape[0] + 1)
    coff = np.zeros(changed.shape[0] + 2, np.int64)
    np.cumsum(counts[changed], out=coff[2:])
    cdata = vals[cmap[owner] != 0].astype(np.int32)
    return cmap, coff, cdata if cdata.shape[0] else np.zeros(1, np.int32)
