"""Parity with `tokenizers` on generated text: arbitrary Unicode, whitespace runs, CRLF, combining
marks, ZWJ emoji, CJK, RTL, contractions, special tokens in the text, long words, empty strings."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SHIPPED, assert_same_encodings, numbatok_tok, reference_tok
from numbatok.backends import cpu
from numbatok.batch import to_batch

PIECES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\xa0", "\x85", "\u2028", "\u3000", "\u200b",
          "\u200d", "\u0301", "e\u0301", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F44D\U0001F3FD",
          "\U0001F1EB\U0001F1F7", "日本語のテキスト", "中文", "한국어", "مرحبا بالعالم", "שלום", "Ελληνικά", "Привет",
          "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "''", "I'M", "x'y", "123", "４５", "Ⅻ", "½",
          "<|endoftext|>", "<mask>", " <mask>", "<s>", "</s>", "<pad>", "<unk>", "!!", "...", "--", "$x", "_a",
          "\U00010000", "\U0010FFFD", "\x00", "\x01", "\x1f", "\x7f", "\ufeff", "\ufffd"]

text_piece = st.one_of(
    st.sampled_from(PIECES),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    st.text(alphabet="ab1 ,'\n\t", max_size=20),
    st.text(alphabet="aZ09 .,;'\"!?-_\t\n\x00\u00e9\u4e2d\u0301\u00a0", max_size=24),  # ASCII runs meeting others
    st.integers(1, 400).map(lambda n: "z" * n),
)
texts = st.lists(text_piece, max_size=16).map("".join)
batches = st.lists(texts, min_size=1, max_size=8)


@pytest.mark.parametrize("name", SHIPPED)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches)
def test_generated_batches_match_reference(name, batch):
    tok, ref = numbatok_tok(name), reference_tok(name)
    assert_same_encodings(tok.encode_batch(batch), ref.encode_batch(batch), batch)
    for specials in (True, False):  # one text: `encode` and `tok(text)` take their own short way
        one = ref.encode(batch[0], add_special_tokens=specials)
        assert_same_encodings([tok.encode(batch[0], add_special_tokens=specials)], [one], batch[:1])
        got = tok(batch[0], add_special_tokens=specials)
        assert (got["input_ids"], got["token_type_ids"], got["attention_mask"]) == (
            one.ids, one.type_ids, one.attention_mask)
    saved, cpu.SERIAL_CALL = cpu.SERIAL_CALL, 0  # the steps of larger calls (spans from the ids path)
    try:
        assert_same_encodings(tok.encode_batch(batch), ref.encode_batch(batch), batch)
        b = to_batch(batch)  # (the path taken, not its fallback)
        way = cpu._spans_from_ids if name in ("gpt2", "roberta-base") else cpu._wordpiece_spans
        assert way(tok, b, cpu._readonly(b.data), cpu._readonly(b.offsets), 0) is not None
    finally:
        cpu.SERIAL_CALL = saved
    ids = [e.ids for e in ref.encode_batch(batch)]
    assert tok.encode_ragged(batch).to_list() == ids  # the fast path (fused kernel, word cache)
    saved, cpu.PREFIX_CALL = cpu.PREFIX_CALL, 0  # (every word cached now, and the call small: the loop for cached
    try:                                          # words taken as a larger call would take it)
        assert tok.encode_ragged(batch).to_list() == ids
    finally:
        cpu.PREFIX_CALL = saved
    assert tok.decode_batch(ids, skip_special_tokens=False) == ref.decode_batch(ids, skip_special_tokens=False)
    assert tok.decode_batch(ids) == ref.decode_batch(ids)


@pytest.mark.parametrize("name", SHIPPED)
@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.integers(0, 50264), max_size=30))
def test_decode_arbitrary_ids_matches_reference(name, ids):
    """Any id sequence, including ones that split UTF-8 characters (lossy decode must match too)."""
    tok, ref = numbatok_tok(name), reference_tok(name)
    for arg in (ids, np.array(ids, np.int64)):  # (a short list decodes token by token, an array by array steps)
        assert tok.decode(arg, skip_special_tokens=False) == ref.decode(ids, skip_special_tokens=False)
        assert tok.decode(arg) == ref.decode(ids)


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("text", ["", " ", "a" * 100_000, "a b" * 30_000, "\u00e9" * 50_000,
                                  "\U0001F600" * 20_000, "ab" * 70_000, " " * 10_000 + "x", "\n" * 5000])
def test_long_and_degenerate_inputs(name, text):
    tok, ref = numbatok_tok(name), reference_tok(name)
    assert_same_encodings([tok.encode(text)], [ref.encode(text)], [text])
    assert tok.encode_ragged(text).to_list() == [ref.encode(text).ids]
