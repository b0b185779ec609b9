"""Encode results: `Encoding` (the reference's per-text object, the slow path) and `RaggedEncoding`
(arrays for a whole batch, no per-token Python objects: the fast path)."""
import gc

import numpy as np


def without_gc(fn, *args):
    """fn(*args) with Python's cycle collector paused (re-enabled after, left alone when the caller had
    it off): while a call builds many lists and tuples, the collector's passes over all those made so
    far took 1-3x the building's own time. None of them can form a cycle."""
    if not gc.isenabled():
        return fn(*args)
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


_FIELDS = ("ids", "tokens", "offsets", "attention_mask", "type_ids", "special_tokens_mask", "word_ids")


class Encoding:
    """One encoded text, field for field as `tokenizers.Encoding`. The encodings of a batch make each
    list when it is first read (see `Rows`), as the reference's make theirs on every read: most
    callers read the ids and the mask alone, and every field's lists, made at once, were most of an
    `encode_batch` call."""

    __slots__ = tuple("_" + name for name in _FIELDS) + ("overflowing", "_lead", "_trail", "_rows", "_row")

    def __init__(self, ids, tokens, offsets, type_ids, special_tokens_mask, word_ids):
        self._ids = ids
        self._tokens = tokens
        self._offsets = offsets
        self._type_ids = type_ids
        self._special_tokens_mask = special_tokens_mask
        self._attention_mask = [1] * len(ids)
        self._word_ids = word_ids
        self.overflowing = []
        self._lead = self._trail = ()   # ByteLevel trimming inputs, until post-processing
        self._rows = None

    @classmethod
    def of_row(cls, rows, k):
        """Row k of `rows`, its lists not made yet."""
        e = cls.__new__(cls)
        e._ids = e._tokens = e._offsets = e._type_ids = e._special_tokens_mask = e._attention_mask = None
        e._word_ids = None
        e.overflowing = []
        e._lead = e._trail = ()
        e._rows, e._row = rows, k
        return e

    @property
    def words(self):
        return self.word_ids

    @property
    def n_sequences(self):
        return 1

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return (f"Encoding(num_tokens={len(self.ids)}, attributes=[ids, type_ids, tokens, offsets, "
                "attention_mask, special_tokens_mask, word_ids, overflowing])")


def _field(name):
    slot = Encoding.__dict__["_" + name]

    def get(self):
        v = slot.__get__(self)
        if v is None:
            v = self._rows.field(name, self._row)
            slot.__set__(self, v)
        return v

    return property(get, slot.__set__)


for _name in _FIELDS:
    setattr(Encoding, _name, _field(_name))


_ID_FIELDS = ("ids", "type_ids", "special_tokens_mask", "attention_mask")


class Rows:
    """What a batch's `Encoding`s make their lists from: the token table's first four rows (ids,
    character start and end, word index), each row's first token, the added tokens' text, the
    vocabulary's token strings and the template's parts (`Tokenizer._single_parts`). A field's first
    read makes that field's lists for every row of the batch, with the cycle collector paused: per
    row, numpy's slicing and `tolist` cost more than the lists, and the collector's passes over the
    lists made so far as much again."""

    __slots__ = ("table", "ro", "added", "added_text", "names", "wrap", "made")

    def __init__(self, table, ro, added, added_text, names, wrap):
        self.table, self.ro, self.added, self.added_text, self.names, self.wrap = \
            table, ro, added, added_text, names, wrap
        self.made = {}

    def field(self, name, k):
        got = self.made.get(name)
        if got is None:
            if len(self.ro) == 2:  # (one row, as `encode` makes: see `_one_row`)
                self.made.update(self._one_row(name))
                return self.made[name][k]
            # (the collector paused for batches alone: for a few rows the pause costs more)
            got = self.made[name] = without_gc(self._lists, name) if len(self.ro) > 64 else self._lists(name)
        return got[k]

    def _one_row(self, name):
        """A one-row batch's lists in two groups, the field named and those made with it: the ids and
        the masks, or the tokens, offsets and word ids. `_lists`, a field at a time, cost 1-2 us a field
        in its fixed steps, more than a short text's whole group."""
        a, z = self.ro
        pre_ids, pre_tok, pre_type, post_ids, post_tok, post_type, seq_type = self.wrap
        i, j, n = len(pre_ids), len(post_ids), z - a
        if name in _ID_FIELDS:
            ids = self.table[0, a:z].tolist()
            return {"ids": [pre_ids + ids + post_ids], "type_ids": [pre_type + [seq_type] * n + post_type],
                    "special_tokens_mask": [[1] * i + [0] * n + [1] * j], "attention_mask": [[1] * (i + n + j)]}
        ids, st, en, words = self.table[:, a:z].tolist()
        names = self.names
        tokens = [names[x] for x in ids]
        if len(self.added):  # (added tokens show the text they matched)
            for p, shown in zip(self.added.tolist(), self.added_text):
                tokens[p - a] = shown
        return {"tokens": [pre_tok + tokens + post_tok], "offsets": [[(0, 0)] * i + list(zip(st, en)) + [(0, 0)] * j],
                "word_ids": [[None] * i + words + [None] * j]}

    def _lists(self, name):
        t, ro = self.table, self.ro
        pre_ids, pre_tok, pre_type, post_ids, post_tok, post_type, seq_type = self.wrap
        i, j = len(pre_ids), len(post_ids)
        spans = zip(ro[:-1], ro[1:])
        if name in ("ids", "tokens"):
            flat = t[0].tolist()
            if name == "tokens":
                names = self.names
                flat = [names[x] for x in flat]
                for p, shown in zip(self.added.tolist(), self.added_text):  # (added tokens show the text they matched)
                    flat[p] = shown
            pre, post = (pre_ids, post_ids) if name == "ids" else (pre_tok, post_tok)
        elif name == "offsets":
            flat = list(zip(t[1].tolist(), t[2].tolist()))
            pre, post = [(0, 0)] * i, [(0, 0)] * j
        elif name == "word_ids":
            flat = t[3].tolist()
            pre, post = [None] * i, [None] * j
        elif name == "type_ids":
            return [pre_type + [seq_type] * (z - a) + post_type for a, z in spans]
        elif name == "special_tokens_mask":
            return [[1] * i + [0] * (z - a) + [1] * j for a, z in spans]
        else:  # attention_mask
            return [[1] * (i + z - a + j) for a, z in spans]
        if i == j == 0:
            return [flat[a:z] for a, z in spans]
        return [pre + flat[a:z] + post for a, z in spans]


