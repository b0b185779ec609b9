"""CUDA drivers: the same pipeline steps as `cpu`, as @cuda.jit kernels over device arrays.

Geometry: rows -> words is one thread per row (count pass, scan, fill pass); words -> tokens is one
thread per word with its scratch in local memory; compaction is one thread per word. Scans, sorts
and gathers between kernels use CuPy on a real GPU, and numpy under the CUDA simulator (where the
kernels run on host arrays), so the launch path is the same code in both.

Words longer than SMALL bytes do not fit the per-thread scratch: the kernel flags them and the CPU
merges them with the heap path (a 100 KB word would otherwise stall its whole batch on one thread).
"""
import os

import numpy as np
from numba import cuda

from .. import _numba  # noqa: F401  (numpy shims before the first CUDA compile)
from ..models.bpe import SMALL
from ..pipeline import compact_word, row_words, store_tokens, word_tokens
from . import cpu

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
AFFIX_MAX = 64
KBUF = SMALL + AFFIX_MAX  # local array sizes must be plain constants
THREADS = 128  # threads per block; tests patch it small so tiny batches still cross blocks


@cuda.jit
def count_words_kernel(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                       d64, d8, d32, counts):
    """One thread per row: number of words."""
    r = cuda.grid(1)
    if r < offsets.shape[0] - 1:
        counts[r] = row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off,
                              at_ids, at_flags, at_first, False, d64, d64, d8, d32, 0)


@cuda.jit
def fill_words_kernel(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                      row_word_off, ws, we, wv, wk):
    """One thread per row: writes its words at row_word_off[r]."""
    r = cuda.grid(1)
    if r < offsets.shape[0] - 1:
        row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                  at_flags, at_first, True, ws, we, wv, wk, row_word_off[r])


@cuda.jit
def encode_words_kernel(data, ws, we, wv, wk, cap_off, tok_data, tok_offsets, vocab_slots, merge_keys, merge_ranks,
                        merge_new, byte_ids, byte_fallback_ids, affix, params, cap_ids, cap_st, cap_en, ntok):
    """One thread per word: BPE in local memory; words over SMALL bytes get ntok = -1 (done on the CPU)."""
    i = cuda.grid(1)
    if i >= ws.shape[0]:
        return
    if wk[i] < 0 and (we[i] - ws[i] + wv[i] > SMALL or params[1] + params[2] > AFFIX_MAX):
        ntok[i] = -1
        return
    w = cuda.local.array(SMALL, np.uint8)
    sym_id = cuda.local.array(SMALL, np.int32)
    sym_st = cuda.local.array(SMALL, np.int64)
    sym_en = cuda.local.array(SMALL, np.int64)
    rank_buf = cuda.local.array(SMALL, np.int32)
    slot_buf = cuda.local.array(SMALL, np.int64)
    heap = cuda.local.array(1, np.int64)
    nxt = cuda.local.array(1, np.int64)
    prv = cuda.local.array(1, np.int64)
    kbuf = cuda.local.array(KBUF, np.uint8)
    k = word_tokens(data, ws[i], we[i], wv[i], wk[i], tok_data, tok_offsets, vocab_slots, merge_keys, merge_ranks,
                    merge_new, byte_ids, byte_fallback_ids, affix, params,
                    w, sym_id, sym_st, sym_en, rank_buf, slot_buf, heap, nxt, prv, kbuf)
    store_tokens(cap_off[i], k, sym_id, sym_st, sym_en, cap_ids, cap_st, cap_en)
    ntok[i] = k


@cuda.jit
def compact_kernel(data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off, want_spans,
                   classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added):
    """One thread per word: moves its tokens to their final place (and byte spans when asked)."""
    i = cuda.grid(1)
    if i < ws.shape[0]:
        compact_word(i, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off,
                     want_spans, classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added)


@cuda.jit
def char_start_kernel(data, flags):
    """One thread per byte: 1 where a character starts."""
    p = cuda.grid(1)
    if p < data.shape[0]:
        flags[p] = 1 if (data[p] & 0xC0) != 0x80 else 0


KERNELS = [count_words_kernel, fill_words_kernel, encode_words_kernel, compact_kernel, char_start_kernel]


def xp():
    """The array module that pairs with the kernels: CuPy on a GPU, numpy under the simulator."""
    if SIMULATOR:
        return np
    import cupy
    return cupy


