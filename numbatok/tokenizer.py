"""`Tokenizer`: loads a tokenizer.json into flat tables and runs the pipeline on a backend.

The flow of an encode (all steps batch-wide arrays, no Python per row or token):
  batch -> words (added-token split + pre-tokenizer, count then fill) -> tokens per word (model,
  at capacity offsets) -> compaction -> [character offsets, ByteLevel trimming] -> template of
  special tokens -> RaggedEncoding (fast path) or Encoding objects (slow path).
"""
import os
import hashlib

import numpy as np

from . import batch as _batch
from . import decoders, spec as _spec
from .added_tokens import AddedTable
from .encoding import Encoding, RaggedEncoding, array_module as _xp
from .errors import InvalidInputError, NumbatokError
from . import models
from . import unicode_tables

_HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB_DIRS = [os.path.join(_HERE, "vocab"), os.path.join(os.path.dirname(_HERE), "vocab")]


def shipped_names():
    names = set()
    for d in VOCAB_DIRS:
        if os.path.isdir(d):
            names.update(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "tokenizer.json")))
    return sorted(names)


def resolve_path(name_or_path):
    """A shipped name, a tokenizer.json path, or a folder holding tokenizer.json -> file path."""
    p = os.fspath(name_or_path)
    if os.path.isdir(p):
        f = os.path.join(p, "tokenizer.json")
        if os.path.isfile(f):
            return f
        raise NumbatokError(f"{p}: folder has no tokenizer.json")
    if os.path.isfile(p):
        return p
    for d in VOCAB_DIRS:
        f = os.path.join(d, p, "tokenizer.json")
        if os.path.isfile(f):
            return f
    raise NumbatokError(
        f"{p!r} is neither a shipped tokenizer ({', '.join(shipped_names()) or 'none found'}) nor a path to a "
        "tokenizer.json or a folder holding one; numbatok does not download: fetch the file and pass its path")


def _resolve_device(device):
    if device not in ("auto", "cpu", "cuda"):
        raise NumbatokError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
    if device == "cpu":
        return "cpu"
    from .backends import gpu_available, simulator_enabled
    if device == "cuda" and simulator_enabled():
        return "cuda"  # the CUDA simulator: for tests of the launch path, never picked by "auto"
    ok = gpu_available()
    if device == "cuda" and not ok:
        raise NumbatokError("device='cuda' but no usable CUDA GPU was found (install numbatok[cuda12] or "
                            "numbatok[cuda13] and check the driver), or use device='cpu'")
    return "cuda" if ok else "cpu"


