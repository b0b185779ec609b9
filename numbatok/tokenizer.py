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
from .backends import to_host
from . import decoders, spec as _spec
from .added_tokens import AddedTable
from .encoding import Encoding, RaggedEncoding, Rows, array_module as _xp, row_lists, without_gc
from ._numba import readonly_view as _readonly
from .errors import InvalidInputError, NumbatokError
from .kernels.word_cache import WordCache
from .postprocess import Padding, Truncation, apply_template, pad, single_parts, trim_offsets, truncate_pair
from . import models
from . import unicode_tables

_HERE = os.path.dirname(os.path.abspath(__file__))
# Below this many bytes per CPU thread, device="auto" encodes on the CPU even when a GPU is present.
# Measured on an H200 machine with 16 cores (benchmarks/bench.py --latency, gpt2): a GPU call from host
# arrays costs ~4.5 ms before its first byte, then ~0.5 ms a MB; the CPU ~1.1 ms a MB on 16 threads,
# so the GPU wins from ~8-16 MB there (one 10 MB document: GPU 20 ms, CPU 19 ms); fewer cores move
# the crossover down in proportion.
AUTO_GPU_MIN_BYTES_PER_THREAD = 1 << 20
SLICE_BYTES = 1 << 28  # the CPU fast path encodes larger batches slice by slice (bounded memory)
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


def _cpu():
    """The CPU backend, imported at first use (`import numbatok` stays light) and then looked up
    once: an import statement in the per-call path cost ~2 us of a one-row call."""
    global _CPU
    if _CPU is None:
        from .backends import cpu as _CPU
    return _CPU


