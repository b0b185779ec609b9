"""tokenizer.json -> a validated Spec. One registry per section, keyed by each component's "type".

Anything numbatok cannot reproduce exactly raises UnsupportedComponentError naming the JSON path,
the type, and what is supported; nothing is approximated.
"""
import json
from dataclasses import dataclass, field

import numpy as np

from . import decoders, normalizers, processors
from .added_tokens import AddedToken
from .errors import NumbatokError, UnsupportedComponentError
from .postprocess import Padding, Truncation
from .pre_tokenizers import CL100K, GPT2, MAX_STAGES, O200K, SPLIT, WHOLE
from .pre_tokenizers.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from .pre_tokenizers.splitting import BEHAVIORS, CONTIGUOUS, ISOLATED, REMOVED
from .unicode_tables import PUNCT, SPACE, WORD


@dataclass
class PreTokenizerSpec:
    stages: list = field(default_factory=list)   # [(kind, arg)], see pre_tokenizers
    add_prefix_space: bool = False
    byte_level: bool = False

    @property
    def kind(self):
        return self.stages[0][0] if self.stages else WHOLE

    @property
    def prog(self):
        """The int64 program the row kernels run (pre_tokenizers.split_piece): built once per set of
        stages (every call reads it: building it was ~3 us of a one-row call's ~40). Not to be written."""
        key = tuple(self.stages)
        if self.__dict__.get("_prog_key") != key:
            st = self.stages or [(WHOLE, 0)]
            flat = [len(st)] + [x for s in st for x in s]
            prog = np.array(flat + [0] * (2 + 2 * MAX_STAGES - len(flat)), dtype=np.int64)
            self.__dict__["_prog"], self.__dict__["_prog_key"] = prog, key
        return self.__dict__["_prog"]


@dataclass
class BPESpec:
    vocab: dict
    merges: list   # [left, right] token pairs in rank order
    unk_token: str = None
    continuing_subword_prefix: str = ""
    end_of_word_suffix: str = ""
    fuse_unk: bool = False
    byte_fallback: bool = False
    ignore_merges: bool = False


@dataclass
class Spec:
    model: object   # BPESpec | WordPieceSpec | WordLevelSpec
    pre_tokenizer: PreTokenizerSpec
    post_processor: processors.PostProcessor
    decoder: object
    added_tokens: list = field(default_factory=list)
    raw: dict = None
    normalizer: object = None    # normalizers.Normalizer, None when there is none
    truncation: object = None   # postprocess.Truncation
    padding: object = None      # postprocess.Padding


def _unsupported(path, t, supported):
    return UnsupportedComponentError(
        f"{path}: type {t!r} is not supported yet (supported: {', '.join(supported)})")


def _byte_level_pre(d, path, out):
    if out.stages and out.stages[-1][0] in PATTERN_KINDS and not out.byte_level:
        # after a Split by a known pattern, ByteLevel only maps bytes to characters
        if d.get("use_regex", True) or d.get("add_prefix_space", True):
            raise UnsupportedComponentError(
                f"{path}: ByteLevel after a Split is supported with use_regex=false and add_prefix_space=false")
        out.byte_level = True
        return
    if out.stages:
        raise UnsupportedComponentError(f"{path}: ByteLevel after another pre-tokenizer is not supported yet")
    out.stages.append((GPT2 if d.get("use_regex", True) else WHOLE, 0))
    out.add_prefix_space = bool(d.get("add_prefix_space", True))
    out.byte_level = True


def _splitter(*stages):
    def parse(d, path, out):
        if out.byte_level or (out.stages and out.stages[-1][0] in PATTERN_KINDS):
            raise UnsupportedComponentError(f"{path}: a pre-tokenizer after ByteLevel or a Split by a regex "
                                            "is not supported yet")
        out.stages.extend((SPLIT, mask | (behavior << 8)) for mask, behavior in stages)
    return parse


def _punctuation(d, path, out):
    behavior = d.get("behavior", "Isolated")
    if behavior not in BEHAVIORS:
        raise NumbatokError(f"{path}.behavior: {behavior!r} is not one of {', '.join(BEHAVIORS)}")
    _splitter((PUNCT, BEHAVIORS[behavior]))(d, path, out)


