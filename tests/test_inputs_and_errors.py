"""Input forms, and bad input: each gets the reference's result or a clear error, never a crash,
a hang or silently different ids."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import numbatok
from numbatok import InvalidInputError, NumbatokError, UnsupportedComponentError
from conftest import numbatok_tok, reference_tok, vocab_path

TEXTS = ["Hello world", "", "naïve café — 東京", "\U0001F600 x"]


@pytest.fixture(scope="module")
def tok():
    return numbatok_tok("gpt2")


def ids_of(r):
    return r.to_list()


def test_every_input_form_gives_the_same_ids(tok):
    expect = [e.ids for e in reference_tok("gpt2").encode_batch(TEXTS)]
    assert ids_of(tok.encode_ragged(TEXTS)) == expect
    assert ids_of(tok.encode_ragged(tuple(TEXTS))) == expect
    assert ids_of(tok.encode_ragged([t.encode() for t in TEXTS])) == expect
    assert ids_of(tok.encode_ragged(np.array(TEXTS))) == expect
    assert ids_of(tok.encode_ragged(TEXTS[2])) == [expect[2]]
    assert ids_of(tok.encode_ragged(TEXTS[2].encode())) == [expect[2]]
    pa = pytest.importorskip("pyarrow")
    assert ids_of(tok.encode_ragged(pa.array(TEXTS))) == expect
    assert ids_of(tok.encode_ragged(pa.array(TEXTS, type=pa.large_string()))) == expect
    assert ids_of(tok.encode_ragged(pa.array(["skip"] + TEXTS).slice(1))) == expect
    assert ids_of(tok.encode_ragged(pa.chunked_array([TEXTS[:2], TEXTS[2:]]))) == expect


def test_empty_batch_gives_empty_results(tok):
    r = tok.encode_ragged([])
    assert len(r) == 0 and r.ids.shape == (0,) and r.row_offsets.tolist() == [0]
    assert tok.encode_batch([]) == [] == reference_tok("gpt2").encode_batch([])
    assert tok.decode_batch([]) == []


@pytest.mark.parametrize("bad,where", [([b"ok", b"\xff\xfe"], "item 1"), ([b"abc\xe2\x82"], "item 0"),
                                       ([b"\xed\xa0\x80"], "item 0"), ([b"\xc0\xaf"], "item 0")])
def test_invalid_utf8_is_refused_with_the_row(tok, bad, where):
    with pytest.raises(InvalidInputError, match=f"{where} is not valid UTF-8"):
        tok.encode_ragged(bad)


def test_none_and_non_text_items_are_refused(tok):
    with pytest.raises(InvalidInputError, match="item 1 is NoneType"):
        tok.encode_ragged(["a", None])
    with pytest.raises(InvalidInputError, match="item 0 is int"):
        tok.encode_batch([3, "a"])
    with pytest.raises(InvalidInputError, match="None"):
        tok.encode_ragged(None)
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(InvalidInputError, match="item 1 is null"):
        tok.encode_ragged(pa.array(["a", None]))


def test_lone_surrogate_is_refused(tok):
    with pytest.raises(InvalidInputError, match="item 1 contains a lone surrogate"):
        tok.encode_ragged(["fine", "bad \ud800 text"])


def test_megabyte_document_without_spaces(tok):
    text = "".join(chr(0x61 + (i * 7919) % 26) for i in range(1_000_000))
    assert tok.encode(text).ids == reference_tok("gpt2").encode(text).ids


def _json_with(**changes):
    d = json.load(open(vocab_path("gpt2"), encoding="utf-8"))
    for path, value in changes.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return json.dumps(d)


@pytest.mark.parametrize("changes,message", [
    (dict(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "UnicodeScripts"}]}),
     r"pre_tokenizer.pretokenizers\[1\]: type 'UnicodeScripts' is not supported yet"),
    (dict(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Whitespace"}]}),
     r"pre_tokenizer.pretokenizers\[1\]: a pre-tokenizer after ByteLevel or a Split by a regex is not supported yet"),
    (dict(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "UnicodeScripts"}]}),
     r"pre_tokenizer.pretokenizers\[0\]: type 'UnicodeScripts' is not supported yet"),
    (dict(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}), r"normalizer: type 'Precompiled' is not supported"),
    (dict(model__dropout=0.1), r"model.dropout: BPE dropout=0.1"),
    (dict(decoder={"type": "Metaspace"}), r"decoder: type 'Metaspace' is not supported yet"),
    (dict(post_processor={"type": "Weird"}), r"post_processor: type 'Weird' is not supported yet"),
    (dict(model={"type": "Unigram", "vocab": [["a", 0.0]]}), r"model: type 'Unigram' is not supported yet"),
])
def test_unsupported_components_name_their_json_path(changes, message):
    with pytest.raises(UnsupportedComponentError, match=message):
        numbatok.Tokenizer.from_str(_json_with(**changes), device="cpu")


def test_malformed_files():
    with pytest.raises(NumbatokError, match="invalid JSON"):
        numbatok.Tokenizer.from_str("{not json", device="cpu")
    with pytest.raises(NumbatokError, match="'model' key"):
        numbatok.Tokenizer.from_str("{}", device="cpu")
    with pytest.raises(NumbatokError, match=r"model.merges\[0\]: token"):
        numbatok.Tokenizer.from_str(_json_with(model__merges=[["Ġ", "notatoken"]]), device="cpu")
    assert issubclass(UnsupportedComponentError, ValueError)


def test_unknown_name_and_device():
    with pytest.raises(NumbatokError, match="neither a shipped tokenizer"):
        numbatok.Tokenizer.from_pretrained("no-such-tokenizer")
    with pytest.raises(NumbatokError, match="device must be"):
        numbatok.Tokenizer.from_pretrained("gpt2", device="tpu")


def test_gpu_memory_budget_is_checked_and_splits_rows_into_groups():
    for bad in (0, -1, 1.5, "8GB", True):
        with pytest.raises(NumbatokError, match="gpu_memory_budget must be a positive number of bytes"):
            numbatok.Tokenizer.from_pretrained("gpt2", device="cpu", gpu_memory_budget=bad)
    from numbatok.backends.cpu import row_groups
    sizes = np.array([3, 4, 0, 10, 2, 2, 2, 9], np.int64)
    # groups of at most 6 bytes; the 10- and 9-byte rows alone; the empty row joins its group
    assert row_groups(sizes, 6).tolist() == [0, 1, 3, 4, 7, 8]
    assert row_groups(sizes, 100).tolist() == [0, 8]
    assert row_groups(np.zeros(0, np.int64), 6).tolist() == [0, 0]


def test_auto_device_without_gpu_is_cpu():
    from numbatok.backends import gpu_available
    if not gpu_available():
        assert numbatok.Tokenizer.from_pretrained("gpt2").device == "cpu"


def test_call_returns_padded_arrays(tok):
    rob = numbatok_tok("roberta-base")
    out = rob(["Hello world", "a"], padding=True)
    ref = reference_tok("roberta-base").encode_batch(["Hello world", "a"])
    assert out["input_ids"].shape == (2, len(ref[0].ids))
    assert out["input_ids"][0].tolist() == ref[0].ids
    assert out["input_ids"][1].tolist() == ref[1].ids + [1] * (len(ref[0].ids) - len(ref[1].ids))
    assert out["attention_mask"][1].tolist() == [1] * len(ref[1].ids) + [0] * (len(ref[0].ids) - len(ref[1].ids))
    trunc = rob(["one two three four five six"], truncation=True, max_length=4, return_tensors="np")
    assert trunc["input_ids"].tolist() == [[0, 1264, 80, 2]]
    assert rob("Hello")["input_ids"] == reference_tok("roberta-base").encode("Hello").ids


def test_ragged_to_padded(tok):
    r = tok.encode_ragged(["a b c", "a", ""])
    ids, mask = r.to_padded(pad_id=-1)
    assert ids.shape == (3, 3) and mask.sum() == 4
    assert ids[1].tolist() == [64, -1, -1]
    left, _ = r.to_padded(pad_id=-1, length=2, side="left")
    assert left[1].tolist() == [-1, 64]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=("Cs",))), max_size=40))
def test_lists_of_str_read_in_parallel_encode_like_python(texts):
    from numbatok.kernels import pystr
    got = pystr.convert(texts)
    if pystr._LAYOUT is None:
        pytest.skip("this interpreter's str layout is not read directly")
    assert bytes(got[0]) == "".join(texts).encode("utf-8")
    assert got[1].tolist() == np.cumsum([0] + [len(t.encode("utf-8")) for t in texts]).tolist()


def test_parallel_reader_leaves_odd_items_to_the_plain_path(tok):
    from numbatok.kernels import pystr

    class Sub(str):
        pass
    many = ["word %d café" % i for i in range(300)]
    for odd, err in ((Sub("sub"), None), (7, "item 150 is int"), ("x \udc00", "item 150 contains a lone surrogate")):
        texts = many[:150] + [odd] + many[150:]
        assert pystr.convert(texts) is None
        if err is None:
            expect = [e.ids for e in reference_tok("gpt2").encode_batch([str(t) for t in texts])]
            assert ids_of(tok.encode_ragged(texts)) == expect
        else:
            with pytest.raises(InvalidInputError, match=err):
                tok.encode_ragged(texts)
    assert ids_of(tok.encode_ragged(many)) == [e.ids for e in reference_tok("gpt2").encode_batch(many)]


def test_str_layout_is_recognised_on_standard_cpython():
    """The parallel reader must not quietly fall back where it should work (it once did on 3.12,
    whose one-character Latin-1 strings are static objects of another size)."""
    import sys
    import sysconfig
    from numbatok.kernels import pystr
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("read directly on standard CPython builds only")
    assert pystr.convert(["a", "\xe9", "\u0100", "\U00010000"]) is not None