class RaggedEncoding:
    """A batch of token id rows as flat arrays: row i is ids[row_offsets[i]:row_offsets[i + 1]].

    Arrays are numpy on the CPU backend and CuPy when the tokenizer ran on the GPU with the result
    left on the device. Optional per-token fields are None unless asked for.
    """

    def __init__(self, ids, row_offsets, offsets=None, type_ids=None, special_tokens_mask=None, word_ids=None):
        self.ids = ids
        self.row_offsets = row_offsets
        self.offsets = offsets
        self.type_ids = type_ids
        self.special_tokens_mask = special_tokens_mask
        self.word_ids = word_ids

    def __len__(self):
        return int(self.row_offsets.shape[0]) - 1

    @property
    def lengths(self):
        return self.row_offsets[1:] - self.row_offsets[:-1]

    def __getitem__(self, i):
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} out of range for {n} rows")
        return self.ids[int(self.row_offsets[i]):int(self.row_offsets[i + 1])]

    def to_host(self):
        """The same result with every array as numpy (a no-op on the CPU backend)."""
        from .backends import to_host as host
        return RaggedEncoding(host(self.ids), host(self.row_offsets), host(self.offsets), host(self.type_ids),
                              host(self.special_tokens_mask), host(self.word_ids))

    def rows(self):
        """Each row's ids as an array view (host arrays)."""
        return np.split(self.ids, self.row_offsets[1:-1]) if len(self) else []

    def to_list(self):
        """Python lists of ids per row (the slow path, for interop)."""
        from .backends import to_host
        ids, ro = to_host(self.ids), to_host(self.row_offsets)
        return without_gc(row_lists, ids.tolist(), ro.tolist())

    def to_padded(self, pad_id=0, length=None, side="right"):
        """(ids, attention_mask) as 2-D arrays of shape (rows, length or the longest row).

        Rows longer than `length` are cut (on the right); use the tokenizer's truncation for the
        reference's truncation semantics.
        """
        xp = array_module(self.ids)
        lens = self.lengths
        n = len(self)
        width = int(lens.max()) if length is None and n else int(length or 0)
        out = xp.full((n, width) + tuple(self.ids.shape[1:]), pad_id, dtype=self.ids.dtype)
        mask = xp.zeros((n, width), dtype=np.int64)
        if n == 0 or width == 0:
            return out, mask
        keep = xp.minimum(lens, width)
        total = int(self.row_offsets[-1])
        row = (xp.searchsorted(self.row_offsets, xp.arange(total), side="right") - 1).astype(np.int64)
        col = xp.arange(total) - self.row_offsets[:-1][row]
        sel = col < width
        if side == "left":
            col = col + (width - keep)[row]
        out[row[sel], col[sel]] = self.ids[sel]
        mask[row[sel], col[sel]] = 1
        return out, mask

    def __dlpack__(self, *args, **kwargs):
        return self.ids.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.ids.__dlpack_device__()

    def __repr__(self):
        return f"RaggedEncoding(rows={len(self)}, tokens={int(self.ids.shape[0])})"


def array_module(a):
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def row_lists(flat, ro):
    """Rows of a flat list cut at offsets ro (lists): one slice each."""
    return [flat[a:z] for a, z in zip(ro[:-1], ro[1:])]