# Split by a regex: the patterns numbatok scans by hand (`pre_tokenizers.patterns`), by their exact text
SPLIT_PATTERNS = {GPT2_PATTERN: (GPT2, 0), CL100K_PATTERN: (CL100K, 3), QWEN2_PATTERN: (CL100K, 1),
                  O200K_PATTERN: (O200K, 0)}
PATTERN_KINDS = (GPT2, CL100K, O200K)


def _split_pre(d, path, out):
    pattern = d.get("pattern") or {}
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    if regex not in SPLIT_PATTERNS:
        raise UnsupportedComponentError(
            f"{path}.pattern: Split by {pattern!r} is not supported yet; numbatok splits by the GPT-2, cl100k "
            "(GPT-4, Llama 3), Qwen2 and o200k (GPT-4o) regexes, recognized by their exact text")
    # every character is in some match of these patterns: the matches are the pieces either way
    if (d.get("behavior"), bool(d.get("invert", False))) not in (("Isolated", False), ("Removed", True)):
        raise UnsupportedComponentError(
            f"{path}: Split by this pattern is supported with behavior Isolated (invert=false) or Removed "
            f"(invert=true), not {d.get('behavior')!r} with invert={d.get('invert', False)}")
    if out.stages or out.byte_level:
        raise UnsupportedComponentError(f"{path}: a Split by a regex after another pre-tokenizer is not supported yet")
    out.stages.append(SPLIT_PATTERNS[regex])


PRE_TOKENIZERS = {
    "ByteLevel": _byte_level_pre,
    "BertPreTokenizer": _splitter((SPACE, REMOVED), (PUNCT, ISOLATED)),
    "WhitespaceSplit": _splitter((SPACE, REMOVED)),
    "Whitespace": _splitter((SPACE, REMOVED), (WORD, CONTIGUOUS)),  # \w+|[^\w\s]+
    "Punctuation": _punctuation,
    "Split": _split_pre,
}


def _pre_tokenizer(d, path="pre_tokenizer"):
    out = PreTokenizerSpec()
    if d is None:
        return out
    items = [(d, path)]
    if d.get("type") == "Sequence":
        items = [(sub, f"{path}.pretokenizers[{j}]") for j, sub in enumerate(d.get("pretokenizers", []))]
    for sub, p in items:
        fn = PRE_TOKENIZERS.get(sub.get("type"))
        if fn is None:
            raise _unsupported(p, sub.get("type"), list(PRE_TOKENIZERS) + ["Sequence of these", "none"])
        fn(sub, p, out)
    if len(out.stages) > MAX_STAGES:
        raise UnsupportedComponentError(
            f"{path}: this Sequence splits in {len(out.stages)} stages; numbatok supports up to {MAX_STAGES}")
    return out


def _bpe(d, path):
    dropout = d.get("dropout")
    if dropout not in (None, 0, 0.0):
        raise UnsupportedComponentError(
            f"{path}.dropout: BPE dropout={dropout} is random by design and cannot be matched id for id; "
            "set it to null for inference (it is a training-time regularizer)")
    raw = d.get("merges", [])
    # (comprehensions, not a loop with a check per merge: o200k has 446k merges)
    merges = [m.split(" ") if m.__class__ is str else m for m in raw]
    if any(len(m) != 2 for m in merges):
        j = next(j for j, m in enumerate(merges) if len(m) != 2)
        raise NumbatokError(f"{path}.merges[{j}]: {raw[j]!r} is not two tokens separated by one space")
    return BPESpec(
        vocab=d.get("vocab", {}), merges=merges, unk_token=d.get("unk_token"),
        continuing_subword_prefix=d.get("continuing_subword_prefix") or "",
        end_of_word_suffix=d.get("end_of_word_suffix") or "",
        fuse_unk=bool(d.get("fuse_unk", False)), byte_fallback=bool(d.get("byte_fallback", False)),
        ignore_merges=bool(d.get("ignore_merges", False)))


