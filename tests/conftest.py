"""Shared fixtures: the shipped tokenizers (numbatok on the CPU, and the reference) and the corpus."""
import json
import os
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.environ.get("NUMBATOK_CORPUS") or os.path.join(os.path.dirname(ROOT), "shared", "corpus")
SHIPPED = ["gpt2", "roberta-base", "bert-base-uncased", "bert-base-cased"]

# The CUDA simulator runs kernel helpers as Python, where uint64 hashing "overflows" by design.
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)


def vocab_path(name):
    return os.path.join(ROOT, "vocab", name, "tokenizer.json")


def corpus_docs():
    """Every document of the development corpus: big.txt paragraphs and the JSONL files' texts."""
    if not os.path.isdir(CORPUS):
        pytest.skip("the development corpus (../shared/corpus beside the repository) is not present")
    docs = []
    with open(os.path.join(CORPUS, "big.txt"), encoding="utf-8") as f:
        docs += f.read().split("\n\n")
    for name in ("udhr_multilingual.jsonl", "code_and_markup.jsonl", "tricky.jsonl"):
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            docs += [json.loads(line)["text"] for line in f]
    return docs


_cache = {}


def numbatok_tok(name, device="cpu"):
    import numbatok
    key = ("nt", name, device)
    if key not in _cache:
        _cache[key] = numbatok.Tokenizer.from_pretrained(name, device=device)
    return _cache[key]


def reference_tok(name):
    tokenizers = pytest.importorskip("tokenizers")
    key = ("ref", name)
    if key not in _cache:
        _cache[key] = tokenizers.Tokenizer.from_file(vocab_path(name))
    return _cache[key]


FIELDS = ("ids", "tokens", "offsets", "type_ids", "special_tokens_mask", "attention_mask", "word_ids")


def assert_same_encodings(mine, theirs, texts):
    assert len(mine) == len(theirs)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            if x != y:
                k = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]), min(len(x), len(y)))
                raise AssertionError(
                    f"text {i} ({texts[i][:60]!r}...): {f} differs at token {k}: "
                    f"numbatok {x[max(0, k - 2):k + 3]} vs tokenizers {y[max(0, k - 2):k + 3]}")
