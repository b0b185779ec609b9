"""Shared fixtures: the shipped tokenizers (numbatok on the CPU, and the reference) and the corpus."""
import contextlib
import json
import os
import tempfile
import warnings

import numpy as np
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


def _text(rows, seed):
    rng = np.random.default_rng(seed)
    words = ["the", "The", "of", "1984", "naïve", "日本語の文", "don't", "  ", "\n", "x" * 40, "émigré,", "(a)", "🙂"]
    return [" ".join(rng.choice(words, 80)) for _ in range(rows)]


def _large_calls(name):  # (the threaded loops: above the small-call limit, then again with the words cached)
    import numbatok
    tok, rows = numbatok.Tokenizer.from_pretrained(name, device="cpu"), _text(600, 0)
    tok.encode_ragged(rows)
    tok.encode_ragged(rows)


def _small_calls(name):  # (the one-launch steps: a call of ~16 KB on two threads, one row alone)
    import numbatok
    tok, rows = numbatok.Tokenizer.from_pretrained(name, device="cpu"), _text(30, 1)
    tok.encode_ragged(rows)
    tok.encode_ragged(rows[:1])


def _offsets(name):
    import numbatok
    numbatok.Tokenizer.from_pretrained(name, device="cpu").encode_ragged(_text(600, 2), return_offsets=True)


# The kernels that most tests compile first, in five calls. Numba's cache is shared on disk, but not
# while a kernel compiles: two pytest-xdist workers starting together compiled the same kernels side by
# side (a cold suite on two cores spent ~400 s of its ~1,060 s of compiling on such twins). Each worker
# runs these calls before its tests, even workers from the front of the list and odd ones from the back,
# each call under a file lock: every kernel compiles once, and a worker that reaches a call another has
# made loads its kernels from the cache. (Ordered so that two workers take halves of about equal compile
# time; gpt2's offsets come after its large calls, whose loops they use.)
_WARM = [(_large_calls, "gpt2"), (_offsets, "gpt2"), (_small_calls, "bert-base-uncased"),
         (_large_calls, "bert-base-uncased"), (_small_calls, "gpt2")]


@contextlib.contextmanager
def _file_lock(path):
    import fcntl
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def _compile_once_across_workers(request):
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not run or os.name != "posix" or len(request.session.items) < 200:  # (a few tests compile what they use)
        yield
        return
    k, n = int(worker.lstrip("gw") or 0), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    order = list(range(len(_WARM)))[::-1 if k % 2 else 1]  # (even workers from the front, odd from the back)
    shift = (k // 2) * len(order) // ((n + 1) // 2)
    folder = os.path.join(tempfile.gettempdir(), f"numbatok-warm-{run}")
    os.makedirs(folder, exist_ok=True)
    for j in order[shift:] + order[:shift]:
        call, name = _WARM[j]
        with _file_lock(os.path.join(folder, str(j))):
            call(name)
    yield
