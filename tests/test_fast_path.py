"""The CPU fast path (one fused kernel per chunk of rows, and the tokenizer's word cache across
calls) gives the reference's ids on the whole corpus: cold, warm, sliced, with a full cache, and
from several Python threads at once."""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import ROOT, SHIPPED, corpus_docs, reference_tok, vocab_path
from tokenizers import Tokenizer

import numbatok
from numbatok.batch import to_batch
from numbatok import tokenizer as tokenizer_module
from numbatok.kernels.word_cache import WordCache


@pytest.fixture(scope="module")
def docs():
    return corpus_docs()


_ref = {}


def ref_ids(name, docs):
    if name not in _ref:
        _ref[name] = [e.ids for e in reference_tok(name).encode_batch(docs)]
    return _ref[name]


@pytest.mark.parametrize("name", SHIPPED)
def test_cold_then_warm_cache(name, docs):
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    assert len(tok._word_cache) == 0
    assert tok.encode_ragged(docs).to_list() == ref_ids(name, docs)
    assert len(tok._word_cache) > 1000  # words were cached, and the next call reads them
    assert tok.encode_ragged(docs).to_list() == ref_ids(name, docs)


def test_cached_words_spread_over_every_slot(docs):
    # Every hash has bit 0 set (0 marks an empty record): a first slot taken from the low bits
    # left the even slots to collisions only, the table half its size.
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    tok.encode_ragged(docs)
    used = np.flatnonzero(tok._word_cache.rec[:, 0])
    assert used.shape[0] > 1000
    assert 0.4 < np.mean(used % 2 == 0) < 0.6


@pytest.mark.parametrize("limit", ["entries", "key bytes"])
def test_full_cache_stops_adding_and_stays_exact(docs, limit):
    # each limit on its own: words go in in the order the text first shows them, so under a small
    # entry limit no long word gets in, and the long keys' budget needs a cache with room for words
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    tok._word_cache = WordCache(max_entries=500) if limit == "entries" else WordCache(max_key_bytes=2000)
    sample = docs[::3]
    expect = [e.ids for e in reference_tok("gpt2").encode_batch(sample)]
    assert tok.encode_ragged(sample).to_list() == expect
    if limit == "entries":
        assert len(tok._word_cache) == 500
    else:
        assert 2000 - 255 < tok._word_cache.state[3] <= 2000  # long keys fill the budget (a key is <= 255 bytes)
    assert tok.encode_ragged(sample).to_list() == expect


@pytest.mark.parametrize("prefix_space", [False, True])
def test_long_words_are_cached_exactly(prefix_space):
    """Words of 17 to 255 model-space bytes are cached with their bytes outside the record: equal
    hashes and lengths never pass for equal words, a virtual prefix space matches a real one, and
    words beyond 255 bytes still run the model every time (beyond the fused loop's scratch, with
    scratch of their own)."""
    import json
    tokenizers = pytest.importorskip("tokenizers")
    d = json.loads(reference_tok("gpt2").to_str())
    d["pre_tokenizer"]["add_prefix_space"] = prefix_space
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok = numbatok.Tokenizer.from_str(json.dumps(d), device="cpu")
    rng = np.random.default_rng(7)
    words = ["".join(rng.choice(list("abcdefgh"), n)) for n in (15, 16, 17, 40, 200, 254, 255, 256, 400, 1100, 3000)]
    words += ["日本語の文章" * k for k in (1, 2, 5, 20)] + ["x" * 40, "y" * 40, "xy" * 20, "yx" * 20]
    rows = [" ".join(rng.choice(words, 6)) for _ in range(300)] + words + [" " + w for w in words]
    want = [e.ids for e in ref.encode_batch(rows, add_special_tokens=False)]
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
    assert tok._word_cache.state[3] > 0  # long keys were stored
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
    assert tok.encode_ragged(rows[::-1], add_special_tokens=False).to_list() == want[::-1]


def test_slices_give_the_same_ids(docs, monkeypatch):
    monkeypatch.setattr(tokenizer_module, "SLICE_BYTES", 20_000)
    tok = numbatok.Tokenizer.from_pretrained("bert-base-uncased", device="cpu")
    sample = docs[::5] + ["x" * 50_000] + docs[1::5]  # a row larger than a slice goes alone
    r = tok.encode_ragged(sample)
    assert r.to_list() == [e.ids for e in reference_tok("bert-base-uncased").encode_batch(sample)]


def test_ids_buffer_is_kept_between_calls(docs, monkeypatch):
    """The buffer a call writes its ids into before gathering them is kept for the next call (fresh
    memory faults on every page written): a smaller call after a larger one reads none of its ids,
    and a buffer over the limit is not kept."""
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    spare = tok._word_cache._out
    large, small = docs[::2], docs[1::7]
    assert tok.encode_ragged(large).to_list() == ref_ids("gpt2", docs)[::2]
    kept = spare._buf
    assert kept is not None
    assert tok.encode_ragged(small).to_list() == ref_ids("gpt2", docs)[1::7]
    assert spare._buf is kept  # (taken, written, given back)
    monkeypatch.setattr(spare, "_keep", 1000)
    spare._buf = None
    assert tok.encode_ragged(small).to_list() == ref_ids("gpt2", docs)[1::7]
    assert spare._buf is None


def test_token_table_is_kept_between_offsets_calls(docs):
    """A byte-level call with offsets fills its token table in memory an earlier call gave back: a
    smaller call after a larger one gets the reference's offsets, none of the larger one's."""
    from numbatok.backends import cpu
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    ref = reference_tok("gpt2")
    large, small = docs[::3], docs[1::11]
    tok.encode_ragged(large, return_offsets=True)
    kept = cpu._TABLE._buf
    assert kept is not None and kept.shape[0] >= 9 * 100_000
    r = tok.encode_ragged(small, return_offsets=True)
    assert cpu._TABLE._buf is kept  # (taken, filled, given back)
    want = ref.encode_batch(small)
    assert [tuple(o) for o in r.offsets.tolist()] == [o for e in want for o in e.offsets]
    assert r.word_ids.tolist() == [-1 if w is None else w for e in want for w in e.word_ids]


def test_wordpiece_offsets_from_the_ids_path(docs, monkeypatch):
    """WordPiece offsets come from the ids path's ids walked over the normalized words (accents,
    unknown characters, words over 100 characters, added tokens); ids that do not fill the words
    exactly are caught, and the call takes the model's way instead."""
    from numbatok.backends import cpu
    tok = numbatok.Tokenizer.from_pretrained("bert-base-uncased", device="cpu")
    ref = reference_tok("bert-base-uncased")
    rows = docs[:300] + ["Naïve ÉCOLE İstanbul [MASK]x a\u0301\u0316b ﬁne ½ \u4e2d\u6587 \U0001F600 " + "y" * 150,
                         "[CLS]", "", "  \t ", "ǅungla Ⅻ ＡＢＣ"] * 3
    want = ref.encode_batch(rows)

    def check():
        r = tok.encode_ragged(rows, return_offsets=True)
        assert r.ids.tolist() == [i for e in want for i in e.ids]
        assert [tuple(o) for o in r.offsets.tolist()] == [o for e in want for o in e.offsets]
        assert r.word_ids.tolist() == [-1 if w is None else w for e in want for w in e.word_ids]

    b = to_batch(rows)
    assert cpu._wordpiece_spans(tok, b, cpu._readonly(b.data), cpu._readonly(b.offsets), 0) is not None
    check()
    run_ids = tok._run_ids

    def off_by_one(b):  # one token of a middle row swapped for another
        ids, row_tok = run_ids(b)
        ids = ids.copy()
        t = int(row_tok[150]) + 1
        ids[t] = tok.token_to_id("##s") if tok.id_to_token(int(ids[t])) != "##s" else tok.token_to_id("##d")
        return ids, row_tok

    monkeypatch.setattr(tok, "_run_ids", off_by_one)
    assert cpu._wordpiece_spans(tok, b, cpu._readonly(b.data), cpu._readonly(b.offsets), 0) is None
    check()


