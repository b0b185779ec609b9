"""CPU drivers: the pipeline steps under @njit(parallel=True), one prange over rows or word chunks."""
import numpy as np

from .._numba import cpu_kernel, prange
from ..models.bpe import SMALL
from ..pipeline import compact_word, row_words, store_tokens, word_tokens

_EMPTY_I64 = np.zeros(0, np.int64)


@cpu_kernel(parallel=True)
def count_words(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first, counts):
    n = offsets.shape[0] - 1
    d64 = np.zeros(0, np.int64)
    d8 = np.zeros(0, np.uint8)
    d32 = np.zeros(0, np.int32)
    for r in prange(n):
        counts[r] = row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off,
                              at_ids, at_flags, at_first, False, d64, d64, d8, d32, 0)


@cpu_kernel(parallel=True)
def fill_words(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
               row_word_off, ws, we, wv, wk):
    n = offsets.shape[0] - 1
    for r in prange(n):
        row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                  at_flags, at_first, True, ws, we, wv, wk, row_word_off[r])


@cpu_kernel(parallel=True)
def encode_words(data, ws, we, wv, wk, cap_off, tok_data, tok_offsets, vocab_slots, merge_keys, merge_ranks,
                 merge_new, byte_ids, byte_fallback_ids, affix, params, n_chunks,
                 cap_ids, cap_st, cap_en, ntok):
    nw = ws.shape[0]
    per = (nw + n_chunks - 1) // n_chunks
    extra = params[1] + params[2] + 8
    for c in prange(n_chunks):
        lo = c * per
        hi = min(nw, lo + per)
        longest = SMALL + 1
        for i in range(lo, hi):
            m = we[i] - ws[i] + wv[i]
            if m > longest:
                longest = m
        w = np.empty(longest, np.uint8)
        sym_id = np.empty(longest, np.int32)
        sym_st = np.empty(longest, np.int64)
        sym_en = np.empty(longest, np.int64)
        rank_buf = np.empty(longest, np.int32)
        slot_buf = np.empty(longest, np.int64)
        heap = np.empty(3 * longest, np.int64)
        nxt = np.empty(longest, np.int64)
        prv = np.empty(longest, np.int64)
        kbuf = np.empty(longest + extra, np.uint8)
        for i in range(lo, hi):
            k = word_tokens(data, ws[i], we[i], wv[i], wk[i], tok_data, tok_offsets, vocab_slots, merge_keys,
                            merge_ranks, merge_new, byte_ids, byte_fallback_ids, affix, params,
                            w, sym_id, sym_st, sym_en, rank_buf, slot_buf, heap, nxt, prv, kbuf)
            store_tokens(cap_off[i], k, sym_id, sym_st, sym_en, cap_ids, cap_st, cap_en)
            ntok[i] = k


@cpu_kernel(parallel=True)
def compact(data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off, want_spans,
            classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added):
    for i in prange(ws.shape[0]):
        compact_word(i, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off,
                     want_spans, classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added)


@cpu_kernel
def char_index(data):
    """cum[p] = number of characters that start before byte p (p = 0..len)."""
    n = data.shape[0]
    cum = np.empty(n + 1, np.int64)
    c = 0
    for p in range(n):
        cum[p] = c
        if (data[p] & 0xC0) != 0x80:
            c += 1
    cum[n] = c
    return cum


@cpu_kernel
def gather_bytes(table, table_off, ids, keep, row_offsets):
    """Concatenates table rows for the kept ids; returns (bytes, byte offsets per id row)."""
    n = ids.shape[0]
    total = 0
    for i in range(n):
        if keep[i]:
            total += table_off[ids[i] + 1] - table_off[ids[i]]
    out = np.empty(total, np.uint8)
    rows = row_offsets.shape[0] - 1
    offs = np.zeros(rows + 1, np.int64)
    p = 0
    for r in range(rows):
        for i in range(row_offsets[r], row_offsets[r + 1]):
            if keep[i]:
                t = ids[i]
                for j in range(table_off[t], table_off[t + 1]):
                    out[p] = table[j]
                    p += 1
        offs[r + 1] = p
    return out, offs


def _scan(counts):
    off = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


def encode(tok, b, want_spans):
    """Runs the pipeline for Tokenizer `tok` over host Batch `b`; returns the raw per-token arrays."""
    import numba

    data, offsets = b.data, b.offsets
    n = len(offsets) - 1
    pt = tok.spec.pre_tokenizer
    at = tok._added.arrays()
    classes = tok._classes
    counts = np.empty(n, np.int64)
    count_words(data, offsets, pt.prog, pt.add_prefix_space, classes, at[0], at[1], at[2], at[3], at[4], counts)
    row_word = _scan(counts)
    nw = int(row_word[-1])
    ws = np.empty(nw, np.int64)
    we = np.empty(nw, np.int64)
    wv = np.empty(nw, np.uint8)
    wk = np.empty(nw, np.int32)
    fill_words(data, offsets, pt.prog, pt.add_prefix_space, classes, at[0], at[1], at[2], at[3], at[4],
               row_word, ws, we, wv, wk)
    cap = np.where(wk >= 0, 1, we - ws + wv).astype(np.int64)
    cap_off = _scan(cap)
    total = int(cap_off[-1])
    cap_ids = np.empty(total, np.int32)
    cap_st = np.empty(total, np.int64)
    cap_en = np.empty(total, np.int64)
    ntok = np.empty(nw, np.int64)
    bp = tok._model.arrays()
    n_chunks = min(max(nw // 256, 1), 8 * numba.get_num_threads())
    encode_words(data, ws, we, wv, wk, cap_off, *bp, n_chunks, cap_ids, cap_st, cap_en, ntok)
    word_tok = _scan(ntok)
    T = int(word_tok[-1])
    ids = np.empty(T, np.int32)
    word_row = np.repeat(np.arange(n, dtype=np.int64), counts)
    if want_spans:
        t_st = np.empty(T, np.int64)
        t_en = np.empty(T, np.int64)
        t_lead = np.empty(T, np.int32)
        t_trail = np.empty(T, np.int32)
        t_added = np.empty(T, np.uint8)
    else:
        t_st = t_en = np.zeros(0, np.int64)
        t_lead = t_trail = np.zeros(0, np.int32)
        t_added = np.zeros(0, np.uint8)
    compact(data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, word_tok, want_spans,
            classes, tok._model.lead_spaces, tok._model.trail_spaces, ids, t_st, t_en, t_lead, t_trail, t_added)
    r = {"ids": ids, "row_tok": word_tok[row_word], "row_word": row_word, "word_row": word_row,
         "word_tok": word_tok, "row_start": offsets[:-1]}
    if want_spans:
        r.update(t_st=t_st, t_en=t_en, t_lead=t_lead, t_trail=t_trail, t_added=t_added, char_index=char_index(data))
    return r
