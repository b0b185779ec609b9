"""gpt2 against tiktoken, built offline from the shipped tokenizer.json (tiktoken would download its own)."""
import pytest

from conftest import corpus_docs, numbatok_tok
from numbatok.compat import to_tiktoken

pytest.importorskip("tiktoken")


def test_gpt2_matches_tiktoken_on_corpus():
    tok = numbatok_tok("gpt2")
    enc = to_tiktoken(tok)
    # tiktoken's Unicode tables are newer than the reference's on some recently assigned code
    # points; English prose and code are where both references agree by construction.
    docs = [d for d in corpus_docs() if d.isascii()][::3]
    mine = tok.encode_ragged(docs, add_special_tokens=False).to_list()
    theirs = enc.encode_ordinary_batch(docs, num_threads=1)
    bad = [i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
    assert not bad, f"{len(bad)} documents differ, first {bad[:5]}"
