"""The normalizers' Unicode tables as flat arrays, reproducing the reference's own Unicode data.

The reference mixes Unicode versions: NFD/NFKD/NFC/NFKC and StripAccents come from the
unicode-normalization-alignments crate (Unicode 9), Lowercase and Strip from Rust's std (Unicode
16), BertNormalizer's classes from the unicode_categories crate (Unicode 8). `build()` starts from
Python's `unicodedata` (Unicode 14.0 in Python 3.11) and then asks the reference's own normalizers
about every code point, patching where they differ; the verified tables are shipped in
`data/normalizer_tables.npz` and checked over every code point by the tests.

Layout (all indexed by code point, 0x110000 entries):
  props[cp]    int32: canonical combining class in bits 0-7, then the F_* flags below
  maps[k, cp]  int32: 0 = maps to itself, else j: the code points map_data[map_off[j]:map_off[j + 1]];
               k = CANON (full canonical decomposition), COMPAT (full compatibility decomposition),
               LOWER (char::to_lowercase)
  comp         int64, sorted: (first << 42) | (second << 21) | composite, the canonical composition
               pairs (Hangul syllables are composed by arithmetic in `unicode_nf`, as the reference)

Rebuild (needs `tokenizers`): python -m numbatok.normalizers.unicode_data
"""
import os

import numpy as np

NCP = 0x110000
CANON, COMPAT, LOWER = 0, 1, 2

CCC = 0xFF
F_MARK = 1 << 8          # StripAccents removes it (a combining mark)
F_MN = 1 << 9            # BertNormalizer's strip_accents removes it (nonspacing mark)
F_DROP = 1 << 10         # BertNormalizer's clean_text removes it (NUL, U+FFFD, controls but \t \n \r)
F_BERT_SPACE = 1 << 11   # BertNormalizer's clean_text turns it into ' '
F_WS = 1 << 12           # Strip removes it (char::is_whitespace)
F_SECOND = 1 << 13       # derived when loaded: it is the second character of some canonical composition

_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "normalizer_tables.npz")
_tables = None


class Tables:
    """The loaded arrays, in the order the kernels take them (`arrays()`)."""

    def __init__(self, props, maps, map_off, map_data, comp):
        props[(comp >> 21) & 0x1FFFFF] |= F_SECOND  # lets composition skip the pair search for most characters
        props[0x1161:0x1176] |= F_SECOND  # Hangul vowels and trailing consonants compose by arithmetic
        props[0x11A8:0x11C3] |= F_SECOND
        self.props, self.maps, self.map_off, self.map_data, self.comp = props, maps, map_off, map_data, comp

    def arrays(self):
        return self.props, self.maps, self.map_off, self.map_data, self.comp


def load():
    global _tables
    if _tables is None:
        with np.load(_PATH) as z:
            _tables = Tables(*(np.ascontiguousarray(z[k]) for k in ("props", "maps", "map_off", "map_data", "comp")))
    return _tables


# ---- building ----

def code_points(exclude=""):
    """Every code point but the surrogates (and the given characters), for the bulk probes."""
    skip = {ord(c) for c in exclude}
    return [c for c in range(NCP) if not 0xD800 <= c <= 0xDFFF and c not in skip]


def per_char(normalizer, cps, sep):
    """normalizer(chr(cp)) for every cp, in one call: the characters joined by `sep`, a character that
    the normalizer keeps as is and that combines with nothing, so each piece is normalized alone."""
    out = normalizer.normalize_str(sep.join(map(chr, cps))).split(sep)
    if len(out) != len(cps):
        raise RuntimeError(f"separator {sep!r} did not survive {normalizer!r}")
    return out


def _python_base():
    """The tables as Python's unicodedata (and Rust's rules, as documented) would give them."""
    import unicodedata as ud

    import regex

    white = regex.compile(r"\p{White_Space}")
    props = np.zeros(NCP, np.int32)
    maps = {CANON: {}, COMPAT: {}, LOWER: {}}
    pairs = []
    for cp in code_points():
        c = chr(cp)
        cat = ud.category(c)
        p = ud.combining(c)
        if cat in ("Mn", "Mc", "Me"):
            p |= F_MARK
        if cat == "Mn":
            p |= F_MN
        if cp in (0, 0xFFFD) or (cat in ("Cc", "Cf", "Co") and c not in "\t\n\r"):
            p |= F_DROP
        if white.match(c):
            p |= F_WS | F_BERT_SPACE
        props[cp] = p
        for k, form in ((CANON, "NFD"), (COMPAT, "NFKD")):
            d = ud.normalize(form, c)
            if d != c:
                maps[k][cp] = d
        if c.lower() != c:
            maps[LOWER][cp] = c.lower()
        dec = ud.decomposition(c).split()
        if len(dec) == 2 and not dec[0].startswith("<"):
            a, b = (int(x, 16) for x in dec)
            if ud.normalize("NFC", chr(a) + chr(b)) == c:
                pairs.append((a, b, cp))
    return props, maps, pairs


