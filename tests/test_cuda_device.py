"""On a real GPU only (skipped elsewhere): the CUDA backend against the reference on the corpus,
device-resident input and output, and agreement with the CPU backend."""
import numpy as np
import pytest

from conftest import SHIPPED, assert_same_encodings, corpus_docs, numbatok_tok, reference_tok
from numbatok.backends import gpu_available

pytestmark = pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("name", SHIPPED)
def test_cuda_encode_batch_matches_reference_on_corpus(name):
    docs = corpus_docs()
    assert_same_encodings(numbatok_tok(name, "cuda").encode_batch(docs), reference_tok(name).encode_batch(docs), docs)


@pytest.mark.parametrize("name", SHIPPED)
def test_cuda_ragged_equals_cpu(name):
    docs = corpus_docs()
    gpu = numbatok_tok(name, "cuda").encode_ragged(docs, return_offsets=True).to_host()
    cpu = numbatok_tok(name, "cpu").encode_ragged(docs, return_offsets=True)
    for f in ("ids", "row_offsets", "offsets", "type_ids", "special_tokens_mask", "word_ids"):
        assert np.array_equal(getattr(gpu, f), getattr(cpu, f)), f


def test_device_arrays_in_and_out():
    import cupy
    from numbatok.batch import Batch, to_batch
    docs = corpus_docs()[:2000]
    host = to_batch(docs)
    tok = numbatok_tok("gpt2", "cuda")
    r = tok.encode_ragged(Batch(cupy.asarray(host.data), cupy.asarray(host.offsets)), add_special_tokens=False)
    assert isinstance(r.ids, cupy.ndarray)
    assert r.to_list() == [e.ids for e in reference_tok("gpt2").encode_batch(docs, add_special_tokens=False)]


def test_pinned_staging_copies_one_after_another():
    """Text and row offsets both over 1 MB take the pinned staging buffer in turn, and ids come back
    the same as the CPU's: a refill of the buffer before the GPU had read it would corrupt the text."""
    from numbatok.backends import cuda as bc
    docs = [d for d in corpus_docs() if d][:20000] * 10  # 200,000 rows: offsets of 1.6 MB
    tok = numbatok_tok("gpt2", "cuda")
    staged = []
    real = bc._STAGING.get
    bc._STAGING.get = lambda n: staged.append(n) or real(n)
    try:
        gpu = tok.encode_ragged(docs, add_special_tokens=False).to_host()
    finally:
        bc._STAGING.get = real
    assert len(staged) == 2
    cpu = numbatok_tok("gpt2", "cpu").encode_ragged(docs, add_special_tokens=False)
    assert np.array_equal(gpu.ids, cpu.ids) and np.array_equal(gpu.row_offsets, cpu.row_offsets)
