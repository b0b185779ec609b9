"""Flat tables every model kernel reads, one layout for all models (so the drivers pass one tuple).

  tok_data/tok_offsets   bytes each id stands for (model space: raw bytes for byte-level vocabularies)
  vocab_slots            bytes -> id open-addressing table over those bytes
  merges                 (left id * n_ids + right id) -> rank << 32 | merged id   (BPE; rank << 16
                         in the compact table of a vocabulary under 65,536 ids, see build_pair_table);
                         WordPiece: the vocabulary's trie (`wordpiece.build_trie`)
  byte_pairs[65536]      the same value for the pair of single-byte tokens (a, b) at a * 256 + b,
                         -1 when they never merge (byte-level BPE: a word's first ranks without
                         hashing; flag bit 4), CUT (-2) when no merged token holds them side by
                         side (a long word is cut there, `bpe.merge_byte_long`). One entry otherwise
  byte_ids[256]          id of each single byte (byte-level fast path), -1 when absent
  byte_fallback_ids[256] id of "<0xXX>" tokens, -1 when absent                     (BPE)
  affix                  continuing_subword_prefix then end_of_word_suffix bytes
  params                 n_ids, prefix length, suffix length, flags, unk id, model kind,
                         max_input_chars_per_word, (WordPiece) the trie's continuation root
"""
import numpy as np

from ..kernels.hashing import build_bytes_table, build_pair_table
from .bpe import CUT
from .wordpiece import CONT_ROOT, build_trie

BPE = 0
WORDPIECE = 1
WORDLEVEL = 2


def _joined_bytes(data, offsets, ids):
    """65,536 flags: whether bytes a, b lie side by side (at a * 256 + b) in any of these tokens."""
    s = offsets[ids]
    pairs = np.maximum(offsets[ids + 1] - s - 1, 0)
    # each token's byte positions but its last, without a loop over the tokens
    at = np.arange(int(pairs.sum())) + np.repeat(s - (np.cumsum(pairs) - pairs), pairs)
    seen = np.zeros(65536, bool)
    seen[data[at].astype(np.int64) * 256 + data[at + 1]] = True
    return seen


def _space_runs(data, offsets):
    """Leading and trailing ' ' bytes of each token (for the ByteLevel offset trimming), without a
    Python loop over the vocabulary: the first and last other byte of each non-empty token."""
    n = offsets.shape[0] - 1
    lead, trail = np.zeros(n, np.int32), np.zeros(n, np.int32)
    rows = np.flatnonzero(offsets[1:] > offsets[:-1])
    if rows.shape[0]:
        s, e = offsets[rows], offsets[rows + 1]  # (non-empty tokens lie back to back in `data`)
        idx = np.arange(data.shape[0])
        other = data != 32
        first = np.minimum.reduceat(np.where(other, idx, data.shape[0]), s)
        last = np.maximum.reduceat(np.where(other, idx, -1), s)
        lead[rows] = np.minimum(first, e) - s
        trail[rows] = np.where(last < s, e - s, e - 1 - last)
    return lead, trail


class ModelTables:
    def __init__(self, id_bytes, merges=(), *, kind=BPE, unk_id=-1, fuse_unk=False, byte_fallback=False,
                 continuing_subword_prefix=b"", end_of_word_suffix=b"", ignore_merges=False, byte_level=True,
                 n_ids=None, max_input_chars_per_word=0):
        """id_bytes: list indexed by id of bytes (None for ids the model cannot produce);
        merges: list of (left id, right id, merged id) in rank order (BPE only)."""
        self.kind = kind
        self.max_input_chars_per_word = max_input_chars_per_word
        self.n_ids = n_ids if n_ids is not None else len(id_bytes)
        lens = np.array([len(b) if b is not None else 0 for b in id_bytes], dtype=np.int64)
        self.tok_offsets = np.zeros(len(id_bytes) + 1, dtype=np.int64)
        np.cumsum(lens, out=self.tok_offsets[1:])
        self.tok_data = np.frombuffer(b"".join(b for b in id_bytes if b is not None), dtype=np.uint8).copy()
        if self.tok_data.shape[0] == 0:
            self.tok_data = np.zeros(1, np.uint8)
        ids = [i for i, b in enumerate(id_bytes) if b is not None]
        self.vocab_slots = build_bytes_table(self.tok_data, self.tok_offsets, ids)
        m = np.asarray(merges, dtype=np.int64).reshape(-1, 3)
        keys = m[:, 0] * self.n_ids + m[:, 1]
        # 8-byte records when ranks and ids fit 16 bits each (gpt2, roberta: 50k merges)
        compact = self.n_ids < 65536 and len(m) <= 65536
        ranks = np.arange(len(m), dtype=np.int64) << (16 if compact else 32)
        self.merges = build_pair_table(keys, ranks | m[:, 2], compact)
        self.byte_ids = np.full(256, -1, dtype=np.int32)
        single = np.flatnonzero(lens == 1)  # the first id of each one-byte token
        values, first = np.unique(self.tok_data[self.tok_offsets[single]], return_index=True)
        self.byte_ids[values] = single[first]
        self.byte_fallback_ids = np.full(256, -1, dtype=np.int32)
        self.affix = np.frombuffer(continuing_subword_prefix + end_of_word_suffix + b"\0", dtype=np.uint8).copy()
        self.n_prefix = len(continuing_subword_prefix)
        self.n_suffix = len(end_of_word_suffix)
        # flags: bit0 fuse_unk, bit1 byte_fallback, bit2 ignore_merges, bit3 byte-level symbols
        self.flags = (1 * fuse_unk) | (2 * byte_fallback) | (4 * ignore_merges) | (8 * byte_level)
        self.byte_pairs = np.full(1, -1, np.int64)
        if kind == BPE and byte_level and not (continuing_subword_prefix or end_of_word_suffix) and len(m) \
                and (self.byte_ids >= 0).all():
            # flags: bit4, every byte is a symbol of its own, so a word's first pairs are byte pairs
            self.flags |= 16
            order = np.argsort(keys, kind="stable")  # a repeated merge: its last rank wins, as in `merges`
            pair = (self.byte_ids.astype(np.int64)[:, None] * self.n_ids + self.byte_ids[None, :]).ravel()
            hit = order[np.maximum(np.searchsorted(keys, pair, side="right", sorter=order) - 1, 0)]
            self.byte_pairs = np.where(keys[hit] == pair, (hit << 32) | m[hit, 2], -1)
            self.byte_pairs[~_joined_bytes(self.tok_data, self.tok_offsets, m[:, 2])] = CUT
        self.unk_id = unk_id
        self.params = np.array([self.n_ids, self.n_prefix, self.n_suffix, self.flags, self.unk_id, self.kind,
                                self.max_input_chars_per_word, -1], dtype=np.int64)
        if kind == WORDPIECE:
            self.merges, self.params[CONT_ROOT] = build_trie(id_bytes, continuing_subword_prefix)
        self.lead_spaces, self.trail_spaces = _space_runs(self.tok_data, self.tok_offsets)

    def set_byte_fallback(self, vocab):
        for b in range(256):
            self.byte_fallback_ids[b] = vocab.get(f"<0x{b:02X}>", -1)

    def arrays(self):
        return (self.tok_data, self.tok_offsets, self.vocab_slots, self.merges, self.byte_pairs, self.byte_ids,
                self.byte_fallback_ids, self.affix, self.params)


