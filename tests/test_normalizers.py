"""Normalizers against the reference.

Tables: every code point through each normalizer (ours, one row per character, against the
reference on the same characters), canonical ordering of every mark against a mark of every class,
and every composition pair. Whole tokenizers: ids, tokens, offsets into the original text and word
ids with each normalizer and Sequences of them, on generated text rich in combining marks, Hangul,
compatibility characters, case mappings, controls and whitespace, with added tokens of both kinds;
the shipped BERT tokenizers and gpt2 on a corpus sample; the CUDA launch path under the simulator.
The byte-per-token model makes every normalized character's alignment visible in the offsets.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbatok
from numbatok import unicode_tables
from numbatok.added_tokens import AddedTable
from numbatok.backends import cpu
from numbatok.batch import to_batch
from numbatok.errors import UnsupportedComponentError
from numbatok.normalizers import parse, unicode_data
from conftest import ROOT, assert_same_encodings, corpus_docs, vocab_path

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from tokenizers import normalizers as N  # noqa: E402


# ---- every code point ----

def _ours(ref_normalizer, strings, b=None):
    """Our normalizer (parsed from the reference's own JSON) over one row per string: (all output
    bytes, output byte length of each row)."""
    norm = parse(json.loads(ref_normalizer.__getstate__()))
    b = b or to_batch(strings)
    text, pb, _, row_piece, _, _ = cpu.normalize_rows(norm, b.data, b.offsets, AddedTable([]).arrays(),
                                                      unicode_tables.load())
    return text.tobytes(), np.diff(pb[row_piece])


def _theirs(ref_normalizer, strings, sep):
    outs = ref_normalizer.normalize_str(sep.join(strings)).split(sep)
    assert len(outs) == len(strings)
    enc = [o.encode() for o in outs]
    return b"".join(enc), np.array([len(e) for e in enc])


def _assert_rows_equal(ref_normalizer, strings, sep, b=None):
    mine, mine_lens = _ours(ref_normalizer, strings, b)
    theirs, their_lens = _theirs(ref_normalizer, strings, sep)
    if mine != theirs or not np.array_equal(mine_lens, their_lens):
        ends = np.cumsum(mine_lens), np.cumsum(their_lens)
        bad = [i for i in range(len(strings)) if mine_lens[i] != their_lens[i]
               or mine[ends[0][i] - mine_lens[i]:ends[0][i]] != theirs[ends[1][i] - their_lens[i]:ends[1][i]]]
        raise AssertionError(f"{ref_normalizer!r}: {len(bad)} inputs differ, first "
                             f"{[' '.join(f'U+{ord(c):04X}' for c in strings[i]) for i in bad[:5]]}")


PER_CODE_POINT = [  # (normalizer, separator: a character it keeps and that combines with nothing)
    (N.NFD(), "\x00"), (N.NFKD(), "\x00"), (N.NFC(), "\x00"), (N.NFKC(), "\x00"), (N.Lowercase(), "\x00"),
    (N.StripAccents(), "Q"), (N.Nmt(), "Q"),
    (N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False), "Q"),
    (N.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False), "Q"),
    (N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False), "Q"),
]


_chars = {}


def _every_char(sep=""):
    """Every code point but the surrogates and `sep`, as strings and as a batch of one row each."""
    if sep not in _chars:
        chars = [chr(c) for c in unicode_data.code_points(sep)]
        _chars[sep] = chars, to_batch(chars)
    return _chars[sep]


@pytest.mark.parametrize("ref_normalizer,sep", PER_CODE_POINT, ids=lambda x: repr(x)[:60])
def test_every_code_point(ref_normalizer, sep):
    chars, batch = _every_char(sep)
    _assert_rows_equal(ref_normalizer, chars, sep, batch)


def test_strip_every_code_point():
    strip = N.Strip()
    chars, b = _every_char()
    _, lens = _ours(strip, chars, b)
    theirs = np.array([strip.normalize_str(c) == "" for c in chars])
    assert np.array_equal(lens == 0, theirs), [hex(ord(c)) for c in np.array(chars)[(lens == 0) != theirs][:10]]


def test_canonical_order_of_every_mark():
    """Each non-starter after and before a mark of every combining class: NFD's canonical ordering."""
    t = unicode_data.load()
    ccc = t.props & unicode_data.CCC
    marks = sorted({int(ccc[c]): chr(c) for c in reversed(np.flatnonzero(ccc).tolist())}.items())
    nonstarters = [chr(c) for c in np.flatnonzero(ccc).tolist() if t.maps[unicode_data.CANON, c] == 0]
    pairs = [m + x for x in nonstarters for _, m in marks] + [x + m for x in nonstarters for _, m in marks]
    _assert_rows_equal(N.NFD(), pairs, "\x00")