def _launch(kernel, n, *args):
    if n > 0:
        kernel[(n + THREADS - 1) // THREADS, THREADS](*args)


def _scan(m, counts):
    off = m.zeros(counts.shape[0] + 1, dtype=np.int64)
    m.cumsum(counts, out=off[1:])
    return off


def to_device(a):
    """Host array (or anything with __cuda_array_interface__) -> array of the kernels' array module."""
    m = xp()
    return m.asarray(a)


class _DeviceTables:
    """The tokenizer's flat tables, copied to the device once."""

    def __init__(self, tok):
        at = tok._added.arrays()
        self.added = tuple(to_device(a) for a in at)
        self.classes = to_device(tok._classes)
        self.pt_prog = to_device(tok.spec.pre_tokenizer.prog)
        self.bpe = tuple(to_device(a) for a in tok._model.arrays())
        self.lead = to_device(tok._model.lead_spaces)
        self.trail = to_device(tok._model.trail_spaces)


def tables(tok):
    if tok._cuda is None:
        tok._cuda = _DeviceTables(tok)
    return tok._cuda


def encode(tok, b, want_spans):
    """The pipeline over Batch `b` (host or device arrays); returns raw per-token device arrays."""
    m = xp()
    t = tables(tok)
    data = to_device(b.data)
    offsets = to_device(b.offsets)
    n = int(offsets.shape[0]) - 1
    pt = tok.spec.pre_tokenizer
    counts = m.empty(n, np.int64)
    d64 = m.zeros(1, np.int64)
    d8 = m.zeros(1, np.uint8)
    d32 = m.zeros(1, np.int32)
    _launch(count_words_kernel, n, data, offsets, t.pt_prog, pt.add_prefix_space, t.classes, *t.added,
            d64, d8, d32, counts)
    row_word = _scan(m, counts)
    nw = int(row_word[-1])
    ws = m.empty(max(nw, 1), np.int64)[:nw]
    we = m.empty(max(nw, 1), np.int64)[:nw]
    wv = m.empty(max(nw, 1), np.uint8)[:nw]
    wk = m.empty(max(nw, 1), np.int32)[:nw]
    _launch(fill_words_kernel, n, data, offsets, t.pt_prog, pt.add_prefix_space, t.classes, *t.added,
            row_word, ws, we, wv, wk)
    cap = m.where(wk >= 0, 1, we - ws + wv.astype(np.int64)).astype(np.int64)
    cap_off = _scan(m, cap)
    total = int(cap_off[-1])
    cap_ids = m.empty(max(total, 1), np.int32)
    cap_st = m.empty(max(total, 1), np.int64)
    cap_en = m.empty(max(total, 1), np.int64)
    ntok = m.empty(max(nw, 1), np.int64)[:nw]
    _launch(encode_words_kernel, nw, data, ws, we, wv, wk, cap_off, *t.bpe, cap_ids, cap_st, cap_en, ntok)
    _long_words_on_cpu(tok, b, m, ws, we, wv, wk, cap_off, cap_ids, cap_st, cap_en, ntok)
    word_tok = _scan(m, ntok)
    T = int(word_tok[-1])
    ids = m.empty(max(T, 1), np.int32)[:T]
    word_row = (m.searchsorted(row_word, m.arange(nw), side="right") - 1).astype(np.int64)
    if want_spans:
        t_st = m.empty(max(T, 1), np.int64)[:T]
        t_en = m.empty(max(T, 1), np.int64)[:T]
        t_lead = m.empty(max(T, 1), np.int32)[:T]
        t_trail = m.empty(max(T, 1), np.int32)[:T]
        t_added = m.empty(max(T, 1), np.uint8)[:T]
    else:
        t_st = t_en = d64
        t_lead = t_trail = d32
        t_added = d8
    _launch(compact_kernel, nw, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, word_tok,
            want_spans, t.classes, t.lead, t.trail, ids, t_st, t_en, t_lead, t_trail, t_added)
    r = {"ids": ids, "row_tok": word_tok[row_word], "row_word": row_word, "word_row": word_row,
         "word_tok": word_tok, "row_start": offsets[:-1]}
    if want_spans:
        flags = m.empty(max(data.shape[0], 1), np.int64)[:data.shape[0]]
        _launch(char_start_kernel, int(data.shape[0]), data, flags)
        r.update(t_st=t_st, t_en=t_en, t_lead=t_lead, t_trail=t_trail, t_added=t_added,
                 char_index=_scan(m, flags))
    return r


def _long_words_on_cpu(tok, b, m, ws, we, wv, wk, cap_off, cap_ids, cap_st, cap_en, ntok):
    """Words the kernel flagged (ntok == -1) are merged by the CPU's heap path and written back."""
    sel = m.flatnonzero(ntok < 0)
    if int(sel.shape[0]) == 0:
        return
    host = lambda a: a.get() if hasattr(a, "get") else np.asarray(a)  # noqa: E731
    sel_h = host(sel)
    data_h = host(b.data)
    sws, swe, swv, swk = host(ws[sel]), host(we[sel]), host(wv[sel]), host(wk[sel])
    scap = np.where(swk >= 0, 1, swe - sws + swv).astype(np.int64)
    scap_off = cpu._scan(scap)
    total = int(scap_off[-1])
    ids = np.empty(total, np.int32)
    st = np.empty(total, np.int64)
    en = np.empty(total, np.int64)
    k = np.empty(len(sel_h), np.int64)
    cpu.encode_words(data_h, sws, swe, swv, swk, scap_off, *tok._model.arrays(), max(1, min(len(sel_h), 8)),
                     ids, st, en, k)
    # scatter back: token j of selected word s goes to cap_off[word] + j
    row = np.searchsorted(scap_off, np.arange(total), side="right") - 1
    j = np.arange(total) - scap_off[row]
    valid = j < k[row]
    dst = host(cap_off[sel])[row[valid]] + j[valid]
    dst_d = to_device(dst)
    cap_ids[dst_d] = to_device(ids[valid])
    cap_st[dst_d] = to_device(st[valid])
    cap_en[dst_d] = to_device(en[valid])
    ntok[sel] = to_device(k)
