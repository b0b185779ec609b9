"""Split by the cl100k, Qwen2, o200k and GPT-2 regexes: the hand-written scanners against the
reference's own Split on generated text, and the o200k and cl100k vocabularies end to end."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from conftest import assert_same_encodings, corpus_docs, numbatok_tok, reference_tok
from numbatok import unicode_tables
from numbatok.errors import UnsupportedComponentError
from numbatok.pre_tokenizers import split_piece
from numbatok.pre_tokenizers.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from numbatok.spec import SPLIT_PATTERNS, parse

tokenizers = pytest.importorskip("tokenizers")

NAMES = ["o200k_base", "olmo2-dolma2-cl100k"]
PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "qwen2": QWEN2_PATTERN, "o200k": O200K_PATTERN}

# what the patterns' branches turn on: letter case (Lu, Lt, Lm, Lo, Ll and marks), contractions in any
# case and with U+017F, digit runs, symbol runs before CR/LF and '/', whitespace runs before non-space
PIECES = ["'s", "'S", "'\u017f", "'t", "'RE", "'Ve", "'m", "'LL", "'d", "'x", "''", "I'M", "HELLO", "Hello", "hELLO",
          "\u01c5", "\u02b0", "\u00aa", "\u0301", "e\u0301", "E\u0301", "\u0301\u0301a", "\u0903", "\u1f88",
          "\u0130", "\u03a3\u03b1", "1", "12", "1234567", "\u0664\u0665", "\u00bd", "!", "!!", "/", "//", "!/\n",
          "?\r\n", " ", "  ", "\t", "\n", "\r\n", "\r", " \n ", "\n\n", "\u00a0", "\u3000", "\u2028", "\u0085",
          "日本語", "中文", "한국어", "\U0001F600", "\U0001F468\u200d\U0001F469", "\x00", "\ufeff", "_", "$", "a"]
text_piece = st.one_of(
    st.sampled_from(PIECES),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=10),
    st.text(alphabet="aZ1 '/\n\r\t!\u0301\u01c5\u02b0\u00e9\u4e2d\u00a0sS", max_size=16),
)
texts = st.lists(text_piece, max_size=14).map("".join)


@njit(cache=False)
def _pieces(data, prog, classes):
    n = data.shape[0]
    ws = np.empty(n + 1, np.int64)
    we = np.empty(n + 1, np.int64)
    wv = np.empty(n + 1, np.int64)
    wk = np.empty(n + 1, np.int64)
    k = split_piece(data, 0, n, prog, False, classes, True, ws, we, wv, wk, 0)
    return ws[:k].copy(), we[:k].copy()


def _prog(pattern):
    kind, arg = SPLIT_PATTERNS[pattern]
    return np.array([1, kind, arg, 0, 0, 0, 0, 0], np.int64)


def _char_spans(text, starts, ends):
    # byte offsets -> character offsets, as the reference reports them
    to_char = np.zeros(len(text.encode()) + 1, np.int64)
    pos = 0
    for i, c in enumerate(text):
        pos += len(c.encode())
        to_char[pos] = i + 1
    return [(int(to_char[s]), int(to_char[e])) for s, e in zip(starts, ends)]


_REF = {name: tokenizers.pre_tokenizers.Split(tokenizers.Regex(p), behavior="isolated") for name, p in PATTERNS.items()}


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_scanner_matches_reference_split(name, text):
    data = np.frombuffer(text.encode(), np.uint8)
    starts, ends = _pieces(data, _prog(PATTERNS[name]), unicode_tables.load())
    assert _char_spans(text, starts, ends) == [span for _, span in _REF[name].pre_tokenize_str(text)]


@pytest.mark.parametrize("name", ["cl100k", "qwen2", "o200k"])
def test_start_masks_give_the_scanners_words(name):
    """The cached-words loops' scanner (`scan_block`: 64-byte start masks, `pattern_end` where their
    rules may not hold) against `pattern_end` alone, word by word: runs of every ASCII class, case
    changes, digit runs, whitespace runs with CR and LF, '/' after symbols and line ends, and
    apostrophes and multi-byte characters among them, across block edges and at row ends."""
    from numbatok._numba import cpu_kernel
    from numbatok.backends.cpu import BLOCK, _scan_tables, scan_pattern_block
    from numbatok.pre_tokenizers.patterns import pattern_end

    @cpu_kernel
    def disagreements(data, offsets, asc, classes, kind, arg, out):
        rec_flat = np.zeros(4096, np.uint64)  # (the block only prefetches from it)
        bs = np.empty(BLOCK, np.int64)
        bm = np.empty(BLOCK, np.int64)
        bkey = np.empty((BLOCK, 3), np.uint64)
        bad = 0
        for r in range(offsets.shape[0] - 1):
            a, b = offsets[r], offsets[r + 1]
            p, q, st, sp = a, a - 128, np.uint64(0), a - 1
            while p < b and out[r] < 0:
                n, p_next, sp, q, st = scan_pattern_block(data, p, a, b, asc, classes, sp, q, st, rec_flat, 1024, bs,
                                                          bm, bkey, kind, arg)
                for t in range(n):
                    if bs[t] + bm[t] != pattern_end(data, bs[t], b, classes, kind, arg):
                        bad += 1
                        out[r] = bs[t]
                        break
                p = p_next
        return bad

    rng = np.random.default_rng(11)
    pieces = [" ", "  ", "\n", "\n\n", " \n", "\n ", " \n \n", "\t", "\t\n", "\r\n", "\x0b\x0c", "a", "Zq", "word",
              "Word", "WORD", "wORd", "x" * 70, "X" * 66, "0", "42", "1234567", "1" * 65, ".", ",-", ".\n", "!" * 66, "_",
              "/", "\n/", "!\n/", "\x00", "\x7f", "@[`{", " a", " 1", " .", "\x1c\x1f", "'s", "'T", " '", "é",
              " naïve", "日本", "\xa0", "\u3000", "\x85", "\U0001F44D", "ſ"]
    rows = ["".join(rng.choice(pieces, rng.integers(0, 60))) for _ in range(6000)]
    rows += [" " * n + "a" + " " * m for n in range(0, 130, 7) for m in range(0, 70, 3)]
    data = np.frombuffer("".join(rows).encode(), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(r.encode()) for r in rows])]).astype(np.int64)
    asc = _scan_tables(np.zeros((2, 256), np.uint8).tobytes())[0]
    kind, arg = SPLIT_PATTERNS[PATTERNS[name]]
    out = np.full(len(rows), -1, np.int64)
    bad = disagreements(data, offsets, asc, unicode_tables.load(), kind, arg, out)
    assert bad == 0, [(rows[r], int(out[r] - offsets[r])) for r in np.flatnonzero(out >= 0)[:3]]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(texts, min_size=1, max_size=6))
def test_generated_batches_match_reference(name, batch):
    tok, ref = numbatok_tok(name), reference_tok(name)
    assert_same_encodings(tok.encode_batch(batch), ref.encode_batch(batch), batch)
    assert tok.encode_ragged(batch).to_list() == [e.ids for e in ref.encode_batch(batch)]
    assert tok.decode_batch([e.ids for e in ref.encode_batch(batch)]) == ref.decode_batch(
        [e.ids for e in ref.encode_batch(batch)])


@pytest.mark.parametrize("name", NAMES)
def test_corpus_matches_reference(name):
    docs = corpus_docs()[::1 if name == "o200k_base" else 3]  # (cl100k's scanner has its own generated-text test)
    tok, ref = numbatok_tok(name), reference_tok(name)
    theirs = ref.encode_batch(docs)
    assert tok.encode_ragged(docs).to_list() == [e.ids for e in theirs]
    sample = slice(None, None, 11)
    assert_same_encodings(tok.encode_batch(docs[sample]), theirs[sample], docs[sample])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", ["", " ", "a" * 50_000, "A" * 20_000 + "a", "1" * 10_001, "!" * 20_000 + "\n" * 3,
                                  " " * 10_000 + "x", "\u0301" * 5_000, "\U0001F600" * 5_000, "ab " * 20_000])
def test_long_and_degenerate_inputs(name, text):
    tok, ref = numbatok_tok(name), reference_tok(name)
    assert_same_encodings([tok.encode(text)], [ref.encode(text)], [text])


def test_o200k_matches_tiktoken_on_corpus():
    pytest.importorskip("tiktoken")
    from numbatok.compat import to_tiktoken

    tok = numbatok_tok("o200k_base")
    enc = to_tiktoken(tok)
    # (tiktoken's Unicode tables are newer than the reference's: ASCII documents agree by construction)
    docs = [d for d in corpus_docs() if d.isascii() and "<|" not in d][::3]
    assert tok.encode_ragged(docs, add_special_tokens=False).to_list() == enc.encode_ordinary_batch(docs, num_threads=1)


def _with_pre(pre):
    d = {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": pre}
    import json
    return parse(json.dumps(d))


def test_unknown_split_patterns_and_behaviours_are_refused():
    split = {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Isolated", "invert": False}
    assert _with_pre(split).pre_tokenizer.stages == [SPLIT_PATTERNS[O200K_PATTERN]]
    assert _with_pre(dict(split, behavior="Removed", invert=True)).pre_tokenizer.stages == [SPLIT_PATTERNS[O200K_PATTERN]]
    with pytest.raises(UnsupportedComponentError, match=r"pre_tokenizer.pattern: Split by .* not supported yet"):
        _with_pre(dict(split, pattern={"Regex": r"\d+"}))
    with pytest.raises(UnsupportedComponentError, match="Contiguous"):
        _with_pre(dict(split, behavior="Contiguous"))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    with pytest.raises(UnsupportedComponentError, match="use_regex=false"):
        _with_pre({"type": "Sequence", "pretokenizers": [split, byte_level]})
    with pytest.raises(UnsupportedComponentError, match="after ByteLevel or a Split"):
        _with_pre({"type": "Sequence", "pretokenizers": [split, {"type": "WhitespaceSplit"}]})