def test_every_composition_pair():
    t = unicode_data.load()
    pairs = [chr(int(k) >> 42) + chr((int(k) >> 21) & 0x1FFFFF) for k in t.comp]
    pairs += ["\u1100\u1161", "\uac00\u11a8", "\uac00\u11a7", "\u1100\u1161\u11a8", "\uac01\u11a8"]
    _assert_rows_equal(N.NFC(), pairs, "\x00")
    _assert_rows_equal(N.NFKC(), pairs, "\x00")


# ---- whole tokenizers ----

PIECES = ["a", "A", "e\u0301", "\u0301", "\u0316\u0301", "a\u0301\u0316\u0327", "\u0344", "\u0f73", "\u0958", "x\u0345\u0301",
          "ﬁ", "ﬀ", "①", "ｶ", "ﾞ", "㎏", "½", "ﷺ", "\U0001D400", "é", "É", "Å", "Ω", "\u2126", "K", "İ", "\u0130\u0307", "ẞ",
          "ß", "ǅ", "Ǆ", "ΣΑΣ ", "ς", "ὄ", "\u1e9b\u0323", "q\u0307\u0323", "\u0dd9\u0dcf\u0dca", "한국어", "\u1100\u1161\u11a8",
          "\uac00\u11a8", "ᄀ각", "日本語", "中文", "\U00020000", "\x00", "\x01", "\x7f", "\x85", "\t", "\n", "\r\n", " ", "  ",
          "\u3000", "\u00a0", "\u200b", "\ufeff", "\ufffd", "\u2581", "▁", "Hello", "WORLD", "'s", "123", "ab", "abab",
          "hello", "HELLO", "[X]", "<sp>", "ÅB", "ＡＢ", "AB", "\U0001F600"]

text_piece = st.one_of(st.sampled_from(PIECES), st.text(st.characters(exclude_categories=("Cs",)), max_size=6))
texts = st.lists(text_piece, max_size=12).map("".join)
batches = st.lists(texts, min_size=1, max_size=5)

NORMALIZERS = {
    "NFD": N.NFD(), "NFKD": N.NFKD(), "NFC": N.NFC(), "NFKC": N.NFKC(), "Lowercase": N.Lowercase(),
    "StripAccents": N.StripAccents(), "Nmt": N.Nmt(),
    "Bert": N.BertNormalizer(), "Bert-cased": N.BertNormalizer(lowercase=False),
    "Bert-cased-strip": N.BertNormalizer(lowercase=False, strip_accents=True),
    "Bert-lower-keep-accents": N.BertNormalizer(strip_accents=False),
    "Bert-raw": N.BertNormalizer(clean_text=False, handle_chinese_chars=False),
    "Strip": N.Strip(), "Strip-left": N.Strip(right=False), "Strip-right": N.Strip(left=False),
    "Replace-space": N.Replace(" ", "\u2581"), "Replace-drop": N.Replace("ab", ""), "Replace-grow": N.Replace("a", "xyz"),
    "Replace-accent": N.Replace("é", "e"), "Prepend": N.Prepend("\u2581"), "Prepend-long": N.Prepend("xé"),
    "Seq-strip-accents": N.Sequence([N.NFD(), N.StripAccents(), N.Lowercase()]),
    "Seq-sentencepiece": N.Sequence([N.Prepend("\u2581"), N.Replace(" ", "\u2581")]),
    "Seq-strip-replace-prepend": N.Sequence([N.Strip(), N.Replace(" ", "\u2581"), N.Prepend("\u2581")]),
    "Seq-bert-nfc": N.Sequence([N.BertNormalizer(), N.NFC()]),
    "Seq-nfkc-lower-nfd": N.Sequence([N.NFKC(), N.Lowercase(), N.NFD()]),
    "Seq-three-berts": N.Sequence([N.Lowercase(), N.BertNormalizer(strip_accents=False),
                                   N.BertNormalizer(lowercase=False, strip_accents=False)]),
}