_CPU = None


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

    def __init__(self, spec, device="auto", json_text=None, gpu_memory_budget=None):
        self.spec = spec
        self.device = _resolve_device(device)
        # device bytes one GPU pass may hold; larger batches run in groups of rows (None: half the GPU)
        self.gpu_memory_budget = _budget(gpu_memory_budget)
        # device="auto" on a GPU machine still encodes small calls on the CPU (launches and copies
        # cost more than they save there); see AUTO_GPU_MIN_BYTES_PER_THREAD.
        self._auto = device == "auto"
        self._sha256 = hashlib.sha256(json_text.encode()).hexdigest() if json_text is not None else None
        self._build_tables()
        self._cuda = None
        self._truncation = spec.truncation
        self._padding = spec.padding

    def __getstate__(self):
        # What calls derive from the tables is made again after unpickling: pickle hands read-only
        # arrays back writable, and every kernel would compile a second specialization for them.
        state = self.__dict__.copy()
        state.pop("_ids_consts", None)
        return state

    # ---- loading ----
    @classmethod
    def from_str(cls, json_text, device="auto", gpu_memory_budget=None):
        return cls(_spec.parse(json_text), device=device, json_text=json_text, gpu_memory_budget=gpu_memory_budget)

    @classmethod
    def from_file(cls, path, device="auto", gpu_memory_budget=None):
        _resolve_device(device)  # a device problem is not the file's: report it first, plainly
        _budget(gpu_memory_budget)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            spec = _spec.parse(text)
        except NumbatokError as e:
            raise type(e)(f"{path}: {e}") from None
        return cls(spec, device=device, json_text=text, gpu_memory_budget=gpu_memory_budget)

    @classmethod
    def from_pretrained(cls, name_or_path, device="auto", gpu_memory_budget=None):
        """A name shipped with numbatok (see `numbatok.shipped_names()`) or a local path.

        gpu_memory_budget: bytes of GPU memory one encode may work in (default: half the GPU's). A
        larger batch is encoded in groups of whole rows, one after another, and the results joined."""
        return cls.from_file(resolve_path(name_or_path), device=device, gpu_memory_budget=gpu_memory_budget)

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
        self._norm = s.normalizer
        normalized = self._normalized_added_tokens()
        # as the reference, id_to_token and decode show normalized=true added tokens in their normalized form
        # (Encoding.tokens keep the model's strings)
        self._decode_tokens = list(id_to_token) if normalized else id_to_token
        for i, content in normalized.items():
            self._decode_tokens[i] = content
        self._vocab = dict(m.vocab)
        for a in s.added_tokens:
            self._vocab.setdefault(a.content, a.id)
        self._added_ids = {a.id for a in s.added_tokens}
        self._special_ids = np.zeros(n_ids, dtype=bool)
        for a in s.added_tokens:
            if a.special:
                self._special_ids[a.id] = True
        special = {a.content for a in s.added_tokens if a.special}
        for i, content in normalized.items():  # the reference skips by the decoded string
            self._special_ids[i] = content in special
        self._model = models.build_tables(m, byte_level, n_ids)
        self._unk_missing = m.unk_token is not None and self._model.unk_id < 0
        self._word_cache = WordCache()
        self._added = AddedTable(s.added_tokens, normalized=normalized)
        self._classes = unicode_tables.load()
        self._decoder = None  # built on the first decode: a tenth of a second that encoding never needs
        self._n_ids = n_ids
        self._parts = {}  # (post-processor, add_special_tokens) -> `single_parts`

    def _decoder_table(self):
        """(bytes, offsets) of every token as the decoder writes it: rows 0..n_ids-1 for a token after
        another, n_ids.. for the first token of a row, and row 2 * n_ids, U+FFFD, for each byte of a
        ByteFallback run that is not UTF-8."""
        if self._decoder is None:
            dec = self.spec.decoder
            blobs = [decoders.token_bytes(dec, t, first) if t is not None else b""
                     for first in (False, True) for t in self._decode_tokens] + [decoders.FFFD]
            offsets = np.zeros(2 * self._n_ids + 2, dtype=np.int64)
            np.cumsum([len(b) for b in blobs], out=offsets[1:])
            self._decoder = (np.frombuffer(b"".join(blobs), dtype=np.uint8), offsets)
            # the byte each ByteFallback token stands for, else -1 (None: the decoder has no ByteFallback)
            self._byte_of = np.array([decoders.byte_value(dec, t) if t is not None else -1
                                      for t in self._decode_tokens], dtype=np.int16) if dec.byte_fallback else None
            byte_ids = {} if self._byte_of is None else {
                i: int(self._byte_of[i]) for i in np.flatnonzero(self._byte_of >= 0).tolist()}
            self._decode_short_tables = (blobs, self._special_ids.tolist(), byte_ids)  # (for `_decode_short`)
        return self._decoder

    def _normalized_added_tokens(self):
        """{id: normalized content} of the normalized=true added tokens the normalizer changes."""
        tokens = [a for a in self.spec.added_tokens if a.normalized]
        if self._norm is None or not tokens:
            return {}
        contents = self._norm.normalize_strs([a.content for a in tokens])
        return {a.id: c for a, c in zip(tokens, contents) if c != a.content}

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
        return self._decode_tokens[i] if 0 <= i < self._n_ids else None

    @property
    def sha256(self):
        """Hash of the tokenizer.json text this tokenizer was built from (None if built from a Spec)."""
        return self._sha256

    # ---- encode ----
    def _run_checks(self):
        if self._unk_missing:
            raise NumbatokError(f"model.unk_token {self.spec.model.unk_token!r} is not in the vocab: the "
                                "reference fails on any word that needs it; fix the file's unk_token")

    def _run(self, b, want_spans, device=None):
        self._run_checks()
        if (device or self._device_for(b)) == "cuda":
            from .backends import cuda as backend
            return backend.encode(self, b, want_spans)
        if not want_spans:
            ids, row_off = self._run_ids(b)
            return {"ids": ids, "row_tok": row_off}
        return _cpu().encode(self, b, want_spans)

    def _device_for(self, b):
        if self.device == "cuda" and self._auto and isinstance(b.data, np.ndarray):
            import numba
            if b.data.shape[0] < AUTO_GPU_MIN_BYTES_PER_THREAD * numba.get_num_threads():
                return "cpu"
        return self.device

    def _row_groups(self, batches, want_spans):
        """Row ranges [lo, hi) to run on the GPU one after another so that each pass's working memory
        stays within gpu_memory_budget (one range when everything fits). A row is never split: one
        row larger than a group's share runs alone."""
        from .backends import cuda
        cpu = _cpu()
        n = len(batches[0])
        budget = self.gpu_memory_budget or cuda.default_budget()
        limit = max(budget // cuda.work_per_byte(self, want_spans), 1)
        if n == 0 or sum(int(b.data.shape[0]) for b in batches) <= limit:
            return [(0, n)]  # (decided from host-side shapes: no copy of device offsets back)
        sizes = sum(np.diff(_host(b.offsets)) for b in batches)
        bounds = cpu.row_groups(np.ascontiguousarray(sizes, np.int64), limit).tolist()
        return list(zip(bounds[:-1], bounds[1:]))

    def _runs_assembled(self, batches, add_special_tokens, want_spans, truncation):
        """`_assemble` over one run per batch (texts, and their pairs); on the GPU in groups of rows
        (`_row_groups`), whose outputs are joined."""
        device = self._device_for(batches[0])
        if device == "cpu" and len(batches) == 1 and truncation is None:
            out = (self._spans_assembled if want_spans else self._ids_assembled)(batches[0], add_special_tokens)
            if out is not None:
                return out
        groups = self._row_groups(batches, want_spans) if device == "cuda" else [(0, len(batches[0]))]
        if len(groups) == 1:
            return self._assemble([self._run(b, want_spans, device) for b in batches], add_special_tokens,
                                  want_spans, truncation)
        return _join_outputs([self._assemble([self._run(_batch.rows(b, lo, hi), want_spans, device)
                                              for b in batches], add_special_tokens, want_spans, truncation)
                              for lo, hi in groups])

    def _run_ids(self, b):
        """CPU ids and row token offsets: the fused kernel with the word cache, over slices of about
        SLICE_BYTES so that its scratch (a few times the slice) stays bounded for any input size."""
        cpu = _cpu()
        n, off = len(b), b.offsets
        total = int(off[-1] - off[0]) if n else 0
        if total <= SLICE_BYTES:
            return cpu.encode_ids(self, b)
        cuts = np.searchsorted(off, off[0] + np.arange(SLICE_BYTES, total, SLICE_BYTES), side="right") - 1
        bounds = np.unique(np.concatenate(([0], cuts, [n])))
        parts = [cpu.encode_ids(self, _batch.Batch(b.data[off[lo]:off[hi]], off[lo:hi + 1] - off[lo]))
                 for lo, hi in zip(bounds[:-1], bounds[1:])]
        ids = np.concatenate([p[0] for p in parts])
        lens = np.concatenate([np.diff(p[1]) for p in parts])
        row_off = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=row_off[1:])
        return ids, row_off

    def _single_template(self):
        """(whether the single-sequence template holds the sequence once, its special tokens' ids before
        it, after it, the type id of every token with them and without them: None where they differ),
        read once per template: every ids call asks."""
        pp = self.spec.post_processor
        items = pp.single
        got = self.__dict__.get("_single")
        if got is None or got[0] is not items or got[1] != pp.force_type_ids_zero:
            seq = [i for i, it in enumerate(items) if it[0] == "seq"]
            at = seq[0] if seq else len(items)
            pre = np.array([t for it in items[:at] if it[0] == "special" for t in it[1]], np.int32)
            post = np.array([t for it in items[at + 1:] if it[0] == "special" for t in it[1]], np.int32)
            types = [{0 if pp.force_type_ids_zero else it[2] for it in items if keep or it[0] == "seq"}
                     for keep in (True, False)]
            types = [t.pop() if len(t) == 1 else None for t in types]
            got = self.__dict__["_single"] = (items, pp.force_type_ids_zero, len(seq) == 1, pre, post, *types)
        return got[2:]

    def _add_specials(self, ids, row_off, add_special_tokens):
        """The single-sequence template's special tokens around each row (ids-only fast path)."""
        _, pre, post, _, _ = self._single_template()
        if not add_special_tokens or not (pre.shape[0] or post.shape[0]):
            return ids, row_off
        cpu = _cpu()
        return (cpu.wrap_rows if ids.shape[0] >= cpu.SERIAL_CALL else cpu.wrap_rows_serial)(ids, row_off, pre, post)

    def _ids_assembled(self, b, add_special_tokens):
        """What `_assemble` makes of one batch without spans or truncation, from the ids-only run, when
        the template gives every token one type id (None otherwise): its numpy steps were most of a
        small `__call__`."""
        seq, pre, post, with_specials, alone = self._single_template()
        type_id = with_specials if add_special_tokens else alone
        if not seq or type_id is None:
            return None
        r = self._run(b, False, "cpu")
        ids, row_off = self._add_specials(r["ids"], r["row_tok"], add_special_tokens)
        mask = np.zeros(ids.shape[0], np.uint8)
        if add_special_tokens:
            for k in range(pre.shape[0]):
                mask[row_off[:-1] + k] = 1
            for k in range(post.shape[0]):
                mask[row_off[1:] - 1 - k] = 1
        return {"row_offsets": row_off, "ids": ids, "special_tokens_mask": mask,
                "type_ids": np.full(ids.shape[0], type_id, np.uint8)}

    def _spans_assembled(self, b, add_special_tokens):
        """What `_assemble` makes of one batch with spans and without truncation, from the token table
        (`cpu.spans`, ByteLevel's trimming done there) in compiled steps, when the template gives every
        token one type id (None otherwise)."""
        seq, pre, post, with_specials, alone = self._single_template()
        type_id = with_specials if add_special_tokens else alone
        if not seq or type_id is None:
            return None
        self._run_checks()
        cpu = _cpu()
        _, f, row_tok = cpu.spans(self, b, self._trim(False))
        if not add_special_tokens:
            pre = post = pre[:0]
        wrap = cpu.wrap_table if f.shape[1] >= cpu.SMALL_TABLE else cpu.wrap_table_serial
        row_off, ids, offsets, special, words = wrap(f, row_tok, pre, post)
        cpu.give_back_table(f)
        return {"row_offsets": row_off, "ids": ids, "special_tokens_mask": special, "offsets": offsets,
                "word_ids": words, "type_ids": np.full(ids.shape[0], type_id, np.uint8)}

    def _id_lists(self, b, add_special_tokens):
        """`__call__`'s lists (no padding, tensors, pairs, truncation or offsets) straight from the ids-only
        run, when the template gives every token one type id (None otherwise): the arrays
        `_ids_assembled` makes for tensors were half of a one-text call."""
        seq, _, _, with_specials, alone = self._single_template()
        type_id = with_specials if add_special_tokens else alone
        if not seq or type_id is None or self._device_for(b) != "cpu":
            return None
        r = self._run(b, False, "cpu")
        ids, row_off = self._add_specials(r["ids"], r["row_tok"], add_special_tokens)
        lists = (ids.tolist(), row_off.tolist(), type_id)
        return without_gc(_id_row_lists, *lists) if len(row_off) > 64 else _id_row_lists(*lists)

    def _one_text_lists(self, b, add_special_tokens):
        """`tok(text)`'s lists for one small text (batch `b`) on the CPU, in the fewest steps (None where
        the general path applies): through `_id_lists` and its batch layers this call was 1.4x
        `tokenizers.encode`."""
        seq, pre, post, with_specials, alone = self._single_template()
        type_id = with_specials if add_special_tokens else alone
        cpu = _cpu()
        n = b.data.shape[0]
        if not seq or type_id is None or not cpu.serial_ids_call(n) or \
                (self.device != "cpu" and self._device_for(b) != "cpu"):
            return None
        self._run_checks()
        if not add_special_tokens:
            pre = post = cpu._NONE32
        ids = cpu._serial_ids(self, b.data, b.offsets, n, pre, post)[0].tolist()
        return {"input_ids": ids, "token_type_ids": [type_id] * len(ids), "attention_mask": [1] * len(ids)}

    def _tokens(self, r, want_spans):
        """Per-token arrays of one raw run (numpy or CuPy): ids, row, column, per-row lengths, and with
        want_spans character offsets (untrimmed), trimming inputs and word indices."""
        m = _xp(r["ids"])
        row_tok = r["row_tok"]
        T = int(r["ids"].shape[0])
        row = _segment_ids(m, row_tok, T)
        p = {"ids": r["ids"], "row": row, "col": m.arange(T) - row_tok[:-1][row], "lens": row_tok[1:] - row_tok[:-1]}
        if want_spans:
            cum = r["char_index"]
            base = cum[r["row_start"]][row]
            p.update(st=cum[r["t_st"]] - base, en=cum[r["t_en"]] - base, lead=r["t_lead"].astype(np.int64),
                     trail=r["t_trail"].astype(np.int64),
                     word=_segment_ids(m, r["word_tok"], T) - r["row_word"][:-1][row])
        return p

    def _keep_lengths(self, m, lens, limit, strategy):
        """Tokens each sequence keeps per row under truncation to `limit` (the reference's rules)."""
        if len(lens) == 1:
            if strategy == "only_second" and bool((lens[0] > limit).any()):
                raise NumbatokError("truncation strategy 'only_second' needs pairs of sequences")
            return [m.minimum(lens[0], limit)]
        n1, n2 = lens
        total = n1 + n2
        over = total > limit
        if strategy == "longest_first":
            short = m.minimum(n1, n2)
            k_long = m.where(short > limit, short, m.maximum(short, limit - short))
            k_short = short
            both = k_short + k_long > limit
            k_short = m.where(both, limit // 2, k_short)
            k_long = m.where(both, limit // 2 + limit % 2, k_long)
            swap = n1 > n2
            k1, k2 = m.where(swap, k_long, k_short), m.where(swap, k_short, k_long)
            return [m.where(over, k1, n1), m.where(over, k2, n2)]
        target = 0 if strategy == "only_first" else 1
        remove = m.maximum(total - limit, 0)
        if bool((over & (lens[target] <= remove)).any()):
            raise NumbatokError(f"truncation: a sequence is too short to remove the tokens needed with strategy "
                                f"{strategy!r}")
        out = [n1, n2]
        out[target] = m.where(over, lens[target] - remove, lens[target])
        return out

    def _assemble(self, runs, add_special_tokens, want_spans, truncation=None):
        """Raw runs (one per sequence: 1, or 2 for pairs) -> final flat arrays: truncation (no
        overflows: that is the slow path's), ByteLevel trimming, then the template's special tokens
        and type ids. Works on numpy or CuPy arrays alike."""
        pp = self.spec.post_processor
        m = _xp(runs[0]["ids"])
        parts = [self._tokens(r, want_spans) for r in runs]
        n = int(parts[0]["lens"].shape[0])
        template = pp.single if len(parts) == 1 else pp.pair
        items = template if add_special_tokens else [it for it in template if it[0] == "seq"]
        lens = [p["lens"] for p in parts]
        if truncation is not None:
            n_special = sum(len(it[1]) for it in items if it[0] == "special")
            limit = truncation.max_length - n_special
            if limit < 0:
                raise NumbatokError(f"truncation max_length {truncation.max_length} is smaller than the "
                                    f"{n_special} special tokens the post-processor adds")
            keep_n = self._keep_lengths(m, lens, limit, truncation.strategy)
            for p, full, k in zip(parts, lens, keep_n):
                lo = (full - k) if truncation.direction == "left" else m.zeros_like(full)
                sel = (p["col"] >= lo[p["row"]]) & (p["col"] < (lo + k)[p["row"]])
                shifted = p["col"] - lo[p["row"]]
                for key in list(p):
                    if key != "lens":
                        p[key] = p[key][sel]
                p["col"] = shifted[sel]
                p["lens"] = k
            lens = keep_n
        if want_spans and pp.trim_offsets:
            for p in parts:
                lead = p["lead"]
                if pp.add_prefix_space:
                    lead = m.where(((p["col"] == 0) | (p["st"] == 0)) & (lead == 1), 0, lead)
                p["st"] = m.where(lead > 0, m.minimum(p["st"] + lead, p["en"]), p["st"])
                p["en"] = m.where((p["trail"] > 0) & (p["en"] >= p["trail"]), m.maximum(p["en"] - p["trail"], p["st"]),
                                  p["en"])
        # row layout: template items one after another
        item_len = [lens[it[1]] if it[0] == "seq" else len(it[1]) for it in items]
        row_len = sum(item_len) if items else m.zeros(n, np.int64)
        new_off = m.zeros(n + 1, dtype=np.int64)
        m.cumsum(row_len + m.zeros(n, np.int64), out=new_off[1:])
        total = int(new_off[-1])
        out = {"row_offsets": new_off, "ids": m.empty(total, np.int32), "special_tokens_mask": m.ones(total, np.uint8),
               "type_ids": m.empty(total, np.uint8)}
        if want_spans:
            out.update(offsets=m.zeros((total, 2), np.int64), word_ids=m.full(total, -1, np.int64))
        start = new_off[:-1]
        for it, length in zip(items, item_len):
            type_id = 0 if pp.force_type_ids_zero else it[2]
            if it[0] == "seq":
                p = parts[it[1]]
                pos = start[p["row"]] + p["col"]
                out["ids"][pos] = p["ids"]
                out["special_tokens_mask"][pos] = 0
                out["type_ids"][pos] = type_id
                if want_spans:
                    out["offsets"][pos, 0] = p["st"]
                    out["offsets"][pos, 1] = p["en"]
                    out["word_ids"][pos] = p["word"]
            else:
                for k, tid in enumerate(it[1]):
                    out["ids"][start + k] = tid
                    out["type_ids"][start + k] = type_id
            start = start + length
        return out

    def encode_ragged(self, texts, add_special_tokens=True, return_offsets=False):
        """The fast path: a batch in, flat arrays out (see RaggedEncoding). No per-token Python objects.

        With return_offsets, also character offsets (rows x 2), type ids, special-token masks and word
        ids (-1 where the reference has None).
        """
        b = _batch.to_batch(texts)
        seq, pre, post, _, _ = self._single_template()
        if not return_offsets and self._truncation is None and seq and self._device_for(b) == "cpu":
            cpu = _cpu()
            off = b.offsets
            total = int(off[-1]) - int(off[0])
            if cpu.small_ids_call(self, total, off.shape[0] - 1):  # (one compiled step, the template's tokens in it)
                self._run_checks()
                if not add_special_tokens:
                    pre = post = cpu._NONE32
                return RaggedEncoding(*cpu._serial_ids(self, _readonly(b.data), _readonly(off), total, pre, post))
            r = self._run(b, False)
            return RaggedEncoding(*self._add_specials(r["ids"], r["row_tok"], add_special_tokens))
        out = self._runs_assembled([b], add_special_tokens, return_offsets, self._truncation)
        if not return_offsets:
            return RaggedEncoding(out["ids"], out["row_offsets"])
        return RaggedEncoding(out["ids"], out["row_offsets"], offsets=out["offsets"], type_ids=out["type_ids"],
                              special_tokens_mask=out["special_tokens_mask"], word_ids=out["word_ids"])

    def _raw_encodings(self, texts, wrap=None):
        """Each text encoded alone (no special tokens): Encoding objects carrying what truncation,
        trimming and templates need. Their character offsets are trimmed already (ByteLevel's
        trim_offsets) unless truncation is set, which must cut them first. With `wrap` (the
        template's `single_parts`, when nothing is truncated), the final encodings instead."""
        b = _batch.to_batch(texts)
        device = self._device_for(b)
        if device == "cuda":
            groups = self._row_groups([b], True)
            if len(groups) > 1:
                return [e for lo, hi in groups for e in self._raw_encodings(_batch.rows(b, lo, hi), wrap)]
        cpu = _cpu()
        # (offsets trimmed here, in the compiled table, unless truncation is to cut the encodings first)
        trim = self._trim(self._truncation is not None)
        if device == "cuda":
            r = _host(self._run(b, True, device))
            text, f, ro = r["text"], cpu.fields(r, trim), r["row_tok"]
        else:
            self._run_checks()
            text, f, ro = cpu.spans(self, b, trim)
        if wrap is not None:  # (the final encodings, their lists made when read)
            rows = self._rows(text, f, ro, wrap)
            return [Encoding.of_row(rows, k) for k in range(len(rows.ro) - 1)]
        added, added_text = _added_text(text, f)
        ro = ro.tolist()
        i2t = self._id_to_token
        ids, st, en, words = f[:4].tolist()  # (the table's other rows only where they are needed)
        tokens = [i2t[i] for i in ids]
        for p, shown in zip(added.tolist(), added_text):  # added tokens show the text they matched
            tokens[p] = shown
        lead, trail = f[4:6].tolist() if not trim else ((), ())
        cpu.give_back_table(f)
        offsets = list(zip(st, en))
        out = []
        for k in range(len(ro) - 1):
            a, z = ro[k], ro[k + 1]
            e = Encoding(ids[a:z], tokens[a:z], offsets[a:z], [0] * (z - a), [0] * (z - a), words[a:z])
            if not trim:
                e._lead, e._trail = lead[a:z], trail[a:z]
            out.append(e)
        return out

    def _rows(self, text, f, ro, wrap):
        """The `Rows` that a run's encodings make their lists from (`spans`' text, table and row offsets,
        the template's `single_parts`); the table is given back."""
        added, added_text = _added_text(text, f)
        cpu = _cpu()
        # (a table under KEEP_MIN entries is not kept for the next call: read in place)
        rows = Rows(np.array(f[:4]) if f.size >= cpu.KEEP_MIN else f[:4], ro.tolist(), added, added_text,
                    self._id_to_token, wrap)
        cpu.give_back_table(f)
        return rows

    def _encode_one(self, text, add_special_tokens):
        """`encode` of one str on the CPU with nothing to truncate or pad: `_raw_encodings`' steps without
        a batch's layers (they were an eighth of a short sentence's call)."""
        self._run_checks()
        text, f, ro = _cpu().spans(self, _batch.to_batch(text), self._trim(False))
        return Encoding.of_row(self._rows(text, f, ro, self._single_parts(add_special_tokens)), 0)

    def _trim(self, truncated):
        """`token_table`'s trim for this post-processor: 0 none (or truncation must cut the offsets
        first), 1 ByteLevel's trim_offsets, 2 the same with add_prefix_space."""
        pp = self.spec.post_processor
        return 0 if not pp.trim_offsets or truncated else 2 if pp.add_prefix_space else 1

    def _post_process(self, a, b, add_special_tokens):
        pp = self.spec.post_processor
        if self._truncation is not None:
            t = self._truncation
            n_added = self.num_special_tokens_to_add(b is not None) if add_special_tokens else 0
            if n_added:
                if t.max_length < n_added:
                    raise NumbatokError(f"truncation max_length {t.max_length} is smaller than the {n_added} special "
                                        "tokens the post-processor adds")
                t = Truncation(t.max_length - n_added, t.stride, t.strategy, t.direction)
            a, b = truncate_pair(a, b, t)
        if pp.trim_offsets and self._truncation is not None:  # (otherwise trimmed by `_raw_encodings`)
            for e in (a, b):
                if e is not None:
                    trim_offsets(e, pp.add_prefix_space)
        return apply_template(pp, [a] if b is None else [a, b], add_special_tokens, self.id_to_token)

    def encode_batch(self, inputs, add_special_tokens=True):
        """Reference-compatible Encoding objects, one per input (a text, or a (text, pair) tuple), with
        truncation, overflowing pieces and padding as configured. The slow path: it builds Python
        objects per token; use encode_ragged or __call__ for throughput."""
        if isinstance(inputs, (str, bytes)):
            raise InvalidInputError("encode_batch takes a list of inputs; use encode for a single text")
        inputs = list(inputs)
        pairs = [x if isinstance(x, (tuple, list)) else (x, None) for x in inputs]
        for i, p in enumerate(pairs):
            if len(p) != 2:
                raise InvalidInputError(f"batch item {i}: a pair must be (text, text_pair), got {len(p)} items")
        firsts = [p[0] for p in pairs]
        seconds = [p[1] for p in pairs if p[1] is not None]
        # (the cycle collector's passes over every tuple and list made so far were half of 8,192 paragraphs' time)
        return without_gc(self._encodings, pairs, firsts, seconds, add_special_tokens)

    def _encodings(self, pairs, firsts, seconds, add_special_tokens):
        wrap = None
        if not seconds and self._truncation is None and pairs:  # (nothing to cut: the template at once)
            wrap = self._single_parts(add_special_tokens)
        if wrap is not None:
            out = self._raw_encodings(firsts, wrap)
            if self._padding is not None:
                pad(out, self._padding)
            return out
        raw = self._raw_encodings(firsts + seconds) if pairs else []
        second_of = iter(raw[len(firsts):])
        out = []
        for i, p in enumerate(pairs):
            b = None
            if p[1] is not None:
                b = next(second_of)
                b.type_ids = [1] * len(b.ids)
            out.append(self._post_process(raw[i], b, add_special_tokens))
        if self._padding is not None:
            pad(out, self._padding)
        return out

    def encode(self, sequence, pair=None, add_special_tokens=True):
        """One text (and optionally its pair) -> Encoding, as `tokenizers.Tokenizer.encode`."""
        if not isinstance(sequence, (str, bytes)) or not (pair is None or isinstance(pair, (str, bytes))):
            raise InvalidInputError("encode takes one str (and an optional str pair); use encode_batch for lists")
        if pair is None and type(sequence) is str and self.device == "cpu" and self._truncation is None and \
                self._padding is None:
            return self._encode_one(sequence, add_special_tokens)
        if pair is None:  # (one text: none of a batch's lists of pairs)
            return self._encodings([(sequence, None)], [sequence], [], add_special_tokens)[0]
        return self.encode_batch([(sequence, pair)], add_special_tokens)[0]

    def _single_parts(self, add_special_tokens):
        """`single_parts` of this tokenizer's template, made once per post-processor and flag."""
        pp = self.spec.post_processor
        key = (id(pp), bool(add_special_tokens))
        if key not in self._parts:
            self._parts[key] = single_parts(pp, add_special_tokens, self.id_to_token)
        return self._parts[key]

    # ---- truncation and padding ----
    def enable_truncation(self, max_length, stride=0, strategy="longest_first", direction="right"):
        n_added = self.num_special_tokens_to_add(False)
        if int(max_length) >= n_added and int(max_length) - n_added < int(stride):
            raise NumbatokError(f"truncation stride {stride} is greater than the effective max length "
                                f"{int(max_length) - n_added} (max_length {max_length} - {n_added} special tokens)")
        self._truncation = Truncation(int(max_length), int(stride), strategy, direction)

    def no_truncation(self):
        self._truncation = None

    @property
    def truncation(self):
        return None if self._truncation is None else self._truncation.as_dict()

    def enable_padding(self, direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]", length=None,
                       pad_to_multiple_of=None):
        self._padding = Padding(direction, int(pad_id), int(pad_type_id), pad_token, length, pad_to_multiple_of)

    def no_padding(self):
        self._padding = None

    @property
    def padding(self):
        return None if self._padding is None else self._padding.as_dict()

    def num_special_tokens_to_add(self, is_pair=False):
        items = self.spec.post_processor.pair if is_pair else self.spec.post_processor.single
        return sum(len(it[1]) for it in items if it[0] == "special")

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
        table = self._decoder_table()
        rows = safe + first * self._n_ids
        if self._byte_of is not None:
            rows[decoders.invalid_byte_runs(self._byte_of, safe, keep, row_offsets)] = 2 * self._n_ids
        data, offs = gather_bytes(*table, rows, keep, row_offsets)
        raw = data.tobytes()
        o = offs.tolist()
        texts = [raw[o[i]:o[i + 1]].decode("utf-8", "replace") for i in range(len(o) - 1)]
        dec = self.spec.decoder
        return [decoders.finish(dec, t) for t in texts] if dec.row_steps else texts

    def decode(self, ids, skip_special_tokens=True):
        if type(ids) is list and len(ids) <= SHORT_DECODE:
            text = self._decode_short(ids, skip_special_tokens)
            if text is not None:
                return text
        ids = np.asarray(ids.get() if hasattr(ids, "get") else ids, dtype=np.int64).reshape(-1)
        return self.decode_ragged(ids, np.array([0, len(ids)], dtype=np.int64), skip_special_tokens)[0]

    def _decode_short(self, ids, skip_special_tokens):
        """`decode` of a short list of ids, token by token in Python: `decode_ragged`'s array steps took
        18 us for a sentence against the reference's 1.4, and a generation loop decodes after every
        token. None for anything but ints in range of a list index (the array path says what is wrong)."""
        self._decoder_table()
        blobs, special, byte_ids = self._decode_short_tables
        n = self._n_ids
        first = n  # (the first kept token reads the decoder's first-token bytes, rows n.. of the table)
        parts = []
        run = []  # (the bytes of the ByteFallback tokens since the last other kept token; only Sequence
        #          decoders have them, whose first-token rows are the others)
        try:
            for i in ids:
                if 0 <= i < n and not (skip_special_tokens and special[i]):
                    if i in byte_ids:
                        run.append(byte_ids[i])
                        continue
                    if run:
                        parts.append(decoders.byte_run(run))
                        run = []
                    parts.append(blobs[i + first])
                    first = 0
        except TypeError:
            return None
        if run:
            parts.append(decoders.byte_run(run))
        text = b"".join(parts).decode("utf-8", "replace")
        dec = self.spec.decoder
        return decoders.finish(dec, text) if dec.row_steps else text

    def decode_batch(self, sequences, skip_special_tokens=True):
        if isinstance(sequences, RaggedEncoding):
            return self.decode_ragged(sequences.ids, sequences.row_offsets, skip_special_tokens)
        lens = [len(s) for s in sequences]
        # (few ids, as `decode`; the array steps' fixed cost per row moves the break-even up ~24 ids a row)
        if sum(lens) <= SHORT_DECODE + 24 * len(lens) and all(type(s) is list for s in sequences):
            texts = [self._decode_short(s, skip_special_tokens) for s in sequences]
            if None not in texts:
                return texts
        row_offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=row_offsets[1:])
        flat = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1) for s in sequences]) if lens else np.zeros(0, np.int64)
        return self.decode_ragged(flat, row_offsets, skip_special_tokens)

    # ---- tensors ----
    def __call__(self, text, text_pair=None, padding=False, truncation=False, max_length=None, stride=0,
                 return_tensors=None, return_offsets_mapping=False, add_special_tokens=True, pad_to_multiple_of=None,
                 padding_side="right"):
        """transformers-style: input_ids, token_type_ids, attention_mask (and offset_mapping), built on
        the device that ran the tokenizer. padding: False, True/"longest" or "max_length"; truncation:
        False, True/"longest_first", "only_first" or "only_second" (overflowing windows are the slow
        path's: encode_batch)."""
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        pairs = None if text_pair is None else ([text_pair] if isinstance(text_pair, str) else list(text_pair))
        if pairs is not None and len(pairs) != len(texts):
            raise InvalidInputError(f"{len(texts)} texts but {len(pairs)} text pairs")
        trunc = None
        if truncation not in (False, None, "do_not_truncate"):
            if max_length is None:
                raise NumbatokError("truncation needs max_length (numbatok does not know the model's maximum)")
            trunc = Truncation(int(max_length), int(stride), "longest_first" if truncation is True else truncation)
        batches = [_batch.to_batch(texts)] + ([_batch.to_batch(pairs)] if pairs is not None else [])
        plain = (padding in (False, None, "do_not_pad") and return_tensors is None and pairs is None and trunc is None
                 and not return_offsets_mapping)
        if plain and single:
            res = self._one_text_lists(batches[0], add_special_tokens)
            if res is not None:
                return res
        if plain:
            res = self._id_lists(batches[0], add_special_tokens)
            if res is not None:
                return {k: v[0] for k, v in res.items()} if single else res
        out = self._runs_assembled(batches, add_special_tokens, return_offsets_mapping, trunc)
        fields = {"input_ids": out["ids"], "token_type_ids": out["type_ids"]}
        if return_offsets_mapping:
            fields["offset_mapping"] = out["offsets"]
        if padding in (False, None, "do_not_pad"):
            lens = out["row_offsets"][1:] - out["row_offsets"][:-1]
            if return_tensors is None:  # (lists cut from one list each: np.split was a fifth of a small call)
                res = without_gc(_field_lists, fields, _host(out["row_offsets"]).tolist())
                return {k: v[0] for k, v in res.items()} if single else res
            if len(texts) and bool((lens != lens[0]).any()):
                raise NumbatokError("rows have different lengths: pass padding=True to return tensors")
            width = int(lens[0]) if len(texts) else 0
        elif padding in (True, "longest"):
            width = int((out["row_offsets"][1:] - out["row_offsets"][:-1]).max()) if len(texts) else 0
        elif padding == "max_length":
            if max_length is None:
                raise NumbatokError("padding='max_length' needs max_length")
            width = int(max_length)
        else:
            raise NumbatokError(f"padding must be False, True, 'longest' or 'max_length', not {padding!r}")
        if pad_to_multiple_of and width % pad_to_multiple_of:
            width += pad_to_multiple_of - width % pad_to_multiple_of
        pad_values = {"input_ids": self._pad_id(), "token_type_ids": 0, "offset_mapping": 0}
        res = {}
        for k, v in fields.items():
            res[k], mask = RaggedEncoding(v, out["row_offsets"]).to_padded(pad_values[k], width, padding_side)
            res[k] = res[k].astype(np.int64)
        res["attention_mask"] = mask
        return {k: _to_tensor(v, return_tensors) for k, v in res.items()}

    def _pad_id(self):
        if self._padding is not None:
            return self._padding.pad_id
        for name in ("<pad>", "[PAD]", "<|endoftext|>"):
            if name in self._vocab:
                return self._vocab[name]
        return 0

    def __repr__(self):
        return f"Tokenizer(model={type(self.spec.model).__name__[:-4]}, vocab_size={self.vocab_size}, device={self.device!r})"