def test_cached_ids_of_a_vocabulary_over_65536_ids(docs, tmp_path):
    """Cached words keep up to three ids in their record when every id is under 2**16 (the shipped
    vocabularies), else up to two under 2**24: gpt2 with every id moved up by 70,000 takes the
    second layout, and its warm pass (all words from the cache) still gives the reference's ids."""
    from numbatok.kernels import word_cache as wc
    with open(vocab_path("gpt2"), encoding="utf-8") as f:
        spec = json.load(f)
    spec["model"]["vocab"] = {t: i + 70_000 for t, i in spec["model"]["vocab"].items()}
    for a in spec["added_tokens"]:
        a["id"] += 70_000
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    sample = docs[::5]
    expect = [e.ids for e in Tokenizer.from_file(str(path)).encode_batch(sample)]
    tok = numbatok.Tokenizer.from_file(str(path), device="cpu")
    assert tok.encode_ragged(sample).to_list() == expect
    assert tok.encode_ragged(sample).to_list() == expect
    v = tok._word_cache.rec[:, 3][tok._word_cache.rec[:, 0] != 0]
    inline = (v & wc.INLINE) != 0
    assert inline.sum() > 1000 and not ((v & wc.PACK16) != 0)[inline].any()
    small = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    small.encode_ragged(sample)
    v = small._word_cache.rec[:, 3][small._word_cache.rec[:, 0] != 0]
    three = ((v & wc.INLINE) != 0) & (((v >> np.uint64(8)) & np.uint64(63)) == 3)
    assert three.sum() > 100 and ((v[three] & wc.PACK16) != 0).all()


@pytest.mark.parametrize("name", ["roberta-base", "bert-base-uncased"])
def test_threads_share_one_tokenizer(docs, name):
    """Threads share the word cache and (bert) the normalizer's char map, both filled as they go, in
    large calls and in small ones."""
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    parts = [docs[i::6] for i in range(6)]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda p: tok.encode_ragged(p).to_list(), parts))
    ref = reference_tok(name)
    assert got == [[e.ids for e in ref.encode_batch(p)] for p in parts]
    # small calls, each one compiled step: rows that are not ASCII, each with a character the char map
    # has not learned (one thread learns it while the others' steps read the map)
    rows = [d[:300] + " café " + chr(0x1F300 + i) for i, d in enumerate(docs[:240])]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda r: (tok.encode_ragged([r]).to_list()[0], tok.encode(r).offsets), rows))
    assert got == [(e.ids, e.offsets) for e in ref.encode_batch(rows)]


def test_empty_rows_and_batches():
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    r = tok.encode_ragged(["", "a", "", " "])
    assert r.to_list() == [[], [64], [], [220]]
    assert np.array_equal(tok.encode_ragged([]).row_offsets, [0])