_base = {}


def _base_tokenizer(kind):
    """'bytes': byte-level, no merges (a token per byte); 'merges': a small trained byte-level BPE."""
    if kind not in _base:
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if kind == "bytes":
            ref = Tokenizer(models.BPE({c: i for i, c in enumerate(sorted(alphabet))}, []))
        else:
            ref = Tokenizer(models.BPE())
        ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        ref.decoder = decoders.ByteLevel()
        ref.post_processor = processors.ByteLevel(trim_offsets=True)
        if kind == "merges":
            trainer = trainers.BpeTrainer(vocab_size=500, initial_alphabet=alphabet, show_progress=False)
            ref.train_from_iterator(["".join(PIECES), "The quick brown fox, naïve café; 東京 한국어 ﬁne"] * 20, trainer=trainer)
        ref.add_tokens([AddedToken("hello", single_word=True), AddedToken("[X]", normalized=False),
                        AddedToken("ÅB", normalized=True), AddedToken("ＡＢ", normalized=True, rstrip=True),
                        AddedToken("é", normalized=True, lstrip=True)])
        ref.add_special_tokens([AddedToken("<sp>", lstrip=True)])
        _base[kind] = ref.to_str()
    return _base[kind]


_pairs = {}


def _pair(kind, name):
    """numbatok and the reference, both loaded from the same tokenizer.json with this normalizer."""
    if (kind, name) not in _pairs:
        d = json.loads(_base_tokenizer(kind))
        d["normalizer"] = json.loads(NORMALIZERS[name].__getstate__())
        text = json.dumps(d)
        _pairs[kind, name] = numbatok.Tokenizer.from_str(text, device="cpu"), Tokenizer.from_str(text)
    return _pairs[kind, name]


def _check(tok, ref, batch):
    assert_same_encodings(tok.encode_batch(batch), ref.encode_batch(batch), batch)
    fast = tok.encode_ragged(batch, add_special_tokens=False).to_list()  # the ids-only path
    assert fast == [e.ids for e in ref.encode_batch(batch, add_special_tokens=False)]
    ids = [e.ids for e in ref.encode_batch(batch)]
    assert tok.decode_batch(ids, skip_special_tokens=False) == ref.decode_batch(ids, skip_special_tokens=False)