class Tokenizer:
    """A tokenizer.json, encoded and decoded exactly as the `tokenizers` package does."""

    def __init__(self, spec, device="auto", json_text=None):
        self.spec = spec
        self.device = _resolve_device(device)
        self._sha256 = hashlib.sha256(json_text.encode()).hexdigest() if json_text is not None else None
        self._build_tables()
        self._cuda = None

    # ---- loading ----
    @classmethod
    def from_str(cls, json_text, device="auto"):
        return cls(_spec.parse(json_text), device=device, json_text=json_text)

    @classmethod
    def from_file(cls, path, device="auto"):
        device = _resolve_device(device)  # a device problem is not the file's: report it first, plainly
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            spec = _spec.parse(text)
        except NumbatokError as e:
            raise type(e)(f"{path}: {e}") from None
        return cls(spec, device=device, json_text=text)

    @classmethod
    def from_pretrained(cls, name_or_path, device="auto"):
        """A name shipped with numbatok (see `numbatok.shipped_names()`) or a local path."""
        return cls.from_file(resolve_path(name_or_path), device=device)

    def _build_tables(self):
        s = self.spec
        m = s.model
        byte_level = s.pre_tokenizer.byte_level
        n_ids = max([*m.vocab.values(), *(a.id for a in s.added_tokens), -1]) + 1
        id_to_token = [None] * n_ids
        for tok, i in m.vocab.items():
            id_to_token[i] = tok
        for a in s.added_tokens:
            if id_to_token[a.id] is None:
                id_to_token[a.id] = a.content
        self._id_to_token = id_to_token
        self._vocab = dict(m.vocab)
        for a in s.added_tokens:
            self._vocab.setdefault(a.content, a.id)
        self._added_ids = {a.id for a in s.added_tokens}
        self._special_ids = np.zeros(n_ids, dtype=bool)
        for a in s.added_tokens:
            if a.special:
                self._special_ids[a.id] = True
        self._model = models.build_tables(m, byte_level, n_ids)
        self._unk_missing = m.unk_token is not None and self._model.unk_id < 0
        self._added = AddedTable(s.added_tokens)
        self._classes = unicode_tables.load()
        # decoder tables: rows 0..n_ids-1 for a token after another, n_ids.. for the first token
        blobs = [decoders.token_bytes(s.decoder, t, first) if t is not None else b""
                 for first in (False, True) for t in id_to_token]
        self._dec_offsets = np.zeros(2 * n_ids + 1, dtype=np.int64)
        np.cumsum([len(b) for b in blobs], out=self._dec_offsets[1:])
        self._dec_data = np.frombuffer(b"".join(blobs) or b"\0", dtype=np.uint8)
        self._n_ids = n_ids

    # ---- vocabulary ----
    @property
    def vocab_size(self):
        return len(self._vocab)

    def get_vocab_size(self, with_added_tokens=True):
        return len(self._vocab) if with_added_tokens else len(self.spec.model.vocab)

    def get_vocab(self):
        return dict(self._vocab)

    def token_to_id(self, token):
        return self._vocab.get(token)

    def id_to_token(self, i):
        return self._id_to_token[i] if 0 <= i < self._n_ids else None

    @property
    def sha256(self):
        """Hash of the tokenizer.json text this tokenizer was built from (None if built from a Spec)."""
        return self._sha256

    # ---- encode ----
    def _run(self, b, want_spans):
        if self._unk_missing:
            raise NumbatokError(f"model.unk_token {self.spec.model.unk_token!r} is not in the vocab: the "
                                "reference fails on any word that needs it; fix the file's unk_token")
        if self.device == "cuda":
            from .backends import cuda as backend
        else:
            from .backends import cpu as backend
        return backend.encode(self, b, want_spans)

    def _assemble(self, r, add_special_tokens, want_spans, max_length=None):
        """Raw per-token arrays -> final arrays with trimmed character offsets and special tokens.

        Works on numpy or CuPy arrays alike. max_length (right truncation of a single sequence,
        special tokens counted) cuts the sequence before the template adds its special tokens, as
        the reference does.
        """
        pp = self.spec.post_processor
        m = _xp(r["ids"])
        ids = r["ids"]
        row_tok = r["row_tok"]
        n = int(row_tok.shape[0]) - 1
        T = int(ids.shape[0])
        tok_row = _segment_ids(m, row_tok, T)
        tok_col = m.arange(T) - row_tok[:-1][tok_row]
        tok = {"ids": ids}
        if want_spans:
            cum = r["char_index"]
            base = cum[r["row_start"]][tok_row]
            st = cum[r["t_st"]] - base
            en = cum[r["t_en"]] - base
            if pp.trim_offsets:
                lead = r["t_lead"].astype(np.int64)
                trail = r["t_trail"].astype(np.int64)
                if pp.add_prefix_space:
                    first = (tok_col == 0) | (st == 0)
                    lead = m.where(first & (lead == 1), 0, lead)
                st = m.where(lead > 0, m.minimum(st + lead, en), st)
                en = m.where((trail > 0) & (en >= trail), m.maximum(en - trail, st), en)
            word_tok = r["word_tok"]
            tok_word = _segment_ids(m, word_tok, T)
            tok.update(st=st, en=en, word=tok_word - r["row_word"][:-1][tok_row],
                       span_st=r["t_st"], span_en=r["t_en"], added=r["t_added"])
        if add_special_tokens:
            items = pp.single
        else:  # no special tokens, but a template still sets the sequence's type id
            seq_item = [it for it in pp.single if it[0] == "seq"]
            items = [("seq", 0, seq_item[0][2] if "TemplateProcessing" in pp.kinds and seq_item else 0)]
        lens = row_tok[1:] - row_tok[:-1]
        if max_length is not None:
            n_special = sum(len(it[1]) for it in items if it[0] == "special")
            limit = max(int(max_length) - n_special, 0)
            keep = tok_col < limit
            tok = {k: v[keep] for k, v in tok.items()}
            tok_row = tok_row[keep]
            tok_col = tok_col[keep]
            lens = m.minimum(lens, limit)
        k_seq = [x[0] for x in items].index("seq")
        pre = [(i, it[2]) for it in items[:k_seq] for i in it[1]]
        post = [(i, it[2]) for it in items[k_seq + 1:] for i in it[1]]
        seq_type = items[k_seq][2]
        if pp.force_type_ids_zero:
            seq_type, pre, post = 0, [(i, 0) for i, _ in pre], [(i, 0) for i, _ in post]
        npre, npost = len(pre), len(post)
        new_off = m.zeros(n + 1, dtype=np.int64)
        m.cumsum(lens + npre + npost, out=new_off[1:])
        pos = new_off[:-1][tok_row] + npre + tok_col
        total = int(new_off[-1])

        def place(values, fill_pre, fill_post, dtype):
            a = m.empty(total, dtype=dtype)
            a[pos] = values
            for j in range(npre):
                a[new_off[:-1] + j] = fill_pre[j]
            for j in range(npost):
                a[new_off[1:] - npost + j] = fill_post[j]
            return a

        out = {"row_offsets": new_off}
        if npre == 0 and npost == 0:
            out["ids"] = tok["ids"].astype(np.int32, copy=False)
        else:
            out["ids"] = place(tok["ids"], [i for i, _ in pre], [i for i, _ in post], np.int32)
        if want_spans:
            z_pre, z_post = [0] * npre, [0] * npost
            out["offsets"] = m.stack([place(tok["st"], z_pre, z_post, np.int64),
                                      place(tok["en"], z_pre, z_post, np.int64)], axis=1)
            out["word_ids"] = place(tok["word"], [-1] * npre, [-1] * npost, np.int64)
            out["special_tokens_mask"] = place(m.zeros(tok["ids"].shape[0], np.uint8), [1] * npre, [1] * npost, np.uint8)
            out["type_ids"] = place(m.full(tok["ids"].shape[0], seq_type, np.uint8), [t for _, t in pre],
                                    [t for _, t in post], np.uint8)
            out["spans"] = (place(tok["span_st"], z_pre, z_post, np.int64),
                            place(tok["span_en"], z_pre, z_post, np.int64),
                            place(tok["added"], [2] * npre, [2] * npost, np.uint8))
        return out

    def encode_ragged(self, texts, add_special_tokens=True, return_offsets=False):
        """The fast path: a batch in, flat arrays out (see RaggedEncoding). No per-token Python objects.

        With return_offsets, also character offsets (rows x 2), type ids, special-token masks and word
        ids (-1 where the reference has None).
        """
        b = _batch.to_batch(texts)
        out = self._assemble(self._run(b, return_offsets), add_special_tokens, return_offsets)
        if not return_offsets:
            return RaggedEncoding(out["ids"], out["row_offsets"])
        return RaggedEncoding(out["ids"], out["row_offsets"], offsets=out["offsets"], type_ids=out["type_ids"],
                              special_tokens_mask=out["special_tokens_mask"], word_ids=out["word_ids"])

    def encode_batch(self, texts, add_special_tokens=True):
        """Reference-compatible Encoding objects, one per text. The slow path: it builds Python
        objects per token; use encode_ragged or __call__ for throughput."""
        if isinstance(texts, (str, bytes)):
            raise InvalidInputError("encode_batch takes a list of texts; use encode for a single text")
        b = _batch.to_batch(texts)
        out = _host(self._assemble(self._run(b, True), add_special_tokens, True))
        data = _host(b.data)
        ro = out["row_offsets"].tolist()
        ids = out["ids"].tolist()
        offs = out["offsets"].tolist()
        words = out["word_ids"].tolist()
        stm = out["special_tokens_mask"].tolist()
        tids = out["type_ids"].tolist()
        st, en, added = out["spans"]
        added_pos = np.flatnonzero(added == 1)
        i2t = self._id_to_token
        tokens = [i2t[i] for i in ids]
        for p in added_pos.tolist():  # added tokens show the text they matched (lstrip/rstrip spaces included)
            tokens[p] = bytes(data[st[p]:en[p]]).decode("utf-8")
        res = []
        for i in range(len(ro) - 1):
            a, z = ro[i], ro[i + 1]
            res.append(Encoding(ids[a:z], tokens[a:z], [tuple(o) for o in offs[a:z]], tids[a:z], stm[a:z],
                                [None if w < 0 else w for w in words[a:z]]))
        return res

    def encode(self, text, add_special_tokens=True):
        """One text -> Encoding (as `tokenizers.Tokenizer.encode`)."""
        if not isinstance(text, (str, bytes)):
            raise InvalidInputError(f"encode takes one str, not {type(text).__name__}; use encode_batch for lists")
        return self.encode_batch([text], add_special_tokens=add_special_tokens)[0]

    # ---- decode ----
    def decode_ragged(self, ids, row_offsets, skip_special_tokens=True):
        """Rows of ids -> list of str, with one gather over the decoder's byte table."""
        from .backends.cpu import gather_bytes
        ids = np.asarray(ids.get() if hasattr(ids, "get") else ids, dtype=np.int64)
        row_offsets = np.asarray(row_offsets.get() if hasattr(row_offsets, "get") else row_offsets, dtype=np.int64)
        keep = (ids >= 0) & (ids < self._n_ids)
        safe = np.where(keep, ids, 0)
        if skip_special_tokens:
            keep &= ~self._special_ids[safe]
        # the first kept token of each row reads the decoder's "first token" table
        row_of = np.searchsorted(row_offsets, np.arange(ids.shape[0]), side="right") - 1
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        first = keep & (kept_before[:-1] == kept_before[row_offsets[:-1]][row_of])
        data, offs = gather_bytes(self._dec_data, self._dec_offsets, safe + first * self._n_ids, keep, row_offsets)
        raw = data.tobytes()
        o = offs.tolist()
        return [raw[o[i]:o[i + 1]].decode("utf-8", "replace") for i in range(len(o) - 1)]

    def decode(self, ids, skip_special_tokens=True):
        ids = np.asarray(ids.get() if hasattr(ids, "get") else ids, dtype=np.int64).reshape(-1)
        return self.decode_ragged(ids, np.array([0, len(ids)], dtype=np.int64), skip_special_tokens)[0]

    def decode_batch(self, sequences, skip_special_tokens=True):
        if isinstance(sequences, RaggedEncoding):
            return self.decode_ragged(sequences.ids, sequences.row_offsets, skip_special_tokens)
        lens = [len(s) for s in sequences]
        row_offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=row_offsets[1:])
        flat = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1) for s in sequences]) if lens else np.zeros(0, np.int64)
        return self.decode_ragged(flat, row_offsets, skip_special_tokens)

    # ---- tensors ----
    def __call__(self, texts, padding=False, truncation=False, max_length=None, return_tensors=None,
                 add_special_tokens=True, pad_to_multiple_of=None):
        """transformers-style: a dict of input_ids and attention_mask, padded arrays when asked."""
        single = isinstance(texts, str)
        if truncation and max_length is None:
            raise NumbatokError("truncation=True needs max_length (the file sets no model maximum)")
        b = _batch.to_batch([texts] if single else texts)
        out = self._assemble(self._run(b, False), add_special_tokens, False,
                             max_length=max_length if truncation else None)
        r = RaggedEncoding(out["ids"], out["row_offsets"])
        if not padding and return_tensors is None:
            rows = r.to_list()
            res = {"input_ids": rows, "attention_mask": [[1] * len(x) for x in rows]}
            return {k: v[0] for k, v in res.items()} if single else res
        if not padding:
            lens = np.diff(r.row_offsets)
            if len(lens) and (lens != lens[0]).any():
                raise NumbatokError("rows have different lengths: pass padding=True to return tensors")
        width = None
        if padding == "max_length":
            if max_length is None:
                raise NumbatokError("padding='max_length' needs max_length")
            width = max_length
        if pad_to_multiple_of:
            w = width if width is not None else int(np.diff(r.row_offsets).max(initial=0))
            width = -(-w // pad_to_multiple_of) * pad_to_multiple_of
        pad_id = self._pad_id()
        ids, mask = r.to_padded(pad_id=pad_id, length=width)
        ids = ids.astype(np.int64)
        res = {"input_ids": ids, "attention_mask": mask}
        return {k: _to_tensor(v, return_tensors) for k, v in res.items()}

    def _pad_id(self):
        for name in ("<pad>", "[PAD]", "<|endoftext|>"):
            if name in self._vocab:
                return self._vocab[name]
        return 0

    def __repr__(self):
        return f"Tokenizer(model={type(self.spec.model).__name__[:-4]}, vocab_size={self.vocab_size}, device={self.device!r})"


def _segment_ids(m, seg_offsets, total):
    """Segment index of every element 0..total-1 given segment offsets (works for numpy and CuPy)."""
    return (m.searchsorted(seg_offsets, m.arange(total), side="right") - 1).astype(np.int64)


def _host(x):
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_host(v) for v in x)
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x


def _to_tensor(a, kind):
    if kind in (None, "np"):
        return a
    if kind == "torch":
        import torch
        return torch.from_dlpack(a) if not isinstance(a, np.ndarray) else torch.from_numpy(a)
    if kind == "cupy":
        import cupy
        return cupy.asarray(a)
    raise NumbatokError(f"return_tensors must be None, 'np', 'torch' or 'cupy', not {kind!r}")
