"""Parity with `tokenizers` on every document of the development corpus, for every shipped vocabulary."""
import numpy as np
import pytest

from conftest import SHIPPED, assert_same_encodings, corpus_docs, numbatok_tok, reference_tok


@pytest.fixture(scope="module")
def docs():
    return corpus_docs()


_ref = {}


def reference_encodings(name, docs):
    """The reference's encodings of the whole corpus, computed once per module (they take a while)."""
    if name not in _ref:
        _ref[name] = reference_tok(name).encode_batch(docs)
    return _ref[name]


@pytest.mark.parametrize("name", SHIPPED)
def test_encode_batch_matches_reference(name, docs):
    mine = numbatok_tok(name).encode_batch(docs)
    assert_same_encodings(mine, reference_encodings(name, docs), docs)


@pytest.mark.parametrize("name", SHIPPED)
def test_ragged_equals_encode_batch(name, docs):
    """The fast path's arrays hold exactly what the Encoding objects hold."""
    tok = numbatok_tok(name)
    sample = docs[::7]
    r = tok.encode_ragged(sample, return_offsets=True)
    encs = tok.encode_batch(sample)
    assert np.array_equal(np.diff(r.row_offsets), [len(e.ids) for e in encs])
    assert r.ids.tolist() == [i for e in encs for i in e.ids]
    assert [tuple(o) for o in r.offsets.tolist()] == [o for e in encs for o in e.offsets]
    assert r.word_ids.tolist() == [-1 if w is None else w for e in encs for w in e.word_ids]
    no_special = tok.encode_ragged(sample, add_special_tokens=False)
    ref = reference_tok(name).encode_batch(sample, add_special_tokens=False)
    assert no_special.to_list() == [e.ids for e in ref]


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("skip", [True, False])
def test_decode_matches_reference(name, skip, docs):
    tok, ref = numbatok_tok(name), reference_tok(name)
    ids = [e.ids for e in reference_encodings(name, docs)[::5]]
    assert tok.decode_batch(ids, skip_special_tokens=skip) == ref.decode_batch(ids, skip_special_tokens=skip)