@pytest.mark.parametrize("kind", ["bytes", "merges"])
@pytest.mark.parametrize("name", list(NORMALIZERS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches)
def test_generated_text_matches_reference(kind, name, batch):
    _check(*_pair(kind, name), batch)


@pytest.mark.parametrize("name", ["NFKC", "Bert", "Seq-sentencepiece", "Seq-nfkc-lower-nfd"])
def test_fixed_cases(name):
    cases = ["", " ", "[X]hello[X]", " HELLO é", "ÅB ＡＢ  x é é", "A\u030aB", "ＡＢ\u3000 x", "<sp> <sp>x",
             "a" + "\u0301\u0316" * 3000, "\u0316\u0301\u0345\u0334" * 500 + "x", "e\u0301" * 2000, "İ" * 300,
             "\x00\x01 \t\n", "ﷺ" * 50, "日本語" * 100]
    for kind in ("bytes", "merges"):
        _check(*_pair(kind, name), cases)


def test_corpus_sample_bert_and_gpt2():
    docs = corpus_docs()[::60]
    for name in ("bert-base-uncased", "bert-base-cased"):
        tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
        ref = Tokenizer.from_file(vocab_path(name))
        assert_same_encodings(tok.encode_batch(docs), ref.encode_batch(docs), docs)
    ref = Tokenizer.from_file(vocab_path("gpt2"))
    ref.normalizer = N.Sequence([N.NFKC(), N.Lowercase()])
    ref = Tokenizer.from_str(ref.to_str())
    tok = numbatok.Tokenizer.from_str(ref.to_str(), device="cpu")
    assert_same_encodings(tok.encode_batch(docs), ref.encode_batch(docs), docs)
    r = tok.encode_ragged(docs, add_special_tokens=False)
    assert r.to_list() == [e.ids for e in ref.encode_batch(docs, add_special_tokens=False)]


def _assert_ids_path_normalizes_as_the_passes(tok, rows):
    """The ids-only path's normalized text, pieces and added tokens equal those of every pass."""
    b = to_batch(rows)
    at, classes = tok._added.arrays(), tok._classes
    want = cpu.normalize_rows(tok._norm, b.data, b.offsets, at, classes)[:4]
    got = cpu.normalize_rows_ids(tok._norm, b.data, b.offsets, at, classes)
    for w, g in zip(want, got):
        assert np.array_equal(w, g)


ASCII_MAPPED = {"NFD", "NFKD", "NFC", "NFKC", "Lowercase", "StripAccents", "Nmt", "Bert", "Bert-cased",
                "Bert-cased-strip", "Bert-lower-keep-accents", "Bert-raw", "Seq-strip-accents", "Seq-bert-nfc",
                "Seq-nfkc-lower-nfd", "Seq-three-berts"}


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_ascii_rows_mapped_as_the_passes_do(name):
    """The ids-only path maps all-ASCII rows with the normalizer's ASCII map (only heads that keep
    ASCII as it is): same normalized text, pieces and added tokens as every pass over every row."""
    tok, _ = _pair("merges", name)
    assert (tok._norm.ascii_map() is not None) == (name in ASCII_MAPPED)
    every = "".join(chr(c) for c in range(128))
    rows = [every, "", "[X]hello[X] <sp> HELLO", "  x\t\x00\x7f ab", "ÅB naïve ＡＢ", every + "é", "hello[X]"] * 3
    _assert_ids_path_normalizes_as_the_passes(tok, rows)


CHAR_MAPPED = {"NFD", "NFKD", "Lowercase", "StripAccents", "Nmt", "Bert", "Bert-cased", "Bert-cased-strip",
               "Bert-lower-keep-accents", "Bert-raw", "Seq-strip-accents", "Seq-three-berts"}


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_other_rows_mapped_a_character_at_a_time(name):
    """The ids-only path maps rows that are not all ASCII a character at a time (heads identity, NFD,
    NFKD only), except rows holding a character whose decomposition keeps a combining mark: same
    normalized text and pieces as every pass over every row, with a sample of every plane and marks
    of every combining class meeting across characters."""
    tok, _ = _pair("merges", name)
    assert (tok._norm.char_map() is not None) == (name in CHAR_MAPPED)
    t = unicode_data.load()
    ccc = t.props & unicode_data.CCC
    marks = sorted({int(ccc[c]): chr(c) for c in reversed(np.flatnonzero(ccc).tolist())}.values())
    sample = [chr(c) for c in unicode_data.code_points("")[::97]]
    rows = ["".join(sample[i:i + 40]) for i in range(0, len(sample), 40)] + PIECES + ["".join(PIECES)]
    rows += ["a" + m1 + m2 + "b" for m1 in marks for m2 in marks]
    rows += ["x\U0001D15E\u0301y", "\U0001D165\U0001D16D e\u0301 [X]hello[X]", "é<sp>é ÅB", "\u1e9b\u0323\u0301"]
    _assert_ids_path_normalizes_as_the_passes(tok, rows)
    if name in CHAR_MAPPED:
        cm = tok._norm.char_map().cmap
        assert (cm >= 0).sum() > 10000  # (the rows were mapped, not passed on)
        if name in ("NFD", "NFKD"):  # U+0301 stays: NFD may move it past a neighbour's mark
            assert cm[0x301] == -2
        if name == "Bert":  # U+0301 is stripped (nothing to reorder); U+1D15E decomposes to a kept mark (Mc)
            assert cm[0x301] >= 0 and cm[0x1D15E] == -2


@pytest.mark.parametrize("name", sorted(CHAR_MAPPED))
def test_char_map_learns_what_the_passes_write(name):
    """What `char_map` learns for a character (its own compiled walk through the passes' tables)
    equals what every pass writes for that character as a row of its own: every code point of
    planes 0-3 and 14."""
    from numbatok.normalizers import char_map
    tok, _ = _pair("merges", name)
    cps = np.array([c for c in range(0x80, 0x40000) if not 0xD800 <= c <= 0xDFFF] + list(range(0xE0000, 0xE1000)),
                   np.int64)
    got, lens, unsafe = char_map._each_alone(tok._norm, cps)
    b = to_batch([chr(c) for c in cps.tolist()])
    text, pb, _, row_piece, _, _ = cpu.normalize_rows(tok._norm, b.data, b.offsets, AddedTable([]).arrays(),
                                                      unicode_tables.load())
    ends = pb[row_piece]
    assert np.array_equal(np.diff(ends), lens)
    assert np.array_equal(np.asarray(text[ends[0]:ends[-1]]), got)
    assert unsafe.sum() < 2500  # (the marks' rows take the passes; the rest of a text is mapped)


def test_normalized_added_tokens_decode_and_vocab():
    tok, ref = _pair("bytes", "Lowercase")
    for i in range(ref.get_vocab_size()):
        assert tok.id_to_token(i) == ref.id_to_token(i), i
    ids = ref.encode("say HELLO ÅB [X]").ids
    assert tok.decode(ids, skip_special_tokens=False) == ref.decode(ids, skip_special_tokens=False)


# ---- what is refused ----

@pytest.mark.parametrize("normalizer,path", [
    ({"type": "Replace", "pattern": {"Regex": " +"}, "content": " "}, "normalizer.pattern"),
    ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Precompiled", "precompiled_charsmap": ""}]},
     "normalizer.normalizers[1]"),
    ({"type": "ByteLevel"}, "normalizer"),
    ({"type": "Replace", "pattern": {"String": ""}, "content": "x"}, "normalizer.pattern"),
    ({"type": "Prepend", "prepend": ""}, "normalizer.prepend"),
])
def test_unsupported_normalizers_name_their_path(normalizer, path):
    d = json.loads(_base_tokenizer("bytes"))
    d["normalizer"] = normalizer
    with pytest.raises(UnsupportedComponentError, match="^" + re.escape(path) + ": "):
        numbatok.Tokenizer.from_str(json.dumps(d), device="cpu")


