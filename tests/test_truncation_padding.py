"""Pairs, truncation (every strategy, stride, both directions, overflowing pieces) and padding,
against `tokenizers` with the same settings, on every shipped vocabulary."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIELDS, numbatok_tok, reference_tok

NAMES = ["gpt2", "roberta-base", "bert-base-uncased"]
WORDS = ["hello", "world", " ", "  ", ",", "it's", "naïve", "日本", "\U0001F600", "<mask>", "[SEP]", "a", "b"]
text = st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join)
item = st.one_of(text, st.tuples(text, text))


def flat(e):
    out = {f: getattr(e, f) for f in FIELDS}
    out["overflowing"] = [flat(o) for o in e.overflowing]
    return out


def configured(name, trunc, pad):
    tok, ref = numbatok_tok(name), reference_tok(name)
    for t in (ref, tok):
        if trunc:
            t.enable_truncation(**trunc)
        else:
            t.no_truncation()
        if pad:
            t.enable_padding(**pad)
        else:
            t.no_padding()
    return tok, ref


def run(name, batch, trunc, pad, add_special_tokens=True):
    tok = numbatok_tok(name)
    needed = tok.num_special_tokens_to_add(any(isinstance(x, tuple) for x in batch))
    if trunc and trunc["max_length"] < needed and add_special_tokens:
        # the reference subtracts the special tokens from max_length in unsigned arithmetic and wraps
        # around; numbatok refuses such a max_length (at enable_truncation or at encode) instead
        with pytest.raises(ValueError):
            configured(name, trunc, pad)[0].encode_batch(batch)
        return
    try:
        tok, ref = configured(name, trunc, pad)
        theirs = [flat(e) for e in ref.encode_batch(batch, add_special_tokens=add_special_tokens)]
    except BaseException:  # the reference refuses (or panics on) some settings; numbatok must refuse too
        with pytest.raises(ValueError):
            configured(name, trunc, pad)[0].encode_batch(batch, add_special_tokens=add_special_tokens)
        return
    mine = [flat(e) for e in tok.encode_batch(batch, add_special_tokens=add_special_tokens)]
    assert mine == theirs


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(item, min_size=1, max_size=5),
       max_length=st.integers(0, 12), stride=st.integers(0, 4),
       strategy=st.sampled_from(["longest_first", "only_first", "only_second"]),
       direction=st.sampled_from(["right", "left"]), special=st.booleans())
def test_truncation_with_overflow(name, batch, max_length, stride, strategy, direction, special):
    run(name, batch, dict(max_length=max_length, stride=stride, strategy=strategy, direction=direction), None, special)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(item, min_size=1, max_size=5), direction=st.sampled_from(["right", "left"]),
       length=st.one_of(st.none(), st.integers(0, 20)), multiple=st.one_of(st.none(), st.integers(1, 8)),
       max_length=st.one_of(st.none(), st.integers(3, 10)))
def test_padding(name, batch, direction, length, multiple, max_length):
    pad = dict(direction=direction, pad_id=7, pad_type_id=3, pad_token="<p>", length=length, pad_to_multiple_of=multiple)
    trunc = dict(max_length=max_length) if max_length else None
    run(name, batch, trunc, pad)


@pytest.mark.parametrize("name", NAMES)
def test_pairs_plain(name):
    run(name, [("Hello world", "How are you?"), "single", ("", ""), ("a", "")], None, None)
    tok, ref = numbatok_tok(name), reference_tok(name)
    assert flat(tok.encode("a b", "c d")) == flat(ref.encode("a b", "c d"))


def reference_call(name, texts, pairs, padding, trunc, max_length, side, multiple):
    """What transformers' fast tokenizer returns, built from the reference Encodings."""
    ref = reference_tok(name)
    ref.no_padding()
    ref.no_truncation()
    if trunc:
        ref.enable_truncation(max_length, strategy=trunc)
    encs = ref.encode_batch(list(zip(texts, pairs)) if pairs else texts)
    ref.no_truncation()
    width = max(len(e.ids) for e in encs) if padding is True else max_length
    if multiple and width % multiple:
        width += multiple - width % multiple
    pad_id = numbatok_tok(name)._pad_id()
    out = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "offset_mapping": []}
    for e in encs:
        k = width - len(e.ids)
        for key, vals, pv in (("input_ids", e.ids, pad_id), ("token_type_ids", e.type_ids, 0),
                              ("attention_mask", e.attention_mask, 0), ("offset_mapping", e.offsets, (0, 0))):
            vals = list(vals)
            out[key].append(vals + [pv] * k if side == "right" else [pv] * k + vals)
    return out


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(text, min_size=1, max_size=5), with_pairs=st.booleans(), padding=st.sampled_from([True, "max_length"]),
       trunc=st.sampled_from([None, "longest_first", "only_first", "only_second"]), max_length=st.integers(5, 16),
       side=st.sampled_from(["right", "left"]), multiple=st.sampled_from([None, 4]))
def test_call_tensors_match_reference(name, texts, with_pairs, padding, trunc, max_length, side, multiple):
    pairs = [t[::-1] for t in texts] if with_pairs else None
    tok = numbatok_tok(name)
    try:
        want = reference_call(name, texts, pairs, padding, trunc, max_length, side, multiple)
    except BaseException:
        with pytest.raises(ValueError):
            tok(texts, pairs, padding=padding, truncation=trunc or False, max_length=max_length,
                padding_side=side, pad_to_multiple_of=multiple, return_tensors="np")
        return
    if padding == "max_length" and not trunc and max(len(r) for r in want["input_ids"]) > max_length:
        return  # rows longer than max_length without truncation: transformers warns; not compared
    got = tok(texts, pairs, padding=padding, truncation=trunc or False, max_length=max_length, padding_side=side,
              pad_to_multiple_of=multiple, return_tensors="np", return_offsets_mapping=True)
    for k in ("input_ids", "token_type_ids", "attention_mask"):
        assert got[k].dtype == np.int64 and got[k].tolist() == want[k], k
    assert [[tuple(o) for o in row] for row in got["offset_mapping"].tolist()] == want["offset_mapping"]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(text, min_size=1, max_size=5), specials=st.booleans(), single=st.booleans())
def test_call_lists_match_reference(name, texts, specials, single):
    """Without padding or tensors `__call__` returns lists (one row's for a str), as transformers does."""
    ref = reference_tok(name)
    ref.no_padding()
    ref.no_truncation()
    tok = numbatok_tok(name)
    tok.no_padding()
    tok.no_truncation()
    encs = ref.encode_batch(texts, add_special_tokens=specials)
    want = {key: [list(getattr(e, field)) for e in encs]
            for key, field in (("input_ids", "ids"), ("token_type_ids", "type_ids"), ("attention_mask", "attention_mask"))}
    got = tok(texts[0] if single else texts, add_special_tokens=specials)
    assert got == ({k: v[0] for k, v in want.items()} if single else want)
