"""Truncation, post-processing templates and padding on Encoding objects: the slow path, with the
reference's exact semantics including overflowing pieces (stride windows, and the combinations a
pair's overflows produce when merged). The fast path (`Tokenizer.__call__`) does the same without
overflows on arrays.

Order, as the reference's post_process: truncate (max_length minus the special tokens the template
adds) -> trim ByteLevel offsets -> template (type ids, special tokens, merge with overflows) -> pad.
"""
from dataclasses import dataclass

from .encoding import Encoding
from .errors import NumbatokError

STRATEGIES = ("longest_first", "only_first", "only_second")
DIRECTIONS = ("right", "left")


@dataclass
class Truncation:
    max_length: int
    stride: int = 0
    strategy: str = "longest_first"
    direction: str = "right"

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise NumbatokError(f"truncation strategy must be one of {STRATEGIES}, not {self.strategy!r}")
        if self.direction not in DIRECTIONS:
            raise NumbatokError(f"truncation direction must be 'right' or 'left', not {self.direction!r}")
        if self.max_length < 0 or self.stride < 0:
            raise NumbatokError("truncation max_length and stride must be >= 0")

    def as_dict(self):
        return {"max_length": self.max_length, "stride": self.stride, "strategy": self.strategy,
                "direction": self.direction}


@dataclass
class Padding:
    direction: str = "right"
    pad_id: int = 0
    pad_type_id: int = 0
    pad_token: str = "[PAD]"
    length: int = None           # None: pad to the longest in the batch
    pad_to_multiple_of: int = None

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise NumbatokError(f"padding direction must be 'right' or 'left', not {self.direction!r}")

    def as_dict(self):
        return {"length": self.length, "pad_to_multiple_of": self.pad_to_multiple_of, "pad_id": self.pad_id,
                "pad_type_id": self.pad_type_id, "pad_token": self.pad_token, "direction": self.direction}


def _empty():
    return Encoding([], [], [], [], [], [])


def _slice(e, a, z):
    out = Encoding(e.ids[a:z], e.tokens[a:z], e.offsets[a:z], e.type_ids[a:z], e.special_tokens_mask[a:z],
                   e.word_ids[a:z])
    out.attention_mask = e.attention_mask[a:z]
    out._lead = e._lead[a:z]
    out._trail = e._trail[a:z]
    return out


def truncate(e, max_len, stride, direction):
    """In place: keep max_len tokens, the rest as overflowing windows overlapping by `stride`."""
    n = len(e.ids)
    if max_len >= n:
        return e
    if max_len == 0:
        out = _empty()
        out._lead, out._trail = [], []
        out.overflowing = [e]
        return out
    if stride >= max_len:
        raise NumbatokError(f"truncation stride ({stride}) must be smaller than the length left for the sequence "
                            f"({max_len}, after the special tokens are counted)")
    step = max_len - stride
    parts = []
    if direction == "right":
        for start in range(0, n, step):
            stop = min(start + max_len, n)
            parts.append((start, stop))
            if stop == n:
                break
    else:
        for last in range(n - 1, -1, -step):
            stop = last + 1
            start = max(stop - max_len, 0)
            parts.append((start, stop))
            if start == 0:
                break
    out = _slice(e, *parts[0])
    out.overflowing = [_slice(e, a, z) for a, z in parts[1:]]
    return out


def truncate_pair(a, b, t):
    """The reference's truncate_encodings for a sequence and an optional pair."""
    if t.max_length == 0:
        a = truncate(a, 0, t.stride, t.direction)
        if b is not None:
            b = truncate(b, 0, t.stride, t.direction)
        return a, b
    total = len(a.ids) + (len(b.ids) if b is not None else 0)
    if total <= t.max_length:
        return a, b
    to_remove = total - t.max_length
    if t.strategy == "longest_first":
        if b is None:
            return truncate(a, total - to_remove, t.stride, t.direction), None
        n1, n2 = len(a.ids), len(b.ids)
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = n1 if n1 > t.max_length else max(n1, t.max_length - n1)
        if n1 + n2 > t.max_length:
            n1 = t.max_length // 2
            n2 = n1 + t.max_length % 2
        if swap:
            n1, n2 = n2, n1
        return truncate(a, n1, t.stride, t.direction), truncate(b, n2, t.stride, t.direction)
    if t.strategy == "only_second" and b is None:
        raise NumbatokError("truncation strategy 'only_second' needs a pair of sequences")
    target = a if t.strategy == "only_first" else b
    if len(target.ids) <= to_remove:
        raise NumbatokError(f"truncation: the {'first' if target is a else 'second'} sequence is too short to "
                            f"remove {to_remove} tokens with strategy {t.strategy!r}")
    cut = truncate(target, len(target.ids) - to_remove, t.stride, t.direction)
    return (cut, b) if target is a else (a, cut)


def trim_offsets(e, add_prefix_space):
    """ByteLevel offset trimming of one encoding and its overflows (character offsets)."""
    for part in [e] + list(e.overflowing):
        offs = []
        for i, ((s, z), lead, trail) in enumerate(zip(part.offsets, part._lead, part._trail)):
            if lead > 0:
                if (i == 0 or s == 0) and add_prefix_space and lead == 1:
                    lead = 0
                s = min(s + lead, z)
            if trail > 0 and z >= trail:
                z = max(z - trail, s)
            offs.append((s, z))
        part.offsets = offs