# ---- the CUDA launch path ----

SIM_SCRIPT = textwrap.dedent(r'''
    import json, sys, warnings
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
    import numpy as np
    import numbatok
    from numbatok.backends import cuda as bc
    from tokenizers import Tokenizer
    bc.THREADS = 3
    docs = json.loads(sys.argv[1])
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tok = numbatok.Tokenizer.from_str(text, device="cuda")
        ref = Tokenizer.from_str(text)
        for i, (a, b) in enumerate(zip(tok.encode_batch(docs), ref.encode_batch(docs))):
            for f in ("ids", "tokens", "offsets", "word_ids"):
                if getattr(a, f) != getattr(b, f):
                    print(f"MISMATCH doc {i} {f}: {getattr(a, f)} vs {getattr(b, f)}")
                    sys.exit(1)
        cpu = numbatok.Tokenizer.from_str(text, device="cpu").encode_ragged(docs)
        assert tok.encode_ragged(docs).to_list() == cpu.to_list()
    print("simulator ok", len(sys.argv) - 2)
''')

SIM_DOCS = ["Hello ﬁne ① ｶ ㎏ WORLD", "e\u0301 à la İstanbul ẞ ΣΑΣ", "", "한국어 \u1100\u1161\u11a8 ᄀ각", "[X]  hello x[X]é",
            "a\u0301\u0316\u0327 \u0344 " + "\u0316\u0301" * 20, " \t日本語\u3000 "]


def test_cuda_launch_path_under_simulator(tmp_path):
    files = [vocab_path("bert-base-uncased")]
    for name in ("NFKC", "Bert", "Seq-strip-replace-prepend"):
        d = json.loads(_base_tokenizer("merges"))
        d["normalizer"] = json.loads(NORMALIZERS[name].__getstate__())
        files.append(str(tmp_path / f"{name}.json"))
        with open(files[-1], "w", encoding="utf-8") as f:
            json.dump(d, f)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", SIM_SCRIPT, json.dumps(SIM_DOCS), *files], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "simulator ok 4" in p.stdout