def _reference_ccc(cps, nfd):
    """Canonical combining class of each code point (each one NFD leaves alone) as the reference's
    NFD orders it, found with probe marks of every class placed before and after it."""
    import unicodedata as ud

    def moved(pairs):
        out = nfd.normalize_str("\x00".join(pairs)).split("\x00")
        return [o != s for o, s in zip(out, pairs)]

    # a non-starter moves past U+0345 (class 240), or U+0334 (class 1) moves past it
    before = moved(["\u0345" + chr(c) for c in cps])
    after = moved([chr(c) + "\u0334" for c in cps])
    todo = [i for i in range(len(cps)) if before[i] or after[i]]
    marks = {}  # the first mark of each class (that the reference knows as a mark), in code point order
    for i in todo:
        k = ud.combining(chr(cps[i]))
        if k and k not in marks:
            marks[k] = chr(cps[i])
    classes = sorted(marks)
    before = moved([marks[k] + chr(cps[i]) for i in todo for k in classes])
    after = moved([chr(cps[i]) + marks[k] for i in todo for k in classes])
    result = np.zeros(len(cps), np.int32)
    for j, i in enumerate(todo):
        same = [k for q, k in enumerate(classes) if not before[j * len(classes) + q] and not after[j * len(classes) + q]]
        if len(same) != 1:
            raise RuntimeError(f"U+{cps[i]:04X}: no single combining class fits the reference's ordering")
        result[i] = same[0]
    return result


def build():
    """Builds the tables from Python's unicodedata, patches them from the reference, writes the file.
    Returns {table: number of code points patched}."""
    from tokenizers import normalizers as N

    props, maps, pairs = _python_base()
    patched = {}

    cps = code_points("\x00")
    for k, name, norm in ((CANON, "NFD", N.NFD()), (COMPAT, "NFKD", N.NFKD()), (LOWER, "Lowercase", N.Lowercase())):
        n = 0
        for cp, out in zip(cps, per_char(norm, cps, "\x00")):
            have = maps[k].get(cp, chr(cp))
            if out != have:
                n += 1
                if out == chr(cp):
                    del maps[k][cp]
                else:
                    maps[k][cp] = out
        patched[name] = n

    def patch_flag(flag, name, values):
        n = 0
        for cp, v in values:
            if bool(props[cp] & flag) != v:
                props[cp] ^= flag
                n += 1
        patched[name] = patched.get(name, 0) + n

    cps_q = code_points("Q")
    out = per_char(N.StripAccents(), cps_q, "Q")
    patch_flag(F_MARK, "StripAccents marks", ((cp, o == "") for cp, o in zip(cps_q, out)))
    out = per_char(N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                    lowercase=False), cps_q, "Q")
    patch_flag(F_DROP, "BertNormalizer clean_text removals", ((cp, o == "") for cp, o in zip(cps_q, out)))
    patch_flag(F_BERT_SPACE, "BertNormalizer clean_text spaces", ((cp, o == " ") for cp, o in zip(cps_q, out)))
    # Mn matters only for characters NFD leaves alone (strip_accents filters NFD's output)
    alone = [cp for cp in cps_q if cp not in maps[CANON]]
    out = per_char(N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                    lowercase=False), alone, "Q")
    patch_flag(F_MN, "BertNormalizer strip_accents marks", ((cp, o == "") for cp, o in zip(alone, out)))
    strip = N.Strip()
    patch_flag(F_WS, "Strip whitespace", ((cp, strip.normalize_str(chr(cp)) == "") for cp in code_points()))

    alone = alone[1:]  # U+0000 (class 0) is the probes' separator
    ccc = _reference_ccc(alone, N.NFD())
    n = 0
    for cp, k in zip(alone, ccc):
        if (props[cp] & CCC) != k:
            props[cp] = (props[cp] & ~CCC) | k
            n += 1
    patched["combining classes"] = n

    composed = N.NFC().normalize_str("\x00".join(chr(a) + chr(b) for a, b, _ in pairs)).split("\x00")
    kept = [(a, b, c) for (a, b, c), out in zip(pairs, composed) if out == chr(c)]
    patched["composition pairs"] = len(pairs) - len(kept)

    write(props, maps, kept)
    return patched


def write(props, maps, pairs):
    blobs = [[]]
    index = np.zeros((3, NCP), np.int32)
    for k in (CANON, COMPAT, LOWER):
        for cp, s in sorted(maps[k].items()):
            index[k, cp] = len(blobs)
            blobs.append([ord(x) for x in s])
    map_off = np.zeros(len(blobs) + 1, np.int64)
    np.cumsum([len(b) for b in blobs], out=map_off[1:])
    map_data = np.array([x for b in blobs for x in b] or [0], np.int32)
    comp = np.array(sorted((a << 42) | (b << 21) | c for a, b, c in pairs), np.int64)
    os.makedirs(os.path.dirname(_PATH), exist_ok=True)
    np.savez_compressed(_PATH, props=props, maps=index, map_off=map_off, map_data=map_data, comp=comp)


if __name__ == "__main__":
    for name, n in build().items():
        print(f"{name}: {n} code points differ from Python's unicodedata {__import__('unicodedata').unidata_version}")
    print(f"tables written to {_PATH}")
