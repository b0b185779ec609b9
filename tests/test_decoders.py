"""Decoder Sequences of Replace, ByteFallback, Fuse and Strip (Llama-2, Mistral, Phi-3), and encoding
with a byte-fallback BPE vocabulary: parity with `tokenizers` on the corpus and on generated ids."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_same_encodings, corpus_docs, numbatok_tok, reference_tok, vocab_path
from test_parity_hypothesis import batches

import numbatok
from numbatok.errors import UnsupportedComponentError

tokenizers = pytest.importorskip("tokenizers")

MISTRAL = "mistral-7b-v0.1"  # (not in conftest's SHIPPED: the other parity tests do not run it)
BYTE0 = 3  # the id of <0x00> in the Mistral vocabulary: <0xXX> is BYTE0 + 0xXX


def byte_ids(data):
    return [BYTE0 + b for b in data]


@pytest.fixture(scope="module")
def sample():
    """Every 7th document of the corpus, cut at 100,000 characters, and the tricky ones (emoji, rare
    scripts): CJK and emoji come out as byte-fallback tokens, and code holds "<unk>" as text."""
    docs = corpus_docs()
    return [d[:100_000] for d in docs[::11] + docs[-10:]]


@pytest.fixture(scope="module")
def reference(sample):
    return reference_tok(MISTRAL).encode_batch(sample)


def _mistral_json(**model):
    with open(vocab_path(MISTRAL), encoding="utf-8") as f:
        d = json.load(f)
    d["model"].update(model)
    return json.dumps(d)


def test_encode_matches_reference_on_corpus(sample, reference):
    ids = [i for e in reference for i in e.ids]
    assert sum(BYTE0 + 0xF0 == i for i in ids) > 100  # (emoji and other 4-byte characters, as bytes)
    assert sum(BYTE0 + 0xE4 <= i <= BYTE0 + 0xE9 for i in ids) > 300  # (CJK)
    assert 0 in ids  # (the text "<unk>": the added token)
    tok = numbatok_tok(MISTRAL)
    assert_same_encodings(tok.encode_batch(sample), reference, sample)
    r = tok.encode_ragged(sample, return_offsets=True)
    assert r.to_list() == [e.ids for e in reference]
    assert [tuple(o) for o in r.offsets.tolist()] == [o for e in reference for o in e.offsets]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches)
def test_generated_batches_encode_as_reference(batch):
    """Encoding on generated text (the parity suite's strategy): Prepend and Replace normalizers,
    byte fallback, special tokens in the text, long words, empty strings."""
    tok, ref = numbatok_tok(MISTRAL), reference_tok(MISTRAL)
    theirs = ref.encode_batch(batch)
    assert_same_encodings(tok.encode_batch(batch), theirs, batch)
    assert tok.encode_ragged(batch).to_list() == [e.ids for e in theirs]
    assert tok.decode_batch([e.ids for e in theirs]) == ref.decode_batch([e.ids for e in theirs])


def test_encode_without_byte_fallback_fuses_unknowns(sample):
    """byte_fallback off: an unknown character is <unk>, and a run of them one <unk> (fuse_unk)."""
    text = _mistral_json(byte_fallback=False)
    tok, ref = numbatok.Tokenizer.from_str(text, device="cpu"), tokenizers.Tokenizer.from_str(text)
    part = sample[::3]
    theirs = ref.encode_batch(part)
    assert sum(e.ids.count(0) for e in theirs) > 1000
    assert_same_encodings(tok.encode_batch(part), theirs, part)
    ids = [e.ids for e in theirs]
    for skip in (True, False):
        assert tok.decode_batch(ids, skip_special_tokens=skip) == ref.decode_batch(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("skip", [True, False])
def test_decode_matches_reference_on_corpus(reference, skip):
    tok, ref = numbatok_tok(MISTRAL), reference_tok(MISTRAL)
    ids = [e.ids for e in reference]
    expected = ref.decode_batch(ids, skip_special_tokens=skip)
    assert tok.decode_batch(ids, skip_special_tokens=skip) == expected
    flat = np.array([i for row in ids for i in row], dtype=np.int64)
    row_offsets = np.cumsum([0] + [len(row) for row in ids])
    assert tok.decode_ragged(flat, row_offsets, skip_special_tokens=skip) == expected
    for k in range(0, len(ids), 97):  # (`decode` of a short list goes token by token)
        assert tok.decode(ids[k][:300], skip_special_tokens=skip) == ref.decode(ids[k][:300], skip_special_tokens=skip)


# (ids, skip_special_tokens, what the reference gives)
EDGE_CASES = [
    ([], True, ""),
    ([1, 22557], False, "<s> Hello"),  # (Strip strips nothing from "<s>")
    ([1, 22557], True, "Hello"),
    (byte_ids(b" ") + [264], True, " a"),  # (the byte run " ", fused with " a", loses one space)
    ([1] + byte_ids(b" ") + [264], True, " a"),
    ([1] + byte_ids(b" ") + [264], False, "<s>  a"),
    (byte_ids(b" \xe4"), True, "\ufffd\ufffd"),  # (an invalid run is one U+FFFD per byte, the space too)
    (byte_ids(b"\xe4") + [264], True, "\ufffd a"),
    (byte_ids(b"\xe4\xb8") + [264], True, "\ufffd\ufffd a"),
    (byte_ids(b"\xe4\xb8\x80"), True, "\u4e00"),
    (byte_ids(b"\xe4") + [1] + byte_ids(b"\xb8\x80"), True, "\u4e00"),  # (skipped: the run goes on)
    (byte_ids(b"\xe4") + [1] + byte_ids(b"\xb8\x80"), False, "\ufffd<s>\ufffd\ufffd"),
    (byte_ids(b"\xe4") + [0] + byte_ids(b"\xb8\x80"), False, "\ufffd<unk>\ufffd\ufffd"),
    ([99999] + byte_ids(b"\xe4") + [99999] + byte_ids(b"\xb8\x80"), False, "\u4e00"),  # (unknown ids dropped)
    (byte_ids(b"A\xed\xa0\x80"), True, "\ufffd" * 4),  # (a surrogate; "A" is in the run)
    (byte_ids(b"A\xc0\x80"), True, "\ufffd" * 3),  # (overlong forms)
    (byte_ids(b"A\xe0\x9f\xbf"), True, "\ufffd" * 4),
    (byte_ids(b"A\xf0\x8f\xbf\xbf"), True, "\ufffd" * 5),
    (byte_ids(b"A\xf4\x90\x80\x80"), True, "\ufffd" * 5),  # (past U+10FFFF)
    (byte_ids(b"A\xf5\x80\x80\x80"), True, "\ufffd" * 5),
    (byte_ids(b"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf"), True, "\ud7ff\ue000\U0010ffff"),  # (just inside)
    (byte_ids("\U0001F600".encode()), True, "\U0001F600"),
    ([0, 264], False, "<unk> a"),
    ([0, 264], True, "a"),
    ([28705, 264], True, " a"),  # ("▁" then "▁a": one of the two spaces stripped)
]


@pytest.mark.parametrize("ids,skip,expected", EDGE_CASES)
def test_decode_edge_cases(ids, skip, expected):
    tok, ref = numbatok_tok(MISTRAL), reference_tok(MISTRAL)
    assert ref.decode(ids, skip_special_tokens=skip) == expected
    assert tok.decode(ids, skip_special_tokens=skip) == expected
    assert tok.decode(np.array(ids, dtype=np.int64), skip_special_tokens=skip) == expected
    assert tok.decode_batch([np.array(ids, dtype=np.int64)] * 2 + [[]], skip_special_tokens=skip) == [expected] * 2 + [""]


# id lists that reach every branch: bytes of characters (whole, cut short, or cut at the start), single
# bytes, special tokens, any token, ids past the vocabulary
_bytes = st.tuples(st.text(min_size=1, max_size=2), st.integers(-3, 3)).map(
    lambda t: byte_ids(t[0].encode()[t[1]:] if t[1] >= 0 else t[0].encode()[:t[1]]))
_piece = st.one_of(_bytes, st.lists(st.integers(BYTE0, BYTE0 + 255), max_size=3),
                   st.lists(st.sampled_from([0, 1, 2, 28705, 264, 32000, 40000]), max_size=2),
                   st.lists(st.integers(0, 31999), max_size=3))
_rows = st.lists(_piece, max_size=8).map(lambda pieces: [i for p in pieces for i in p])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_rows, min_size=1, max_size=6))
def test_decode_generated_ids(rows):
    tok, ref = numbatok_tok(MISTRAL), reference_tok(MISTRAL)
    arrays = [np.array(r, dtype=np.int64) for r in rows]
    for skip in (True, False):
        expected = ref.decode_batch(rows, skip_special_tokens=skip)
        assert [tok.decode(r, skip_special_tokens=skip) for r in rows] == expected
        assert tok.decode_batch(rows, skip_special_tokens=skip) == expected
        assert tok.decode_batch(arrays, skip_special_tokens=skip) == expected


# ---- other Sequences, on a small vocabulary made here ----

_WORDS = ["▁", "▁▁", "▁a", "a", "b", "ab", "▁ab", "▁b", " ", "  x ", "<0x+F>", "<0x-1>", "<0xzz>", "<0x4",
          "é", "一", "▁一", "x▁y", "▁▁▁", "▁\t", "<0x41>▁", "▁<0x41>"]
_VOCAB = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)},
          **{w: 259 + i for i, w in enumerate(_WORDS)}}
_N = len(_VOCAB) + 1  # (+ the added token "<x>", not special)


def _small(decoder):
    added = [(0, "<unk>", True), (1, "<s>", True), (2, "</s>", True), (_N - 1, "<x>", False)]
    d = {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
         "post_processor": None, "decoder": decoder,
         "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": special} for i, c, special in added],
         "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                   "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                   "vocab": {**_VOCAB, "<x>": _N - 1}, "merges": []}}
    text = json.dumps(d)
    return numbatok.Tokenizer.from_str(text, device="cpu"), tokenizers.Tokenizer.from_str(text)


def _replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


def _strip(content, start, stop):
    return {"type": "Strip", "content": content, "start": start, "stop": stop}


def _seq(*decoders):
    return {"type": "Sequence", "decoders": list(decoders)}


BF, FUSE = {"type": "ByteFallback"}, {"type": "Fuse"}
DECODERS = {
    "gemma": _seq(_replace("▁", " "), BF, FUSE),
    "strip per token": _seq(_strip("▁", 2, 0), _replace("▁", " "), _strip(" ", 0, 1), BF, FUSE, _strip(" ", 0, 1)),
    "after fuse": _seq(BF, FUSE, _replace("▁a", "A"), _replace("<0x", "["), _strip("▁", 1, 2)),
    "replace per token": _replace("ab", "-"),
    "byte fallback alone": BF,
    "fuse alone": FUSE,
    "strip alone": _strip(" ", 1, 1),
    "empty": _seq(),
    "nested": _seq(_seq(_replace("▁", " ")), BF, _seq(FUSE, _strip(" ", 1, 0))),
}
_small_ids = st.lists(st.one_of(_bytes, st.lists(st.integers(0, _N + 2), max_size=3)), max_size=5).map(
    lambda pieces: [i for p in pieces for i in p])


@pytest.mark.parametrize("name", DECODERS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_small_ids, min_size=1, max_size=4))
def test_other_sequences(name, rows):
    tok, ref = _small_cached(name)
    for skip in (True, False):
        expected = [_reference_decode(ref, r, skip) for r in rows]
        got = tok.decode_batch([np.array(r, dtype=np.int64) for r in rows], skip_special_tokens=skip)
        for r, e, g in zip(rows, expected, got):
            if e is not None:
                assert (tok.decode(r, skip_special_tokens=skip), g) == (e, e)


def _reference_decode(ref, ids, skip):
    """The reference's text, or None where its Strip panics (on some texts of nothing but its char)."""
    try:
        return ref.decode(ids, skip_special_tokens=skip)
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        return None


_small_tokenizers = {}


def _small_cached(name):
    if name not in _small_tokenizers:
        _small_tokenizers[name] = _small(DECODERS[name])
    return _small_tokenizers[name]


@pytest.mark.parametrize("decoder,message", [
    ({"type": "Replace", "pattern": {"Regex": "a+"}, "content": "b"},
     r"decoder.pattern: a Replace decoder with pattern \{'Regex': 'a\+'\} is not supported yet \(String patterns are\)"),
    (_seq(_replace("▁", " "), {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "b"}),
     r"decoder.decoders\[1\].pattern: a Replace decoder with pattern"),
    (_replace("", "x"), r"decoder.pattern: a Replace decoder with an empty pattern"),
    (_seq(BF, _strip(" ", 1, 0), FUSE), r"decoder.decoders\[1\]: Strip between ByteFallback and Fuse"),
    (_seq(BF, _seq(FUSE, BF)), r"decoder.decoders\[1\].decoders\[1\]: ByteFallback after Fuse"),
    (_seq({"type": "ByteLevel"}, FUSE), r"decoder.decoders\[0\]: type 'ByteLevel' in a decoder Sequence .*alone"),
    (_seq(FUSE, {"type": "Metaspace"}), r"decoder.decoders\[1\]: type 'Metaspace' in a decoder Sequence is not"),
    (_strip("ab", 1, 0), r"decoder.content: a Strip decoder strips one character"),
])
def test_unsupported_decoders_name_their_json_path(decoder, message):
    with pytest.raises(UnsupportedComponentError, match=message):
        _small(decoder)
