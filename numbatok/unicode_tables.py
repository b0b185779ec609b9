"""Per-code-point property bits used by the scanners, as one flat uint8 table (0x110000 entries).

The bits reproduce what the reference tokenizers actually do, not what the newest Unicode says:
`tokenizers` matches the GPT-2 pattern with an Oniguruma build whose Unicode version is older than
Python's `regex`, and thousands of recently assigned code points differ. `build()` starts from
`regex` and then asks the reference's own ByteLevel pre-tokenizer about every code point; the
verified table is shipped in `data/unicode_classes.npz` and guarded by a test over all code points.

Rebuild (needs `tokenizers`): python -m numbatok.unicode_tables
"""
import os

import numpy as np

L = 1        # \p{L} in the GPT-2 pattern
N = 2        # \p{N} in the GPT-2 pattern
S = 4        # \s in the GPT-2 pattern
WORD = 8     # \w as the added-token single_word check sees it
SPACE = 16   # White_Space (Rust char::is_whitespace): added-token strips, whitespace splits
PUNCT = 32   # ASCII punctuation or Unicode P*: BertPreTokenizer and Punctuation
UPPERISH = 64   # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] in the o200k pattern
LOWERISH = 128  # [\p{Ll}\p{Lm}\p{Lo}\p{M}] in the o200k pattern
# the classes the reference's regex engine is asked about code point by code point, in blocks
CLASS_PATTERNS = ((UPPERISH, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (LOWERISH, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"))

NCP = 0x110000
_PATH = os.path.join(os.path.dirname(__file__), "data", "unicode_classes.npz")
_table = None


def load():
    global _table
    if _table is None:
        with np.load(_PATH) as z:
            _table = np.ascontiguousarray(z["classes"].astype(np.uint8))
    return _table


def _from_regex():
    import regex

    t = np.zeros(NCP, dtype=np.uint8)
    pats = [(L, regex.compile(r"\p{L}")), (N, regex.compile(r"\p{N}")), (S, regex.compile(r"\s")),
            (WORD, regex.compile(r"\w")), (SPACE, regex.compile(r"\p{White_Space}")),
            (PUNCT, regex.compile(r"[\p{P}!-/:-@\[-`{-~]"))]
    for cp in range(NCP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        for bit, p in pats:
            if p.match(c):
                t[cp] |= bit
    return t


def _gpt2_class_by_reference(cp, pre):
    """L, N, S or 0 as the reference's GPT-2 pattern treats code point `cp`."""
    c = chr(cp)
    if len(pre.pre_tokenize_str("a" + c)) == 1:
        return L
    if len(pre.pre_tokenize_str("1" + c)) == 1:
        return N
    if len(pre.pre_tokenize_str("!" + c)) == 1:
        return 0
    return S


def _split_bits_by_reference(cp, pres):
    """WORD, SPACE and PUNCT as the reference's Whitespace, WhitespaceSplit and BertPreTokenizer see `cp`."""
    ws, wss, bert = pres
    c = chr(cp)
    bits = 0
    if [p for p, _ in ws.pre_tokenize_str("a" + c)] == ["a" + c]:
        bits |= WORD
    if len(wss.pre_tokenize_str("a" + c + "a")) == 2:
        bits |= SPACE
    if len(bert.pre_tokenize_str("a" + c + "a")) == 3:
        bits |= PUNCT
    return bits


def class_bits_by_reference():
    """The CLASS_PATTERNS bits of every code point as the reference's Split pre-tokenizer matches them
    (its regex engine's Unicode tables, which are older than the regex package's: 17k code points differ)."""
    from tokenizers import Regex, pre_tokenizers

    cps = np.array([c for c in range(NCP) if not 0xD800 <= c <= 0xDFFF])
    t = np.zeros(NCP, dtype=np.uint8)
    for bit, pattern in CLASS_PATTERNS:
        split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
        for i in range(0, len(cps), 1 << 16):
            block = cps[i:i + (1 << 16)]
            kept = np.zeros(len(block), dtype=bool)
            for _, (a, b) in split.pre_tokenize_str("".join(map(chr, block))):
                kept[a:b] = True
            t[block[~kept]] |= bit
    return t


def reference_pre_tokenizers():
    from tokenizers import pre_tokenizers

    return (pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            (pre_tokenizers.Whitespace(), pre_tokenizers.WhitespaceSplit(), pre_tokenizers.BertPreTokenizer()))


def build():
    pre, split_pres = reference_pre_tokenizers()
    t = _from_regex()
    changed = 0
    for cp in range(NCP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ref = _gpt2_class_by_reference(cp, pre) | _split_bits_by_reference(cp, split_pres)
        if (t[cp] & (L | N | S | WORD | SPACE | PUNCT)) != ref:
            changed += 1
            t[cp] = ref
    t |= class_bits_by_reference()
    os.makedirs(os.path.dirname(_PATH), exist_ok=True)
    np.savez_compressed(_PATH, classes=t)
    return changed


if __name__ == "__main__":
    print(f"{build()} code points differ from the regex package's Unicode tables; table written to {_PATH}")