@dataclass
class WordPieceSpec:
    vocab: dict
    unk_token: str = "[UNK]"
    continuing_subword_prefix: str = "##"
    max_input_chars_per_word: int = 100


@dataclass
class WordLevelSpec:
    vocab: dict
    unk_token: str = "<unk>"


def _wordpiece(d, path):
    return WordPieceSpec(vocab=d.get("vocab", {}), unk_token=d.get("unk_token", "[UNK]"),
                         continuing_subword_prefix=d.get("continuing_subword_prefix", "##"),
                         max_input_chars_per_word=int(d.get("max_input_chars_per_word", 100)))


def _wordlevel(d, path):
    return WordLevelSpec(vocab=d.get("vocab", {}), unk_token=d.get("unk_token", "<unk>"))


MODELS = {"BPE": _bpe, "WordPiece": _wordpiece, "WordLevel": _wordlevel}


def _model(d, path="model"):
    if d is None:
        raise NumbatokError(f"{path}: missing; a tokenizer.json needs a model")
    t = d.get("type")
    if t is None:  # older files leave the model untagged; the reference infers it from the fields
        t = "BPE" if "merges" in d else ("Unigram" if isinstance(d.get("vocab"), list) else
                                          ("WordPiece" if "max_input_chars_per_word" in d else "WordLevel"))
    fn = MODELS.get(t)
    if fn is None:
        raise _unsupported(path, t, list(MODELS))
    return fn(d, path)


def _normalizer(d, path="normalizer"):
    return normalizers.parse(d, path)


def _added(items, path="added_tokens"):
    out = []
    for j, a in enumerate(items or []):
        try:
            out.append(AddedToken(id=int(a["id"]), content=a["content"], single_word=bool(a.get("single_word", False)),
                                  lstrip=bool(a.get("lstrip", False)), rstrip=bool(a.get("rstrip", False)),
                                  normalized=bool(a.get("normalized", True)), special=bool(a.get("special", False))))
        except (KeyError, TypeError, ValueError) as e:
            raise NumbatokError(f"{path}[{j}]: malformed added token ({e})") from None
    return out


_STRATEGY = {"LongestFirst": "longest_first", "OnlyFirst": "only_first", "OnlySecond": "only_second"}


def _truncation(d, path="truncation"):
    if d is None:
        return None
    try:
        return Truncation(int(d["max_length"]), int(d.get("stride", 0)),
                          _STRATEGY.get(d.get("strategy", "LongestFirst"), d.get("strategy")),
                          str(d.get("direction", "Right")).lower())
    except (KeyError, TypeError, ValueError) as e:
        raise NumbatokError(f"{path}: malformed truncation section ({e})") from None


def _padding(d, path="padding"):
    if d is None:
        return None
    strategy = d.get("strategy", "BatchLongest")
    length = None
    if isinstance(strategy, dict) and "Fixed" in strategy:
        length = int(strategy["Fixed"])
    elif strategy != "BatchLongest":
        raise NumbatokError(f"{path}.strategy: {strategy!r} is neither 'BatchLongest' nor {{'Fixed': n}}")
    return Padding(str(d.get("direction", "Right")).lower(), int(d.get("pad_id", 0)), int(d.get("pad_type_id", 0)),
                   d.get("pad_token", "[PAD]"), length, d.get("pad_to_multiple_of"))


def parse(text):
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise NumbatokError(f"not a tokenizer.json: invalid JSON ({e})") from None
    if not isinstance(d, dict) or "model" not in d:
        raise NumbatokError("not a tokenizer.json: expected an object with a 'model' key")
    normalizer = _normalizer(d.get("normalizer"))
    return Spec(truncation=_truncation(d.get("truncation")), padding=_padding(d.get("padding")),
                model=_model(d.get("model")), pre_tokenizer=_pre_tokenizer(d.get("pre_tokenizer")),
                post_processor=processors.parse(d.get("post_processor")), decoder=decoders.parse(d.get("decoder")),
                added_tokens=_added(d.get("added_tokens")), raw=d, normalizer=normalizer)