_NO_ADDED = np.zeros(0, np.int64)


def _added_text(text, f):
    """(positions of a token table's added tokens, the text each matched): none in most calls, found
    with a third of `flatnonzero`'s time."""
    if not np.count_nonzero(f[6]):
        return _NO_ADDED, []
    added = np.flatnonzero(f[6])
    return added, [bytes(text[f[7, p]:f[8, p]]).decode("utf-8") for p in added.tolist()]
SHORT_DECODE = 512  # `decode` of a list of up to this many ids runs in Python (`_decode_short`)


def _id_row_lists(flat, ro, type_id):
    rows = row_lists(flat, ro)
    return {"input_ids": rows, "token_type_ids": [[type_id] * len(x) for x in rows],
            "attention_mask": [[1] * len(x) for x in rows]}


def _field_lists(fields, ro):
    res = {}
    for k, v in fields.items():
        res[k] = row_lists(_host(v).tolist(), ro)
    res["attention_mask"] = [[1] * len(x) for x in res["input_ids"]]
    return res


def _budget(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise NumbatokError(f"gpu_memory_budget must be a positive number of bytes (or None for half the GPU's "
                            f"memory), not {value!r}")
    return int(value)


def _join_outputs(outs):
    """`_assemble` outputs of consecutive row groups -> one output (numpy or CuPy)."""
    m = _xp(outs[0]["ids"])
    starts = [0]
    for o in outs[:-1]:
        starts.append(starts[-1] + int(o["row_offsets"][-1]))
    joined = {k: m.concatenate([o[k] for o in outs]) for k in outs[0] if k != "row_offsets"}
    joined["row_offsets"] = m.concatenate([outs[0]["row_offsets"]] +
                                          [o["row_offsets"][1:] + s for o, s in zip(outs[1:], starts[1:])])
    return joined


def _segment_ids(m, seg_offsets, total):
    """Segment index of every element 0..total-1 given segment offsets (works for numpy and CuPy; on
    numpy each index repeated by its segment's length, 5x faster than a search per element)."""
    if m is np and int(seg_offsets[0]) == 0 and int(seg_offsets[-1]) == total:
        return np.repeat(np.arange(seg_offsets.shape[0] - 1, dtype=np.int64), np.diff(seg_offsets))
    return (m.searchsorted(seg_offsets, m.arange(total), side="right") - 1).astype(np.int64)


def _host(x):
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_host(v) for v in x)
    return to_host(x)


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
