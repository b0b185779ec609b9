"""The shipped per-code-point classes agree with the reference's own GPT-2 pattern on every code point."""
import numpy as np
import pytest

from numbatok import unicode_tables

pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")


def test_gpt2_classes_match_reference_for_every_code_point():
    table = unicode_tables.load()
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    mask = unicode_tables.L | unicode_tables.N | unicode_tables.S
    wrong = []
    for cp in range(unicode_tables.NCP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        if (table[cp] & mask) != unicode_tables._gpt2_class_by_reference(cp, pre):
            wrong.append(cp)
    assert not wrong, f"{len(wrong)} code points differ, first {[hex(c) for c in wrong[:10]]}"


def test_table_shape():
    t = unicode_tables.load()
    assert t.shape == (0x110000,) and t.dtype == np.uint8
    assert t[ord("a")] & unicode_tables.L and t[ord("7")] & unicode_tables.N and t[ord(" ")] & unicode_tables.S
    assert t[ord("_")] & unicode_tables.WORD and t[0x3000] & unicode_tables.SPACE