@pytest.mark.parametrize("name", ["gpt2", "roberta-base"])
def test_heap_and_cut_merges_give_the_linear_merges_ids(name):
    """The fast path merges byte-level words over LINEAR_BYTES cut where no merge joins two bytes
    (`merge_byte_long`), pieces over 32 bytes with a heap: the same ids as the linear scan on every
    word it could take, and as the heap on words of up to 200 bytes (random bytes, runs of one byte,
    pairs, CJK, Japanese with its long-vowel mark, emoji, accented Latin; a virtual space or none),
    and the reference's ids and offsets on rows of such words."""
    import numba
    from numbatok.models.bpe import SMALL, merge_byte_heap, merge_byte_long, merge_byte_word

    @numba.njit
    def differing(data, off, virt, byte_ids, byte_pairs, merges, n_ids):
        a, rv = np.empty(256, np.int32), np.empty(256, np.int64)
        b, c = np.empty(256, np.int32), np.empty(256, np.int32)
        cur, nxt, prv, heap = np.empty(256, np.int64), np.empty(256, np.int64), np.empty(256, np.int64), \
            np.empty(768, np.int64)
        bad = 0
        for i in range(off.shape[0] - 1):
            s, e = off[i], off[i + 1]
            kb = merge_byte_heap(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, b, cur, nxt, prv, heap)
            kc = merge_byte_long(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, c, cur, nxt, prv, heap)
            bad += kc != kb or not (c[:kc] == b[:kb]).all()
            if e - s + virt <= SMALL:
                ka = merge_byte_word(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, a, rv)
                bad += ka != kb or not (a[:ka] == b[:kb]).all()
        return bad

    rng = np.random.default_rng(3)
    japanese = "ーテストのデータ日本語文字列、。ァィゥヴ"
    words = []
    for n in rng.integers(1, 200, 2000):
        words += [bytes(rng.integers(0, 256, n, dtype=np.uint8)), b"a" * n, b"ab" * (n // 2 + 1),
                  "".join(chr(c) for c in rng.integers(0x4E00, 0x4E80, n // 3 + 1)).encode()[:200],
                  "".join(japanese[j] for j in rng.integers(0, len(japanese), n // 3 + 1)),
                  "".join(chr(c) for c in rng.integers(0x1F300, 0x1F650, n // 4 + 1)).encode(),
                  "".join("éaüßñ"[j] for j in rng.integers(0, 5, n // 2 + 1)).encode()]
    words = [w.encode() if isinstance(w, str) else w for w in words]
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    _, _, _, merges, byte_pairs, byte_ids, _, _, params = tok._model.arrays()
    data = np.frombuffer(b"".join(words), np.uint8)
    off = np.concatenate(([0], np.cumsum([len(w) for w in words]))).astype(np.int64)
    for virt in (0, 1):
        assert differing(data, off, virt, byte_ids, byte_pairs, merges, params[0]) == 0
    rows = [" ".join(w.decode("utf-8", "replace") for w in words[i:i + 8]) for i in range(0, 1400, 8)]
    want = reference_tok(name).encode_batch(rows, add_special_tokens=False)
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == [e.ids for e in want]
    for row, e in zip(rows[:60], want):  # (`encode`'s spans path: `word_tokens_cut`, spans from the ids)
        got = tok.encode(row, add_special_tokens=False)
        assert (got.ids, got.offsets) == (e.ids, e.offsets)


@pytest.mark.parametrize("name", ["gpt2", "roberta-base"])
def test_cut_marks_exactly_the_byte_pairs_no_merged_token_holds(name):
    """byte_pairs' CUT entries, where `merge_byte_long` cuts a word, against the merges read in
    Python: a pair is CUT exactly when no merge's result has those two bytes side by side."""
    from numbatok.models.bpe import CUT
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    tok_data, tok_offsets, _, _, byte_pairs, _, _, _, _ = tok._model.arrays()
    with open(vocab_path(name), encoding="utf-8") as f:
        model = json.load(f)["model"]
    joined = np.zeros(65536, bool)
    for m in model["merges"]:
        t = model["vocab"]["".join(m.split(" ") if isinstance(m, str) else m)]
        b = bytes(tok_data[tok_offsets[t]:tok_offsets[t + 1]])
        for x, y in zip(b, b[1:]):
            joined[x * 256 + y] = True
    assert np.array_equal(byte_pairs == CUT, ~joined)
    assert (byte_pairs[~joined] < 0).all() and 1000 < joined.sum() < 20000  # (gpt2: 2,689 pairs)


@pytest.mark.parametrize("threads", [1, 2, 16])
def test_chunk_plan_covers_every_row_once(threads):
    """The kernel trusts the plan: chunks of whole rows in order with room for their worst case,
    each wave's groups over consecutive chunks (at most one per thread), and a call under SMALL_CALL
    bytes in one wave."""
    from numbatok.backends.cpu import SMALL_CALL, plan_chunks
    rng = np.random.default_rng(threads)
    for n in (0, 1, 3, 40, 5000):
        for scale in (0, 30, 3000, 300_000):
            lens = rng.integers(0, scale + 1, n) * (rng.random(n) < 0.7)
            off = np.concatenate(([5], 5 + np.cumsum(lens))).astype(np.int64)
            prefix = bool(rng.integers(2))
            chunk_row, chunk_cap, group_chunk, wave_group, resume = plan_chunks(off, threads, prefix)
            assert chunk_row[0] == 0 and chunk_row[-1] == n and (np.diff(chunk_row) > 0).all()
            rows, nbytes = np.diff(chunk_row), np.diff(off[chunk_row])
            assert (np.diff(chunk_cap) >= nbytes * (2 if prefix else 1) + rows + 3).all()
            assert group_chunk[0] == 0 and group_chunk[-1] == len(chunk_row) - 1
            assert (np.diff(group_chunk) > 0).all() and (np.diff(wave_group) >= 0).all()
            assert wave_group[0] == 0 and wave_group[-1] == len(group_chunk) - 1
            assert (np.diff(wave_group) <= threads).all()
            if off[-1] - off[0] < SMALL_CALL:
                assert len(wave_group) == 2
            assert (resume[:, 0] == chunk_row[:-1]).all() and (resume[:, 1] == off[chunk_row[:-1]]).all()
            assert (resume[:, 2] == chunk_cap[:-1]).all() and (resume[:, 3] == chunk_cap[:-1]).all()


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased"])
def test_first_call_on_other_input_compiles_nothing(name):
    """After a large call and a small one (on all threads, and on the calling thread), inputs built
    another way (ASCII str, mixed scripts, bytes, all-ASCII or not) reuse the compiled kernels:
    nothing compiles in the middle of a job (a first pass over a new corpus once spent 4 s compiling
    a second specialization)."""
    import pickle
    from numbatok import batch as batch_module
    from numbatok.backends import cpu
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    # (U+1D15E decomposes to a mark that BERT keeps: its row takes the normalizer's passes, not the char map)
    for _ in range(2):  # (the second call finds its words cached, as a job's later batches do)
        for rows in (["Привет, 世界! naïve", "plain ascii", "", "long é " * 40_000, "\U0001D15E"],
                     ["Привет, 世界! naïve", "plain ascii", "", "\U0001D15E", "x" * 2000]):
            tok.encode_ragged(rows, add_special_tokens=False)
            tok.encode_batch(rows)
    tok.encode_batch(["plain ascii", "and more"])
    batch_module.from_lines(b"a line\nanother")
    kernels = [v for v in vars(cpu).values() if hasattr(v, "signatures")]
    before = {k: len(k.signatures) for k in kernels}
    # (a pickled copy, as multiprocessing and Ray hand it over: its tables come back writable)
    for t in (tok, pickle.loads(pickle.dumps(tok))):
        for batch in (["only ascii here", "and here"], ["ascii", "日本語"], [b"bytes in", b"\xc3\xa9"],
                      ["x" * 300_000], ["a \U0001D15E\u0301 b", "Ελληνικά"]):
            t.encode_ragged(batch, add_special_tokens=False)
            t.encode_batch(batch)
        t.encode_ragged(batch_module.from_lines(bytearray(b"from a writable\nbuffer")), add_special_tokens=False)
    assert {k: len(k.signatures) for k in kernels} == before


def test_import_does_not_load_numba():
    """`import numbatok` stays light: Numba (most of the start-up time) loads with the tokenizer."""
    code = "import sys, numbatok; assert 'numba' not in sys.modules and 'pyarrow' not in sys.modules; numbatok.Tokenizer"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_pickled_tokenizer_starts_with_an_empty_cache():
    import pickle
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    tok.encode_ragged(["some words to cache"])
    copy = pickle.loads(pickle.dumps(tok))
    assert len(copy._word_cache) == 0
    assert copy.encode_ragged(["some words to cache"]).to_list() == tok.encode_ragged(["some words to cache"]).to_list()


def test_tokenizer_pickled_after_its_normalizer_learned_characters():
    """A normalizer's character map refers back to the normalizer: pickled after a call that filled
    it (non-ASCII text through bert-base-uncased), the copy once failed to load."""
    import pickle
    tok = numbatok.Tokenizer.from_pretrained("bert-base-uncased", device="cpu")
    rows = ["Привет, naïve Ångström", "plain"]
    want = tok.encode_ragged(rows).to_list()
    assert tok._norm.char_map() is not None
    copy = pickle.loads(pickle.dumps(tok))
    assert want == [e.ids for e in reference_tok("bert-base-uncased").encode_batch(rows)]
    assert copy.encode_ragged(rows).to_list() == want


def test_submodules_load_on_attribute_access():
    code = "import numbatok; print(numbatok.tokenizer.resolve_path('gpt2')); numbatok.batch.Batch; numbatok.shipped_names()"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("name", ["gpt2", "roberta-base", "bert-base-uncased", "bert-base-cased", "o200k_base"])
def test_long_documents_cut_into_segments_give_the_same_ids(name, docs, monkeypatch):
    """A long row is cut where a non-space ASCII byte meets a space (so several threads share it);
    the ids must be those of the whole row, special tokens and every kind of whitespace included
    (BertNormalizer deletes vertical tabs and form feeds: no cut may fall there)."""
    import numba
    from numbatok.backends import cpu
    monkeypatch.setattr(numba, "get_num_threads", lambda: 4)  # segments even on a one-core runner
    calls = []
    real = cpu.segment_rows
    monkeypatch.setattr(cpu, "segment_rows", lambda *a: calls.append(1) or real(*a))
    long_docs = ["\n\n".join(docs[:3000]), "<|endoftext|> " * 9000 + "x", " \t\r\n\x0b\x0cword" * 40_000,
                 "".join(docs[-400:]), "short one"]
    # (a batch of its own: short enough that these rows are cut)
    controls = ["[MASK] [SEP]x\x0bY\x0c z \x00 \u0301é Ünï 東京 " * 4_000, "word\x0bword\x0cword" * 10_000,
                "a!\n" * 60_000 + "x, y\r\n" * 30_000]  # (cl100k, o200k: "!\n" and ",\r\n" are one match each)
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    for batch in (long_docs, controls):
        calls.clear()
        assert tok.encode_ragged(batch).to_list() == [e.ids for e in reference_tok(name).encode_batch(batch)]
        assert calls  # the segmented path ran


@pytest.mark.parametrize("name", ["gpt2", "roberta-base"])
def test_rows_with_a_token_first_byte_but_no_token(name):
    """A row holding '<' but no whole added token takes the fused scan; one that holds a token (at
    its start, middle or end, or two in a row) is split around it first: both as the reference."""
    rows = ["a <b> c", "<|endoftext|", "x <|endoftext", "<|endoftext|>", "x<|endoftext|>", "<|endoftext|>y",
            "1 < 2 and <s> or </s><mask>", "<|endoftext|><|endoftext|> z", "<" * 50, "no angle at all <"]
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    ref = reference_tok(name)
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == [
        e.ids for e in ref.encode_batch(rows, add_special_tokens=False)]


def test_letter_runs_next_to_every_kind_of_byte():
    """The fused scanner reads a letter run 8 bytes at a time: runs of 1 to 20 letters, with or
    without their space, ending at the row's end or before the bytes around the letter ranges
    ('@', '[', '`', '{'), digits, an apostrophe, whitespace and multi-byte letters."""
    rows = []
    for n in range(1, 21):
        word = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[n:2 * n + 1][:n] or "Q" * n
        for after in ["", "@", "[", "`", "{", "0", "'", " ", "\n", "é", "\u4e00", "Z" * 3 + "ï", "\x7f", "_"]:
            rows += [word + after, " " + word + after + " tail", "x" * (n % 3) + " " + word + after]
    # a letter run that goes on in a multi-byte letter is one word (" café" is one token, " caf" + "é" two)
    rows += [" café and more", "a naïve one here", " André is here", " Müller und so", " Français aussi"]
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == [
        e.ids for e in reference_tok("gpt2").encode_batch(rows, add_special_tokens=False)]


def test_segments_cut_only_at_safe_boundaries():
    from numbatok.backends.cpu import segment_rows
    text = b"ab cd\te\n\nf  g" * 10_000
    data = np.frombuffer(text, np.uint8)
    pieces, orig = segment_rows(data, np.array([0, len(text)], np.int64), 1000, False)
    assert orig.tolist() == [0, len(pieces) - 1] and len(pieces) > 50
    for p in pieces[1:-1]:
        assert text[p - 1:p] not in b" \t\n\r\x0b\x0c" and text[p:p + 1] in b" \t\n\r\x0b\x0c"
    # the cl100k and o200k patterns: "!\n" is one match, so no CR or LF after a symbol
    text = b"ab!\ncd,\r\nef \n" * 10_000
    pieces, _ = segment_rows(np.frombuffer(text, np.uint8), np.array([0, len(text)], np.int64), 1000, True)
    assert len(pieces) > 50
    for p in pieces[1:-1]:
        assert text[p:p + 1] == b" " or (text[p:p + 1] in b"\r\n" and text[p - 1:p].isalnum())


def test_a_normalizer_that_is_not_per_character_keeps_rows_whole(monkeypatch):
    """Prepend adds its text at the start of every row: a row cut into segments would get it once per
    segment, so such a tokenizer is never cut (the ids stay the reference's)."""
    import numba
    from numbatok.backends import cpu
    monkeypatch.setattr(numba, "get_num_threads", lambda: 4)
    spec = json.load(open(vocab_path("bert-base-uncased"), encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence",
                          "normalizers": [spec["normalizer"], {"type": "Prepend", "prepend": "xyz "}]}
    text = json.dumps(spec)
    tok = numbatok.Tokenizer.from_str(text, device="cpu")
    doc = ["tokens in a long row, " * 30_000]
    assert tok.encode_ragged(doc).to_list() == [Tokenizer.from_str(text).encode_batch(doc)[0].ids]
    assert not cpu._segmentable(tok) and cpu._segmentable(numbatok.Tokenizer.from_pretrained("bert-base-uncased"))


def _cached_words(cache):
    """A WordCache's words -> ids, after checking that a probe from each word's first slot finds it."""
    from numbatok.kernels import word_cache as wc
    rec, idata, kdata = cache.rec, cache.idata, cache.kdata
    words = {}
    for i in np.flatnonzero(rec[:, 0]).tolist():
        k0, k1, v = int(rec[i, 1]), int(rec[i, 2]), int(rec[i, 3])
        m, k = v & 255, (v >> 8) & 127
        if v & int(wc.INLINE) and v & int(wc.PACK16):
            k &= 63
            ids = [(v >> 16) & 0xFFFF, (v >> 32) & 0xFFFF, v >> 48][:k]
        elif v & int(wc.INLINE):
            ids = [(v >> 16) & int(wc.ID_MASK), v >> 40][:k]
        else:
            ids = idata[v >> 16:(v >> 16) + k].tolist()
        if m > wc.KEY_BYTES:
            key, found = bytes(kdata[k0:k0 + m]), wc.probe_long(rec, rec[i, 0], m, kdata, k0, 0, kdata)
        else:
            key, found = (k0, k1, m), wc.probe(rec, rec[i, 0], rec[i, 1], rec[i, 2], m)
        assert found == i
        words[key] = ids
    return words


def _many_new_words():
    """2,000 rows of 50 words drawn from 30,000 random ones (a fifth of them long keys), and their ids."""
    rng = np.random.default_rng(3)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzäöü日本"))
    words = ["".join(letters[rng.integers(0, len(letters), n)]) for n in rng.integers(1, 40, 30_000)]
    rows = [" ".join(words[i] for i in pick) for pick in rng.integers(0, len(words), (2_000, 50))]
    return rows, [e.ids for e in reference_tok("gpt2").encode_batch(rows, add_special_tokens=False)]


def _caches_on_two_and_one_threads(monkeypatch, setup):
    """The cached words (`_cached_words`) after two calls on `_many_new_words`' rows, both exact, on two
    threads and then on one, `setup(threads)` patching before each; on two threads first."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread only")
    rows, want = _many_new_words()
    caches = {}
    old = numba.get_num_threads()
    try:
        for threads in (2, 1):
            numba.set_num_threads(threads)
            setup(threads)
            tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
            assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
            assert tok.encode_ragged(rows[::-1], add_special_tokens=False).to_list() == want[::-1]
            caches[threads] = _cached_words(tok._word_cache)
            assert len(caches[threads]) == len(tok._word_cache)  # (each word once, one that two threads found too)
    finally:
        numba.set_num_threads(old)
    assert len(caches[2]) > 10_000
    return caches


def test_words_added_inside_the_loops_are_the_same_on_two_threads_and_one(monkeypatch):
    """Both loops add new words to the shared table as they find them, from every thread at once
    (`insert_word`): exact encodings, and the same words with the same ids from `scan_rest` on two
    threads as from the fused loop on one (every word found from its first slot), while the table
    fills past half and grows between waves."""
    import numba
    from numbatok.backends import cpu
    runs = []
    spy = cpu.scan_rest
    monkeypatch.setattr(cpu, "scan_rest", lambda *a: runs.append(numba.get_num_threads()) or spy(*a))
    caches = _caches_on_two_and_one_threads(monkeypatch, lambda threads: monkeypatch.setattr(cpu, "SCAN_REST", threads == 2))
    # (the first call's three waves, then those of the second that `cached_prefix` did not finish)
    assert len(runs) >= 3 and set(runs) == {2}
    assert caches[2] == caches[1]


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_missing_words_wait_and_are_filled_in_together(name, monkeypatch):
    """`scan_rest` leaves each missing word room for an id a byte and fills the rooms once MISSES
    wait, ROWS rows hold them, an added token's row comes or the chunk ends (`fill_misses`): a word
    met twice among them (its second room filled from the first), words that merge side by side
    (up to LINEAR_BYTES), longer ones alone, one longer than the scratch in between (written at once),
    empty rows, and rows of one miss each past ROWS: the reference's ids, cold and warm."""
    from numbatok.backends import cpu
    rng = np.random.default_rng(11)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzéß"))

    def word(lo, hi):
        return "".join(rng.choice(letters, rng.integers(lo, hi)))

    special = "<|endoftext|>"
    twice = [word(4, 9) for _ in range(cpu.MISSES)]
    rows = [" ".join(twice + twice[::-1] + [word(3, 14) for _ in range(3 * cpu.MISSES)])]  # (more than MISSES)
    rows += [f"the {word(5, 12)} and" for _ in range(2 * cpu.ROWS)] + ["", "", " ".join(["the"] * 40)]
    rows += [" ".join([word(17, 40), word(3, 8), "q" * (cpu.SCRATCH + 100), word(3, 8)]) for _ in range(8)]
    rows += [f"{word(3, 8)} {word(3, 8)}", f"x {special} {word(3, 8)}", word(3, 8)]
    rows = rows * 3  # (chunks of the same rows: the later ones find the words, or run them)
    runs = []
    spy = cpu.scan_rest
    monkeypatch.setattr(cpu, "scan_rest", lambda *a: runs.append(1) or spy(*a))
    monkeypatch.setattr(cpu, "SERIAL_CALL", 0)
    monkeypatch.setattr(cpu, "SPLIT_MAX", 0)
    ref = reference_tok(name)
    want = [e.ids for e in ref.encode_batch(rows, add_special_tokens=False)]
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    for _ in range(2):
        assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
    assert runs


def test_words_merged_side_by_side_match_one_at_a_time():
    """`merge_byte_words` (several words' merges interleaved, their table slots prefetched) gives each
    word the ids `merge_byte_word` gives it alone, for words of 1 to GROUP_ROOM bytes in groups of
    every size up to 32, with the compact (gpt2) and the full (o200k_base) merge table."""
    from numbatok._numba import cpu_kernel
    from numbatok.models.bpe import GROUP_ROOM, merge_byte_word, merge_byte_words

    @cpu_kernel
    def both(text, ws, wm, g, byte_ids, byte_pairs, merges, n_ids):
        mflat = merges.reshape(merges.size)
        sel = np.arange(ws.shape[0])
        ids, counts = np.empty(ws.shape[0] * GROUP_ROOM, np.int32), np.empty(ws.shape[0], np.int64)
        rv, pend = np.empty(ws.shape[0] * GROUP_ROOM, np.int64), np.empty(ws.shape[0], np.int64)
        one, one_rv = np.empty(GROUP_ROOM, np.int32), np.empty(GROUP_ROOM, np.int64)
        bad = 0
        for lo in range(0, ws.shape[0], g):
            n = min(g, ws.shape[0] - lo)
            merge_byte_words(text, ws, wm, sel[lo:], n, byte_ids, byte_pairs, merges, mflat, n_ids, ids, rv,
                             counts, pend)
            for j in range(n):
                k = merge_byte_word(text, ws[lo + j], ws[lo + j] + wm[lo + j], 0, byte_ids, byte_pairs, merges,
                                    n_ids, one, one_rv, 0)
                if k != counts[j] or not (ids[j * GROUP_ROOM:j * GROUP_ROOM + k] == one[:k]).all():
                    bad += 1
        return bad

    rng = np.random.default_rng(3)
    pieces = [" the", "ing", "tion", " qu", "é", "日本", "ab", "zz", " ", "\n", "'s", "123"]
    words = {"".join(rng.choice(pieces, rng.integers(1, 6))).encode()[:GROUP_ROOM] for _ in range(4000)}
    words = sorted(words | {bytes([b]) for b in range(256)})
    text = np.frombuffer(b"".join(words), np.uint8)
    wm = np.array([len(w) for w in words], np.int64)
    ws = np.cumsum(wm) - wm
    for name in ("gpt2", "o200k_base"):
        m = numbatok.Tokenizer.from_pretrained(name, device="cpu")._model
        assert m.merges.shape[1] == (4 if name == "gpt2" else 2)
        for g in (1, 7, 32):
            assert both(text, ws, wm, g, m.byte_ids, m.byte_pairs, m.merges, m.params[0]) == 0


def test_threads_adding_the_same_words_at_once_add_each_once():
    """Every thread adds the same words in the same order, so most inserts race another for the
    same word: each word is in the table once (an adder that meets a slot still being written waits
    for it, since it may hold its own word), with its ids."""
    import numba
    from numbatok._numba import cpu_kernel, prange
    from numbatok.kernels import word_cache as wc
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread only")

    @cpu_kernel(parallel=True)
    def add_all(text, starts, rec, idata, kdata, state, lim, rounds):
        rec_flat = rec.reshape(rec.shape[0] * 4)
        for _t in prange(rounds):
            out = np.empty(2, np.int32)
            for i in range(starts.shape[0] - 1):
                s, e = starts[i], starts[i + 1]
                h, k0, k1 = wc.pack_key(text, s, e, 0)
                out[0], out[1] = i, i + 1
                wc.insert_word(rec, rec_flat, h, k0, k1, e - s, s, 0, out, 0, 2, idata, kdata, text, state, lim)

    rng = np.random.default_rng(5)
    words = sorted({bytes(rng.integers(97, 123, rng.integers(3, 12)).astype(np.uint8)) for _ in range(40_000)})
    text = np.frombuffer(b"".join(words), np.uint8)
    starts = np.zeros(len(words) + 1, np.int64)
    np.cumsum([len(w) for w in words], out=starts[1:])
    for _ in range(3):
        cache = WordCache()
        rec, idata, kdata, state, lim = cache.open_inserts(len(words), 2 * len(words), 0)
        add_all(text, starts, rec, idata, kdata, state, lim, numba.get_num_threads())
        cache.close_inserts(lim)
        got = _cached_words(cache)
        assert len(cache) == len(got) == len(words)
        assert sorted(got.values()) == [[i, i + 1] for i in range(len(words))]


def test_a_table_grown_on_every_thread_holds_what_one_thread_makes(monkeypatch):
    """A grown shared table is rehashed on every thread, each moving its own range of slots: the
    same words with the same ids as the one-thread rehash, every word found from its first slot, and
    the encodings exact."""
    from numbatok.kernels import word_cache as wc
    calls = []
    spy = wc._rehash_parts
    monkeypatch.setattr(wc, "_rehash_parts", lambda *a: calls.append(1) or spy(*a))
    caches = _caches_on_two_and_one_threads(
        monkeypatch, lambda threads: monkeypatch.setattr(wc, "PARALLEL_REHASH", 256 if threads == 2 else 1 << 40))
    assert calls  # (all of them from the two-thread round)
    assert caches[2] == caches[1]


def test_word_starts_give_the_scanners_words():
    """`next_start` (pre-token starts from 64-byte bit masks) against `match_end` on ASCII without
    apostrophes, the text it judges alone: runs of every class and of mixed whitespace, across block
    edges and at piece ends."""
    from numbatok._numba import cpu_kernel
    from numbatok.pre_tokenizers.byte_level import match_end
    from numbatok.pre_tokenizers.patterns import next_start

    @cpu_kernel
    def both(data, offsets, classes, out):
        bad = 0
        for r in range(offsets.shape[0] - 1):
            a, b = offsets[r], offsets[r + 1]
            p, q, st = a, a - 128, np.uint64(0)
            while p < b:
                e, q, st = next_start(data, p, a, b, q, st, 0)
                if e != match_end(data, p, a, b, 0, classes):
                    bad += 1
                    out[r] = p
                    break
                p = e
        return bad

    rng = np.random.default_rng(7)
    pieces = [" ", "  ", "\n", "\n\n", " \n", "\t", "\r\n", "\x0b\x0c", "a", "Zq", "word", "x" * 70, "0", "42",
              "1" * 65, ".", ",-", "!" * 66, "_", "\x00", "\x7f", "@[`{", " a", " 1", " .", "\x1c\x1f"]
    rows = ["".join(rng.choice(pieces, rng.integers(0, 60))) for _ in range(3000)]
    rows += [" " * n + "a" + " " * m for n in range(0, 130, 7) for m in range(0, 70, 3)]
    data = np.frombuffer("".join(rows).encode(), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(r.encode()) for r in rows])]).astype(np.int64)
    tok = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu")
    out = np.full(len(rows), -1, np.int64)
    assert both(data, offsets, tok._classes, out) == 0, [(r, rows[r]) for r in np.flatnonzero(out >= 0)[:3]]


@pytest.mark.parametrize("name", ["gpt2", "roberta-base", "o200k_base"])
def test_a_warm_call_is_the_cached_words_loop(name, docs, monkeypatch):
    """A second call on the same rows finds every word in the cache: `cached_prefix` does every chunk
    (the fused loop is left nothing), with the ids of the reference. Rows around its 64-byte blocks:
    apostrophes, multi-byte characters and whitespace runs at and near every block edge."""
    from numbatok.backends import cpu

    rng = np.random.default_rng(3)
    pieces = [" the", " and", "'s", "'ll", " '", "''", "é", " naïve", "日本", "\xa0", "\u3000", "\n", "\n\n", "  ",
              " \n", "\r\n", "\t", "123", " 4", ".", "...", " ,", "x" * 17, " " + "y" * 40, "\U0001F44D", "\x85"]
    rows = ["".join(rng.choice(pieces, rng.integers(0, 40))) for _ in range(2000)]
    rows += ["a" * n + " " + "'" * k + "b" for n in range(55, 70) for k in range(3)]
    rows += docs[:200]
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    want = [e.ids for e in reference_tok(name).encode_batch(rows, add_special_tokens=False)]
    for _ in range(2):  # (a first call caches up to its group tables' room; the second, the rest)
        assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
    left = []
    fused = cpu.encode_ids_chunks

    def spy(*args):
        chunk_row, resume = args[9], args[-1]
        left.append(int((resume[:, 0] < chunk_row[1:]).sum()))
        return fused(*args)

    prefix = []
    cached_prefix = cpu.cached_prefix
    monkeypatch.setattr(cpu, "encode_ids_chunks", spy)
    monkeypatch.setattr(cpu, "cached_prefix", lambda *a: prefix.append(1) or cached_prefix(*a))
    assert tok.encode_ragged(rows, add_special_tokens=False).to_list() == want
    assert prefix and not any(left)  # (the fused loop launched with no row left, or, after `scan_rest`, not at all)


def test_one_byte_classes_agree_with_the_vector_masks():
    """`word_starts` classifies a block's neighbours and the buffer's last bytes one at a time: the
    same classes as `ascii_masks` gives the 64-byte blocks, for every byte value."""
    from numbatok._numba import ascii_masks, cpu_kernel
    from numbatok.pre_tokenizers.byte_level import _byte_classes

    @cpu_kernel
    def disagreements(data):
        bad = 0
        for q in range(0, data.shape[0] - 64 + 1, 64):
            masks = ascii_masks(data, q)
            for i in range(64):
                one = _byte_classes(data[q + i])
                for k in range(6):
                    bad += ((masks[k] >> np.uint64(i)) & np.uint64(1)) != one[k]
        return bad

    assert disagreements(np.arange(256, dtype=np.uint8)) == 0


def test_fetch_add_hands_out_every_item_once():
    """The counter the CPU loops take chunks from: every thread adding to it at once, each value is
    handed out exactly once (a plain read-add-write would hand some out twice)."""
    from numbatok._numba import cpu_kernel, fetch_add, prange

    @cpu_kernel(parallel=True)
    def take(n, claim, got):
        for _ in prange(4):
            while True:
                i = fetch_add(claim, 0, 1)
                if i >= n:
                    break
                got[i] += 1

    n = 200_000
    got = np.zeros(n, np.int64)
    take(n, np.zeros(1, np.int64), got)
    assert (got == 1).all()


def test_word_keys_from_word_loads_equal_the_byte_loop():
    """`pack_key` reads 8 bytes at a time where 16 bytes lie ahead and a byte at a time near the
    buffer's end: the same key either way, for words of 1 to 16 key bytes, with and without their
    virtual space, at every position of a buffer (the last ones take the byte loop)."""
    from numbatok._numba import cpu_kernel
    from numbatok.kernels.word_cache import pack_key

    @cpu_kernel
    def disagreements(data):
        bad = 0
        for s in range(data.shape[0]):
            for virt in range(2):
                for m in range(1, 17):
                    e = s + m - virt
                    if e > data.shape[0]:
                        continue
                    h, k0, k1 = pack_key(data, s, e, virt)
                    near_end = data[:s + 15]  # (fewer than 16 bytes from s on: the byte loop)
                    if e <= near_end.shape[0]:
                        h2, j0, j1 = pack_key(near_end, s, e, virt)
                        bad += h != h2 or k0 != j0 or k1 != j1
        return bad

    data = np.random.default_rng(0).integers(0, 256, 300).astype(np.uint8)
    assert disagreements(data) == 0


@pytest.mark.parametrize("name", ["gpt2", "roberta-base"])
def test_small_encode_takes_its_offsets_from_the_word_cache(name, docs, monkeypatch):
    """A byte-level tokenizer's `encode` and small `encode_batch` take their ids from the word cache
    (adding the words it lacks) and their offsets from one walk over the words, never the spans path
    that runs the model on every word: the reference's ids, offsets, tokens and word ids, cold, warm,
    and while another call holds the cache's writer (the words then stay uncached)."""
    from numbatok.backends import cpu
    rng = np.random.default_rng(11)
    special = {"gpt2": "<|endoftext|>", "roberta-base": "<mask>"}[name]
    pieces = [" the", " and", "'s", "'ll", " naïve", "日本語", "\xa0", "\n\n", "  ", "\t", "123", ".", " ,", special,
              " " + special, "x" * 300, "\U0001F44D", "e\u0301", "İ", " Ωμέγα"]
    rows = ["".join(rng.choice(pieces, rng.integers(0, 12))) for _ in range(200)] + ["", "y" * 1500]
    rows += [d for d in docs[:400] if len(d.encode()) < cpu.SERIAL_CALL][:40]
    calls = [rows[i:i + k] for i, k in zip(range(0, len(rows), 3), rng.integers(1, 4, len(rows)))]
    ref = reference_tok(name)

    def fields(encodings):
        return [(e.ids, e.offsets, e.tokens, e.word_ids) for e in encodings]

    want = [fields(ref.encode_batch(c)) for c in calls]
    monkeypatch.setattr(cpu, "spans_serial", None)  # (the spans path proper would fail)
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    busy = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    assert busy._word_cache.writer.acquire(blocking=False)  # (as another call adding words would)
    for t in (tok, tok, busy):  # cold, warm, and with no room to add words
        assert [fields(t.encode_batch(c)) for c in calls] == want
        assert [fields([t.encode(r)]) for r in rows[:60]] == [fields([ref.encode(r)]) for r in rows[:60]]
    assert len(tok._word_cache) > 100 and len(busy._word_cache) == 0
    busy._word_cache.writer.release()


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-cased"])
def test_small_wordpiece_encode_takes_its_offsets_from_the_word_cache(name, docs, monkeypatch):
    """A WordPiece tokenizer's small calls of WORDPIECE_FROM_IDS bytes and more take their ids from the
    word cache and their offsets from one walk over the normalized words, never the spans path that
    runs the model on every word: the reference's fields, cold, warm, and while another call holds
    the cache's writer. Rows that are not ASCII are normalized by the char map in the same compiled
    step; only a call with a character the map has not learned yet (the map itself is made by the
    first such call) takes the general path, which learns it."""
    from numbatok.backends import cpu
    rng = np.random.default_rng(12)
    pieces = [" the", " AND", "'s", "don't", " naive", "\n\n", "  ", "\t", "123", ".", " ,", "[SEP]", " [MASK] ",
              "x" * 300, "Hello", "e.g.", " co-op", "\x07", " Zürich", " ΣΊΣΥΦΟΣ", "日本語", "\xa0", "e\u0301",
              "İ", " \U0001F44D"]
    paras = [d for d in docs[:400] if 200 < len(d.encode()) < cpu.SERIAL_CALL // 4][:30]
    calls = [[p] + ["".join(rng.choice(pieces, rng.integers(0, 12))) for _ in range(rng.integers(0, 3))]
             for p in paras]
    calls += [["".join(rng.choice(pieces, 40))] for _ in range(20)]
    ref = reference_tok(name)

    def fields(encodings):
        return [(e.ids, e.offsets, e.tokens, e.word_ids) for e in encodings]

    want = [fields(ref.encode_batch(c)) for c in calls]
    assert sum(all(r.isascii() for r in c) for c in calls) < len(calls) // 2
    spans_mapped, general, taken = cpu.spans_mapped_serial, cpu.encode, []
    monkeypatch.setattr(cpu, "spans_mapped_serial", lambda *a: taken.append("model") or spans_mapped(*a))
    monkeypatch.setattr(cpu, "encode", lambda *a: taken.append("general") or general(*a))
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    busy = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    assert busy._word_cache.writer.acquire(blocking=False)  # (as another call adding words would)
    for t, cold in ((tok, True), (tok, False), (busy, True)):  # cold, warm, and with no room to add words
        taken.clear()
        assert [fields(t.encode_batch(c)) for c in calls] == want
        assert [fields([t.encode(c[0])]) for c in calls] == [w[:1] for w in want]
        # (cold: the first call with a row that is not ASCII makes the char map, the first with the
        # emoji learns it; after that no call takes the general path, and the walk never disagrees)
        assert taken == ["general"] * len(taken) and (1 <= len(taken) <= 2 if cold else not taken)
    assert len(tok._word_cache) > 100 and len(busy._word_cache) == 0
    busy._word_cache.writer.release()


@pytest.mark.parametrize("name", SHIPPED)
def test_small_calls_on_the_calling_thread_give_the_threaded_ids(name, docs, monkeypatch):
    """A small ids call (`serial_ids_call`) runs `serial_ids` (the same loops compiled without threads; after
    the normalizer's ASCII map in the same step where it applies) and adds its new words to the same
    cache: the reference's ids, cold and warm, and the same ids and cache as the threaded path on
    every row. Rows with added tokens (the fused loop after `scan_rest`), long words (scratch of
    their own), empty rows, and calls at the limit's edge; and with the template's tokens."""
    from numbatok.backends import cpu
    rng = np.random.default_rng(5)
    special = {"gpt2": "<|endoftext|>", "roberta-base": "<mask>"}.get(name, "[SEP]")
    pieces = [" the", " and", "'s", " naïve", "日本", "\xa0", "\n\n", "  ", "\t", "123", ".", " ,", special,
              " " + special, "x" * 300, "\U0001F44D", "e\u0301", "İ"]
    rows = ["".join(rng.choice(pieces, rng.integers(0, 12))) for _ in range(400)]
    rows += ["", "y" * 1500, docs[0]] + docs[1:60]
    cut = [0]
    while cut[-1] < len(rows):  # calls of 1 to 9 rows, and two at the limit's edge
        cut.append(cut[-1] + int(rng.integers(1, 10)))
    calls = [rows[a:b] for a, b in zip(cut[:-1], cut[1:])]
    limit = int(cpu.IDS_SERIAL_SCALE * cpu.SERIAL_CALL)  # (`serial_ids_call`'s)
    edge = [r for r in docs if 200 < len(r.encode()) < 2000][:40]
    while len("".join(edge).encode()) >= limit:
        edge.pop()
    calls += [edge, edge + ["z" * (limit - len("".join(edge).encode()))]]
    ref = reference_tok(name)
    want = [[e.ids for e in ref.encode_batch(c, add_special_tokens=False)] for c in calls]
    seen, fused = [], []  # (fused: whether the normalizer's one step took the call, or handed it back)
    serial, mapped_serial = cpu.serial_ids, cpu.mapped_serial_ids

    def mapped_step(*a):
        got = mapped_serial(*a)
        if a[-1] == 1:  # (on the calling thread: on two, the call at the limit is split over both)
            fused.append(got[1].shape[0] > 0)
        return got

    # (compiled first: `mapped_serial_ids` calls `serial_ids`, which a compilation under the patch
    # would find to be the Python wrapper below)
    numbatok.Tokenizer.from_pretrained(name, device="cpu").encode_ragged(["compile"], add_special_tokens=False)
    monkeypatch.setattr(cpu, "serial_ids", lambda *a: seen.append(1) or serial(*a))
    monkeypatch.setattr(cpu, "mapped_serial_ids", mapped_step)
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    small = len(calls) - 1  # (every call but the one at the limit)
    for cold in (True, False):
        seen.clear()
        fused.clear()
        assert [tok.encode_ragged(c, add_special_tokens=False).to_list() for c in calls] == want
        assert len(seen) + sum(fused) == small
        if tok._norm is None:
            assert not fused
        else:  # (every small call tried the one step; cold, the first with a row that is not ASCII fell
            # back, making the char map, and the first with the emoji, learning it; warm, none did)
            assert len(fused) == small and (0 < small - sum(fused) <= 2 if cold else sum(fused) == small)
    monkeypatch.setattr(cpu, "SERIAL_CALL", 0)
    monkeypatch.setattr(cpu, "SPLIT_MAX", 0)
    threaded = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    assert [threaded.encode_ragged(c, add_special_tokens=False).to_list() for c in calls] == want
    assert len(seen) + sum(fused) == small  # (no more small calls)
    assert _cached_words(tok._word_cache) == _cached_words(threaded._word_cache)
    # with the template's tokens, which the small step writes itself (bert's [CLS] and [SEP],
    # roberta-base's <s> and </s>): `encode_ragged` and `tok(text)`
    monkeypatch.undo()
    want = [[e.ids for e in ref.encode_batch(c)] for c in calls]
    assert [tok.encode_ragged(c).to_list() for c in calls] == want
    assert [tok(c[0])["input_ids"] for c in calls] == [w[0] for w in want]


@pytest.mark.parametrize("name", ["gpt2", "roberta-base", "bert-base-uncased"])
def test_calls_split_over_two_threads_give_the_threaded_ids(name, docs, monkeypatch):
    """An ids call between the serial limit and SPLIT_MAX on two threads runs `split_ids` (its rows in
    two chunks, one a thread, new words added by both; bert's rows normalized first, in the same step
    while its maps know every character): the reference's ids, cold and warm, and the same ids and
    cache as the threaded path. Calls of even and uneven halves, added tokens, long words, one row
    much longer than the rest, and at both edges."""
    import numba
    from numbatok.backends import cpu
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread")
    saved = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        rng = np.random.default_rng(11)
        special = {"gpt2": "<|endoftext|>", "roberta-base": "<mask>"}.get(name, "[SEP]")
        pieces = [" the", " and", "'s", " naïve", "日本", "\xa0", "\n\n", "  ", "123", ".", special, "x" * 300,
                  "\U0001F44D", "e\u0301"]
        limit = int(cpu.IDS_SERIAL_SCALE * cpu.SERIAL_CALL)
        paras = [d for d in docs if 200 < len(d.encode()) < 3000]
        calls = []
        for size in (limit - 1, limit, 2 * limit, cpu.SPLIT_MAX - 1):  # (the first under the serial limit)
            rows, n = [], 0
            while n < size:
                r = paras[int(rng.integers(len(paras)))] if rng.random() < 0.7 else \
                    "".join(rng.choice(pieces, rng.integers(1, 40)))
                r = r.encode()[:size - n].decode(errors="ignore") or "z"
                rows.append(r)
                n += len(r.encode())
            calls.append(rows)
        calls.append(["w" * (limit + 10)] + ["a b"])  # (one row nearly all of it: one chunk does the work)
        ref = reference_tok(name)
        want = [[e.ids for e in ref.encode_batch(c, add_special_tokens=False)] for c in calls]
        split, mapped = cpu.split_ids, cpu.mapped_serial_ids
        ran = []  # (the parts of each split call: from Python, or from bert's one step where it took the call)

        def mapped_step(*a):
            got = mapped(*a)
            if got[1].shape[0] and a[-1] > 1:
                ran.append(a[-1])
            return got

        # (compiled first: `mapped_serial_ids` calls `split_ids`, which a compilation under the patch
        # would find to be the Python wrapper below)
        numbatok.Tokenizer.from_pretrained(name, device="cpu").encode_ragged(calls[0], add_special_tokens=False)
        monkeypatch.setattr(cpu, "split_ids", lambda *a: ran.append(a[-1]) or split(*a))
        monkeypatch.setattr(cpu, "mapped_serial_ids", mapped_step)
        tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
        for _ in ("cold", "warm"):
            ran.clear()
            assert [tok.encode_ragged(c, add_special_tokens=False).to_list() for c in calls] == want
            assert ran == [2] * (len(calls) - 1)
        monkeypatch.setattr(cpu, "SPLIT_MAX", 0)
        threaded = numbatok.Tokenizer.from_pretrained(name, device="cpu")
        assert [threaded.encode_ragged(c, add_special_tokens=False).to_list() for c in calls] == want
        assert _cached_words(tok._word_cache) == _cached_words(threaded._word_cache)
        monkeypatch.undo()
        assert [tok.encode_ragged(c).to_list() for c in calls] == \
            [[e.ids for e in ref.encode_batch(c)] for c in calls]
    finally:
        numba.set_num_threads(saved)


@pytest.mark.parametrize("name", SHIPPED)
def test_small_calls_with_offsets_give_the_threaded_encodings(name, docs, monkeypatch):
    """`encode_batch` under SERIAL_CALL bytes runs the spans path's kernels on the calling thread (their
    twins, the distinct words' model in one step): the reference's ids, offsets, tokens and word ids,
    and what the threaded kernels give."""
    from numbatok.backends import cpu
    rng = np.random.default_rng(11)
    special = {"gpt2": "<|endoftext|>", "roberta-base": "<mask>"}.get(name, "[SEP]")
    pieces = [" the", "'s", " naïve", "日本", "\xa0", "\n\n", "  ", "12", ".", special, " " + special, "x" * 90,
              "e\u0301", "İ", "ﬁ", "Ⅻ"]
    calls = [["".join(rng.choice(pieces, rng.integers(0, 10))) for _ in range(rng.integers(1, 6))]
             for _ in range(60)] + [docs[:3], [""]]
    ref = reference_tok(name)

    def fields(encs):
        return [(e.ids, e.offsets, e.tokens, e.word_ids) for e in encs]

    want = [fields(ref.encode_batch(c)) for c in calls]
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    assert [fields(tok.encode_batch(c)) for c in calls] == want
    monkeypatch.setattr(cpu, "SERIAL_CALL", 0)
    assert [fields(tok.encode_batch(c)) for c in calls] == want
