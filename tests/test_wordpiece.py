"""WordPiece and WordLevel models, the BERT-family pre-tokenizers and the WordPiece decoder, against
`tokenizers`: the shipped BERT vocabularies with their normalizer removed on both sides (so model and
pre-tokenizer meet raw text; the full files are compared in test_parity_corpus) and tokenizer.json
files built here."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbatok
from conftest import assert_same_encodings, corpus_docs, vocab_path

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

from test_parity_hypothesis import texts  # noqa: E402

_cache = {}


def bert_without_normalizer(name):
    if name not in _cache:
        d = json.load(open(vocab_path(name), encoding="utf-8"))
        d["normalizer"] = None
        text = json.dumps(d)
        _cache[name] = (numbatok.Tokenizer.from_str(text, device="cpu"), Tokenizer.from_str(text))
    return _cache[name]


def check(tok, ref, batch):
    assert_same_encodings(tok.encode_batch(batch), ref.encode_batch(batch), batch)
    ids = [e.ids for e in ref.encode_batch(batch)]
    assert tok.decode_batch(ids) == ref.decode_batch(ids)
    assert tok.decode_batch(ids, skip_special_tokens=False) == ref.decode_batch(ids, skip_special_tokens=False)


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-cased"])
def test_bert_vocab_on_corpus_sample(name):
    docs = corpus_docs()[::13]
    check(*bert_without_normalizer(name), docs)


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-base-cased"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(texts, min_size=1, max_size=6))
def test_bert_vocab_on_generated_text(name, batch):
    check(*bert_without_normalizer(name), batch)


def test_max_input_chars_per_word_and_unknowns():
    tok, ref = bert_without_normalizer("bert-base-uncased")
    check(tok, ref, ["a" * 99, "a" * 100, "a" * 101, "hello ☃☃ qqqqzzzxx [UNK] [CLS]", "x" * 500])


def _with_pre_tokenizer(pre, model="wordpiece"):
    d = json.load(open(vocab_path("bert-base-uncased"), encoding="utf-8"))
    d["normalizer"] = None
    ref = Tokenizer.from_str(json.dumps(d))
    ref.pre_tokenizer = pre
    if model == "wordlevel":
        vocab = {t: i for t, i in ref.get_vocab().items() if not t.startswith("##")}
        ref.model = models.WordLevel(vocab, unk_token="[UNK]")
        ref.decoder = None
    return numbatok.Tokenizer.from_str(ref.to_str(), device="cpu"), ref


PRE_TOKENIZERS = {
    "Whitespace": pre_tokenizers.Whitespace(),
    "WhitespaceSplit": pre_tokenizers.WhitespaceSplit(),
    "Bert": pre_tokenizers.BertPreTokenizer(),
    **{f"Punctuation-{b}": pre_tokenizers.Punctuation(b)
       for b in ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous")},
    "Sequence-WhitespaceSplit-Punctuation": pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation("contiguous")]),
    "Sequence-Whitespace-Punctuation-Punctuation": pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation("merged_with_next")]),
}
PUNCTY = ["hello, world!!", "a.b..c", "!!a", "a!!", "!a!", "(x) [y] {z}", "it's", "don't do...", "¿qué?", "«a»",
          "a — b", "x+y=z", "", "   ", "a\u3000b", "tab\there", "ﬁ ①", "日本語、テスト。"]


@pytest.mark.parametrize("name", sorted(PRE_TOKENIZERS))
@pytest.mark.parametrize("model", ["wordpiece", "wordlevel"])
def test_pre_tokenizers_and_models(name, model):
    check(*_with_pre_tokenizer(PRE_TOKENIZERS[name], model), PUNCTY)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(texts, min_size=1, max_size=4), name=st.sampled_from(sorted(PRE_TOKENIZERS)))
def test_pre_tokenizers_on_generated_text(batch, name):
    key = ("pre", name)
    if key not in _cache:
        _cache[key] = _with_pre_tokenizer(PRE_TOKENIZERS[name])
    check(*_cache[key], batch)


@pytest.mark.parametrize("cleanup", [True, False])
def test_wordpiece_decoder_options(cleanup):
    d = json.load(open(vocab_path("bert-base-uncased"), encoding="utf-8"))
    d["normalizer"] = None
    ref = Tokenizer.from_str(json.dumps(d))
    ref.decoder = decoders.WordPiece(prefix="##", cleanup=cleanup)
    tok = numbatok.Tokenizer.from_str(ref.to_str(), device="cpu")
    check(tok, ref, ["hello , world ! it ' s a test . don ' t do not", "##ing unaffable", "[CLS] x [SEP]"])


@pytest.mark.parametrize("prefix", ["##", "▁", "", "@@"])
def test_longest_match_from_the_trie(prefix):
    """A piece's longest match is one walk down the vocabulary's trie: tokens that are prefixes of
    others, walks that run past the last match, a lone prefix token, the prefix of two bytes, of one
    three-byte character, none, or one no token starts with ("@@": every later piece misses); bytes
    that start no token (U+0000, whose step from the root lands on the root's own slot), tokens of
    one to four bytes a character."""
    pieces = ["a", "ab", "abc", "é", "éa", "жж", "ж", "日本", "日", "本語です", "x", "\U0001F600", "\x01", "ÿ"]
    vocab = {"[UNK]": 0}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
        if prefix != "@@":
            vocab.setdefault(prefix + p, len(vocab))
    if prefix == "##":
        vocab.setdefault("##", len(vocab))
    vocab.setdefault(("" if prefix == "@@" else prefix) + "abcab", len(vocab))
    vocab.setdefault("жжж", len(vocab))
    ref = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", continuing_subword_prefix=prefix))
    ref.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = numbatok.Tokenizer.from_str(ref.to_str(), device="cpu")
    rows = ["abcabcab жжжжж abcabc éaé жжжж 日本語です 本語です日 q aq qa xé ж日 abcd ☃ éé", "", "日本日本日 ababab жéж",
            "\x00 \x00a a\x00 \x01 \x01a a\x01 ÿÿ aÿ \U0001F600\U0001F600a a\U0001F600 ## a## ##a abca abcabc"]
    assert [e.ids for e in tok.encode_batch(rows)] == [e.ids for e in ref.encode_batch(rows)]
    assert tok.encode_ragged(rows).to_list() == [e.ids for e in ref.encode_batch(rows)]
