"""The shipped per-code-point classes agree with the reference's own pre-tokenizers and regex engine on
every code point."""
import numpy as np
import pytest

from numbatok import unicode_tables

pytest.importorskip("tokenizers")


def test_classes_match_reference_for_every_code_point():
    """Every bit, for every code point, as the reference's own pre-tokenizers see it."""
    table = unicode_tables.load()
    pre, split_pres = unicode_tables.reference_pre_tokenizers()
    wrong = []
    for cp in range(unicode_tables.NCP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ref = unicode_tables._gpt2_class_by_reference(cp, pre) | unicode_tables._split_bits_by_reference(cp, split_pres)
        if int(table[cp]) & ~(unicode_tables.UPPERISH | unicode_tables.LOWERISH) != ref:
            wrong.append(cp)
    assert not wrong, f"{len(wrong)} code points differ, first {[hex(c) for c in wrong[:10]]}"


def test_letter_case_classes_match_reference_regex_engine():
    """The o200k pattern's two letter classes, as the reference's Split matches them (Unicode older
    than the regex package's)."""
    table = unicode_tables.load()
    ref = unicode_tables.class_bits_by_reference()
    mask = unicode_tables.UPPERISH | unicode_tables.LOWERISH
    wrong = np.flatnonzero((table & mask) != ref)
    assert wrong.size == 0, f"{wrong.size} code points differ, first {[hex(c) for c in wrong[:10]]}"


def test_table_shape():
    t = unicode_tables.load()
    assert t.shape == (0x110000,) and t.dtype == np.uint8
    assert t[ord("a")] & unicode_tables.L and t[ord("7")] & unicode_tables.N and t[ord(" ")] & unicode_tables.S
    assert t[ord("_")] & unicode_tables.WORD and t[0x3000] & unicode_tables.SPACE and t[ord(",")] & unicode_tables.PUNCT
    assert not t[ord(" ")] & unicode_tables.WORD and not t[ord("a")] & unicode_tables.PUNCT
    assert t[ord("A")] & unicode_tables.UPPERISH and not t[ord("A")] & unicode_tables.LOWERISH
    assert t[0x301] & unicode_tables.UPPERISH and t[0x301] & unicode_tables.LOWERISH  # a combining mark: both