def _merge(acc, e):
    """acc + e with every combination of their overflows, as the reference's Encoding::merge_with
    (whose clones keep their own overflows, hence the nesting)."""
    overflows = []
    for o in acc.overflowing:
        overflows.append(_merge(_copy(o), _copy(e)))
        for oo in e.overflowing:
            overflows.append(_merge(_copy(o), _copy(oo)))
    for oo in e.overflowing:
        overflows.append(_merge(_copy(acc), _copy(oo)))
    acc.ids = acc.ids + e.ids
    acc.tokens = acc.tokens + e.tokens
    acc.offsets = acc.offsets + e.offsets
    acc.type_ids = acc.type_ids + e.type_ids
    acc.special_tokens_mask = acc.special_tokens_mask + e.special_tokens_mask
    acc.attention_mask = acc.attention_mask + e.attention_mask
    acc.word_ids = acc.word_ids + e.word_ids
    acc.overflowing = overflows
    return acc


def _copy(e):
    c = Encoding(list(e.ids), list(e.tokens), list(e.offsets), list(e.type_ids), list(e.special_tokens_mask),
                 list(e.word_ids))
    c.attention_mask = list(e.attention_mask)
    c.overflowing = [_copy(o) for o in e.overflowing]
    return c


def _special(ids, tokens, type_id):
    e = Encoding(list(ids), list(tokens), [(0, 0)] * len(ids), [type_id] * len(ids), [1] * len(ids),
                 [None] * len(ids))
    return e


def apply_template(pp, seqs, add_special_tokens, id_to_token):
    """Template pieces in order, merged (overflows combined) into one encoding."""
    template = pp.single if len(seqs) == 1 else pp.pair
    if not any(e.overflowing for e in seqs):
        return _joined(pp, template, seqs, add_special_tokens, id_to_token)
    acc = _empty()
    for kind, x, type_id in template:
        if kind == "special":
            if add_special_tokens:
                _merge(acc, _special(x, [id_to_token(i) for i in x], type_id))
        else:
            e = seqs[x]
            if "TemplateProcessing" in pp.kinds or pp.force_type_ids_zero or "BertProcessing" in pp.kinds:
                e.type_ids = [0 if pp.force_type_ids_zero else type_id] * len(e.ids)
            _merge(acc, e)
    if pp.force_type_ids_zero and add_special_tokens:  # RobertaProcessing rebuilds overflows with type id 0
        _zero_type_ids(acc)
    return acc


def _joined(pp, template, seqs, add_special_tokens, id_to_token):
    """`apply_template` when no piece has overflows (no truncation windows): the fields joined once,
    not merged piece by piece (the merges' copies were most of a short text's post-processing)."""
    retype = "TemplateProcessing" in pp.kinds or pp.force_type_ids_zero or "BertProcessing" in pp.kinds
    zero = pp.force_type_ids_zero
    ids, tokens, offsets, type_ids, special, attention, words = [], [], [], [], [], [], []
    for kind, x, type_id in template:
        if kind == "special":
            if add_special_tokens:
                k = len(x)
                ids += x
                tokens += [id_to_token(i) for i in x]
                offsets += [(0, 0)] * k
                type_ids += [type_id] * k
                special += [1] * k
                attention += [1] * k
                words += [None] * k
        else:
            e = seqs[x]
            ids += e.ids
            tokens += e.tokens
            offsets += e.offsets
            type_ids += [0 if zero else type_id] * len(e.ids) if retype else e.type_ids
            special += e.special_tokens_mask
            attention += e.attention_mask
            words += e.word_ids
    if zero and add_special_tokens:  # RobertaProcessing
        type_ids = [0] * len(ids)
    out = Encoding(ids, tokens, offsets, type_ids, special, words)
    out.attention_mask = attention
    return out


def single_parts(pp, add_special_tokens, id_to_token):
    """What the single-sequence template adds around a text, as `_joined` adds it: (ids, tokens and
    type ids before the text, the same after it, the text's type id), or
    None for a template that does not hold its text exactly once. With these, a batch without
    truncation gets its final encodings in one pass (no raw encoding, then a joined copy)."""
    retype = "TemplateProcessing" in pp.kinds or pp.force_type_ids_zero or "BertProcessing" in pp.kinds
    zero = pp.force_type_ids_zero
    parts = ([], [], []), ([], [], [])
    seq_type, side = None, 0
    for kind, x, type_id in pp.single:
        if kind == "special":
            if add_special_tokens:
                ids, tokens, types = parts[side]
                ids += x
                tokens += [id_to_token(i) for i in x]
                types += [type_id] * len(x)
        elif side == 0:
            side = 1
            seq_type = (0 if zero else type_id) if retype else 0  # (a raw text's type ids are 0)
        else:
            return None
    if side == 0:
        return None
    if zero and add_special_tokens:  # RobertaProcessing
        for _, _, types in parts:
            types[:] = [0] * len(types)
        seq_type = 0
    return (*parts[0], *parts[1], seq_type)


def _zero_type_ids(e):
    e.type_ids = [0] * len(e.ids)
    for o in e.overflowing:
        _zero_type_ids(o)


def pad(encodings, p):
    if not encodings:
        return
    target = p.length if p.length is not None else max(len(e.ids) for e in encodings)
    if p.pad_to_multiple_of and target % p.pad_to_multiple_of:
        target += p.pad_to_multiple_of - target % p.pad_to_multiple_of
    for e in encodings:
        _pad_one(e, target, p)


def _pad_one(e, target, p):
    for o in e.overflowing:
        _pad_one(o, target, p)
    k = target - len(e.ids)
    if k <= 0:
        return
    fields = [("ids", p.pad_id), ("type_ids", p.pad_type_id), ("tokens", p.pad_token), ("word_ids", None),
              ("attention_mask", 0), ("special_tokens_mask", 1), ("offsets", (0, 0))]
    for name, value in fields:
        cur = getattr(e, name)
        setattr(e, name, cur + [value] * k if p.direction == "right" else [value] * k + cur)
