"""CPU drivers: the pipeline steps under @njit(parallel=True), one prange over rows or word chunks."""
import functools
import types

import numba
import numpy as np

from .._numba import cpu_kernel, fetch_add, jitable, pointer, prange, prefetch, readonly
from .._numba import readonly_view as _readonly
from ..models.bpe import GROUP_ROOM, SMALL, merge_byte_long, merge_byte_word, merge_byte_words
from ..models.tables import WORDPIECE
from ..pre_tokenizers import CL100K, GPT2, O200K, SPLIT
from ..pre_tokenizers.patterns import next_start, pattern_end
from ..kernels.hashing import bytes_lookup, bytes_lookup_hashed, fnv1a, same_bytes
from ..pre_tokenizers.splitting import REMOVED
from ..normalizers import chars, passes
from ..unicode_tables import SPACE
from ..added_tokens import first_bytes, holds_token, may_start
from ..pre_tokenizers.byte_level import (A_ADDED, ALL_BITS, ascii_classes, ascii_word, match_end, match_end_inline,
                                         next_special)
from ..normalizers.passes import identity_alignment, is_nf, nf_piece, normalize_piece
from ..kernels.dedup import distinct_words, word_hashes
from ..kernels.utf8 import decode, seq_len
from ..normalizers.char_map import UNKNOWN, marked
from ..normalizers.unicode_data import NCP
from ..kernels.word_cache import (COPY_IDS, KEY_BYTES, LONG_BYTES, MAX_IDS, Spare, copy_ids, hash_long, home,
                                  insert_word, key_hash, pack_key, probe, probe_long)
from .. import unicode_tables
from ..kernels.lines import load8
from ..pipeline import (compact_word, cut_at, piece_words, row_pieces, row_words, space_counts, store_tokens,
                        token_span, word_tokens)

_EMPTY_I64 = np.zeros(0, np.int64)
_Z64, _Z32 = np.zeros(1, np.int64), np.zeros(1, np.int32)  # (stand-ins for the arrays of a normalizer not there)
_NONE32 = np.zeros(0, np.int32)  # (no template tokens: the type `_single_template`'s arrays have)
_R64 = np.zeros(1, np.int64)
_R64.flags.writeable = False


def _on_this_thread(kernel, name):
    """`kernel`'s own code compiled without its parallel loop (its prange runs as a range on the calling
    thread), cached under a name of its own: the small calls' twin of a parallel kernel, one source."""
    f = kernel.py_func
    g = types.FunctionType(f.__code__, f.__globals__, name, f.__defaults__, f.__closure__)
    g.__qualname__ = name
    return cpu_kernel(g)


_TWINS = {}


def _on(small):
    """kernel -> the kernel to call for a call of this size: for a small one (under SERIAL_CALL bytes)
    its twin on the calling thread, made at first use (waking the threads cost more than such a
    call's work: ~5-10 us a launch)."""
    return _twin if small else _itself


def _itself(kernel):
    return kernel


def _twin(kernel):
    name = kernel.py_func.__name__ + "_serial"
    if name not in _TWINS:
        _TWINS[name] = _on_this_thread(kernel, name)
    return _TWINS[name]


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


@cpu_kernel
def model_scratch(n, extra):
    """Per-thread scratch for `word_tokens` on words of up to n model-space bytes: (w, sym_id, sym_st,
    sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf), views of one allocation (ten allocations were
    0.6 us of a small call, which needs none of it when its words are cached)."""
    b4 = (n + 1) // 2  # (int64 words that hold n int32, n + extra bytes, n bytes)
    bk = (n + extra + 7) // 8
    buf = np.empty((n + 7) // 8 + 2 * b4 + 8 * n + bk, np.int64)
    p = (n + 7) // 8
    w = buf[:p].view(np.uint8)[:n]
    sym_id = buf[p:p + b4].view(np.int32)[:n]
    p += b4
    sym_st, sym_en = buf[p:p + n], buf[p + n:p + 2 * n]
    p += 2 * n
    rank_buf = buf[p:p + b4].view(np.int32)[:n]
    p += b4
    new_buf, heap = buf[p:p + n], buf[p + n:p + 4 * n]
    p += 4 * n
    nxt, prv = buf[p:p + n], buf[p + n:p + 2 * n]
    p += 2 * n
    kbuf = buf[p:p + bk].view(np.uint8)[:n + extra]
    return w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf


@cpu_kernel(parallel=True)
def encode_words(data, ws, we, wv, wk, cap_off, tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                 byte_ids, byte_fallback_ids, affix, params, n_chunks,
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
        w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf = model_scratch(longest, extra)
        for i in range(lo, hi):
            k = word_tokens_cut(data, ws[i], we[i], np.int64(wv[i]), np.int64(wk[i]), tok_data, tok_offsets,
                                vocab_slots, merges,
                                byte_pairs, byte_ids, byte_fallback_ids, affix, params,
                                w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf)
            store_tokens(cap_off[i], k, sym_id, sym_st, sym_en, cap_ids, cap_st, cap_en)
            ntok[i] = k


@cpu_kernel(parallel=True)
def compact(data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off, want_spans,
            classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added):
    for i in prange(ws.shape[0]):
        compact_word(i, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off,
                     want_spans, classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added)


@cpu_kernel(parallel=True)
def split_pieces(write, data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4, row_off, ps, pe,
                 pk, counts):
    """Per row: its pieces after the raw-text added tokens (count, or write at row_off[r]); `first4`:
    the raw-text tokens' first bytes (`first_bytes`)."""
    raw_first = at_first[0]
    for r in prange(offsets.shape[0] - 1):
        a = offsets[r]
        b = offsets[r + 1]
        k0 = row_off[r] if write else 0
        if may_start(data, a, b, first4, raw_first, 1):
            counts[r] = row_pieces(data, a, b, classes, at_data, at_off, at_ids, at_flags, at_first, write, ps, pe,
                                   pk, k0) - k0
        elif a < b:  # the whole row is one text piece
            if write:
                ps[k0] = a
                pe[k0] = b
                pk[k0] = -1
            counts[r] = 1
        else:
            counts[r] = 0


@cpu_kernel(parallel=True)
def identity_alignments(data, ias, iae):
    for p in prange(data.shape[0]):
        identity_alignment(data, np.int64(p), ias, iae)


@cpu_kernel(parallel=True)
def nf_items(fill, head, data, ps, pe, pk, props, maps, map_off, map_data, comp, item_off, icp, ich, counts):
    """Per piece: the item capacity of an NF pass, or its items."""
    for i in prange(ps.shape[0]):
        counts[i] = nf_piece(i, head, fill, data, ps, pe, pk, props, maps, map_off, map_data, comp, item_off, icp, ich)


@cpu_kernel(parallel=True)
def normalize_pieces(write, head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, ps, pe, pk,
                     porig, icp, ich, item_off, n_items, out_off, out, oas, oae, counts):
    """Per piece: one normalizer pass (count, or write at out_off[i])."""
    for i in prange(ps.shape[0]):
        counts[i] = normalize_piece(i, head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, ps,
                                    pe, pk, porig, icp, ich, item_off, n_items, write, out_off, out, oas, oae)


@cpu_kernel(parallel=True)
def piece_word_rows(write, data, pb, pk, row_piece, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags,
                    at_first, row_word, ws, we, wv, wk, counts):
    """Per row: the words of its normalized pieces (count, or write at row_word[r])."""
    for r in prange(row_piece.shape[0] - 1):
        k0 = row_word[r] if write else 0
        counts[r] = piece_words(data, pb, pk, row_piece[r], row_piece[r + 1], pt_kind, pt_prefix, classes, at_data,
                                at_off, at_ids, at_flags, at_first, write, ws, we, wv, wk, k0) - k0


@cpu_kernel(parallel=True)
def char_index(data):
    """cum[p] = number of characters that start before byte p (p = 0..len): blocks counted on all
    threads, then filled from their starting counts (on one thread this was 20 ms of a 6.4 MB call)."""
    n = data.shape[0]
    nb = (n + CHAR_BLOCK - 1) // CHAR_BLOCK
    starts = np.zeros(nb + 1, np.int64)
    for k in prange(nb):
        c = 0
        for p in range(k * CHAR_BLOCK, min(n, (k + 1) * CHAR_BLOCK)):
            c += (data[p] & 0xC0) != 0x80
        starts[k + 1] = c
    for k in range(nb):
        starts[k + 1] += starts[k]
    cum = np.empty(n + 1, np.int64)
    for k in prange(nb):
        c = starts[k]
        for p in range(k * CHAR_BLOCK, min(n, (k + 1) * CHAR_BLOCK)):
            cum[p] = c
            c += (data[p] & 0xC0) != 0x80
    cum[n] = starts[nb]
    return cum


CHAR_BLOCK = 1 << 16
char_index_serial = _twin(char_index)


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


@cpu_kernel
def row_groups(sizes, limit):
    """Bounds of consecutive row groups of at most `limit` bytes each (a larger row alone)."""
    n = sizes.shape[0]
    out = np.empty(n + 2, np.int64)
    out[0] = 0
    k = 0
    acc = 0
    for r in range(n):
        if acc > 0 and acc + sizes[r] > limit:
            k += 1
            out[k] = r
            acc = 0
        acc += sizes[r]
    out[k + 1] = n
    return out[:k + 2].copy()


def _scan(counts):
    off = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


@functools.lru_cache(maxsize=64)
def _raw_first4(first):
    """`first_bytes` of the raw-text added tokens' bitmap (as bytes), once per tokenizer, not per call."""
    return _readonly(first_bytes(np.frombuffer(first, np.uint8)))


def _pieces(data, offsets, at, classes, small=False):
    """The pieces of every row around the raw-text added tokens: (row_piece, ps, pe, pk)."""
    on = _on(small)
    counts = np.empty(offsets.shape[0] - 1, np.int64)
    z64, z32 = np.zeros(1, np.int64), np.zeros(1, np.int32)
    first4 = _raw_first4(at[4][0].tobytes())
    on(split_pieces)(False, data, offsets, classes, *at, first4, z64, z64, z64, z32, counts)
    row_piece = _scan(counts)
    m = int(row_piece[-1])
    ps, pe, pk = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int32)
    on(split_pieces)(True, data, offsets, classes, *at, first4, row_piece, ps, pe, pk, counts)
    return row_piece, ps, pe, pk


def normalize_rows(norm, data, offsets, at, classes, small=False):
    """Added tokens' first pass, then every pass of Normalizer `norm`, over the batch (data, offsets).

    Returns (text, pb, pk, row_piece, ias, iae): the normalized buffer, where piece i is
    text[pb[i]:pb[i + 1]] (pk[i] = -1 for text, else the added token's id) and row r owns pieces
    row_piece[r]..row_piece[r + 1] - 1; byte j of `text` comes from original bytes [ias[j], iae[j]).
    """
    on = _on(small)
    data, offsets = _readonly(data), _readonly(offsets)  # one specialization per kernel, for every caller
    row_piece, ps, pe, pk = _pieces(data, offsets, at, classes, small)
    m = ps.shape[0]
    z64, z32 = np.zeros(1, np.int64), np.zeros(1, np.int32)
    porig = ps
    ias, iae = np.empty(data.shape[0], np.int64), np.empty(data.shape[0], np.int64)
    on(identity_alignments)(data, ias, iae)
    text, ias, iae = _readonly(data), _readonly(ias), _readonly(iae)
    tables = norm.tables.arrays()
    counts = np.empty(m, np.int64)
    for head, arg0, arg1, cmap, coff, cdata in norm.passes:
        item_off, n_items, icp, ich = np.zeros(m + 1, np.int64), np.zeros(m, np.int64), z32, z32
        if is_nf(head):
            on(nf_items)(False, head, text, ps, pe, pk, *tables, item_off, icp, ich, counts)
            item_off = _scan(2 * counts)  # items, then sorting scratch
            icp, ich = np.empty(int(item_off[-1]), np.int32), np.empty(int(item_off[-1]), np.int32)
            on(nf_items)(True, head, text, ps, pe, pk, *tables, item_off, icp, ich, n_items)
        args = (head, arg0, arg1, cmap, coff, cdata, norm.sdata, norm.soff, tables[0], text, ias, iae, ps, pe, pk,
                porig, icp, ich, item_off, n_items)
        on(normalize_pieces)(False, *args, z64, np.zeros(1, np.uint8), z64, z64, counts)
        pb = _scan(counts)
        total = int(pb[-1])
        text, ias, iae = np.empty(total, np.uint8), np.empty(total, np.int64), np.empty(total, np.int64)
        on(normalize_pieces)(True, *args, pb, text, ias, iae, counts)
        text, ias, iae = _readonly(text), _readonly(ias), _readonly(iae)
        ps, pe = pb[:-1], pb[1:]
    return text, pb, pk, row_piece, ias, iae


@cpu_kernel(parallel=True)
def ascii_rows(data, offsets):
    """1 for each row that is all ASCII (an OR over the row, which the compiler vectorizes)."""
    n = offsets.shape[0] - 1
    flags = np.ones(n, np.uint8)
    for r in prange(n):
        x = np.uint8(0)
        for c in data[offsets[r]:offsets[r + 1]]:
            x |= c
        flags[r] = x < 128
    return flags


@cpu_kernel
def gather_rows(data, offsets, rows):
    """The batch of the given rows only: (bytes, offsets)."""
    off = np.zeros(rows.shape[0] + 1, np.int64)
    for j in range(rows.shape[0]):
        off[j + 1] = off[j] + offsets[rows[j] + 1] - offsets[rows[j]]
    out = np.empty(off[-1], np.uint8)
    for j in range(rows.shape[0]):
        a = offsets[rows[j]]
        out[off[j]:off[j + 1]] = data[a:a + off[j + 1] - off[j]]
    return out, off


@cpu_kernel(parallel=True)
def merge_pieces(write, data, ps, pe, pk, row_piece, row_sub, amap_off, amap_data, amap1, cm, cd, sub_text, sub_pb,
                 sub_row_piece, sub_as, sub_ae, sub_shift, pb, out, oas, oae):
    """Normalized pieces of every row: an all-ASCII row's text pieces mapped byte by byte (amap), a
    row_sub[r] = -2 row's a character at a time (`char_map`: cm, cd), their added tokens' pieces
    copied; any other row's pieces copied from its normalized sub-batch row row_sub[r]. Counts piece
    lengths into pb[1:] (write=False; a row_sub[r] = -2 row's were counted by `char_rows`), or writes
    them at pb. `amap1`: see `Normalizer.ascii_map`
    (when not empty, a byte is one lookup, not a loop over its mapping). With oas not empty, also
    each written byte's alignment (oas, oae: its character in `data`, as `normalize_rows` gives it);
    sub-batch row j's from sub_as/sub_ae, moved by sub_shift[j]."""
    single = amap1.shape[0] == 128 and oas.shape[0] == 0
    aligned = write and oas.shape[0] > 0
    for r in prange(row_piece.shape[0] - 1):
        j = row_sub[r]
        if j == -2 and not write:  # (counted by `char_rows`)
            continue
        for i in range(row_piece[r], row_piece[r + 1]):
            o = pb[i] if write else 0
            if j >= 0:
                k = sub_row_piece[j] + i - row_piece[r]
                if write:
                    for q in range(sub_pb[k + 1] - sub_pb[k]):
                        out[o + q] = sub_text[sub_pb[k] + q]
                        if aligned:
                            oas[o + q] = sub_as[sub_pb[k] + q] + sub_shift[j]
                            oae[o + q] = sub_ae[sub_pb[k] + q] + sub_shift[j]
                o += sub_pb[k + 1] - sub_pb[k]
            elif pk[i] >= 0:
                if write:
                    for q in range(pe[i] - ps[i]):
                        out[o + q] = data[ps[i] + q]
                    if aligned:
                        p = ps[i]
                        while p < pe[i]:
                            L = seq_len(data[p])
                            for q in range(L):
                                oas[o + p - ps[i] + q] = p
                                oae[o + p - ps[i] + q] = p + L
                            p += L
                o += pe[i] - ps[i]
            elif j == -2:
                p = ps[i]
                while p < pe[i]:
                    c, L = decode(data, p)
                    v = cm[c]
                    if write:
                        for q in range(v & 255):
                            out[o + q] = cd[(v >> 8) + q]
                            if aligned:
                                oas[o + q] = p
                                oae[o + q] = p + L
                    o += v & 255
                    p += L
            elif single:
                if write:
                    for p in range(ps[i], pe[i]):
                        c = data[p]
                        if amap_off[c + 1] != amap_off[c]:
                            out[o] = amap1[c]
                            o += 1
                else:
                    for p in range(ps[i], pe[i]):
                        c = data[p]
                        o += amap_off[c + 1] - amap_off[c]
            else:
                for p in range(ps[i], pe[i]):
                    c = data[p]
                    if write:
                        for q in range(amap_off[c], amap_off[c + 1]):
                            out[o] = amap_data[q]
                            if aligned:
                                oas[o] = p
                                oae[o] = p + 1
                            o += 1
                    else:
                        o += amap_off[c + 1] - amap_off[c]
            if not write:
                pb[i + 1] = o


@cpu_kernel(parallel=True)
def char_rows(data, rows, row_piece, ps, pe, pk, cm, seen, status, pb):
    """For each of the given rows' text pieces: the length `char_map` maps them to, into pb[i + 1]
    (an added token's piece: its own length), and the row's status: 0 when the map knows all its
    characters, else bit 0 set when one of them is unsafe (the row takes the passes), bit 1 when it
    holds characters the map has not seen yet (marked in `seen`, and their block of 4,096 code points
    at seen[NCP + (cp >> 12)]: `marked` then reads only the marked blocks). The lengths are what
    `merge_pieces` would count for the row (it skips the rows counted here): one walk fewer over
    every character."""
    for k in prange(rows.shape[0]):
        st = 0
        for i in range(row_piece[rows[k]], row_piece[rows[k] + 1]):
            if pk[i] >= 0:
                pb[i + 1] = pe[i] - ps[i]
                continue
            o = 0
            p = ps[i]
            while p < pe[i]:
                c, L = decode(data, p)
                v = cm[c]
                if v >= 0:
                    o += v & 255
                elif v == UNKNOWN:
                    seen[c] = 1
                    seen[NCP + (c >> 12)] = 1
                    st |= 2
                else:
                    st |= 1
                p += L
            pb[i + 1] = o
        status[k] = st


_NO_CHARS = (np.zeros(1, np.int32), _readonly(np.zeros(1, np.uint8)))


def _known_chars(norm):
    """(cm, cd) of the normalizer's char map for a small call's one compiled step, once some call has
    made it; until then none (the step hands rows that are not ASCII back, and the general way makes
    the map): a call whose rows are all ASCII never pays the ~10 ms of making it."""
    chars_ = norm.char_map_made()
    return _NO_CHARS if chars_ is None else chars_.arrays()


def _char_mapped(norm, data, rows, row_piece, ps, pe, pk, pb, on):
    """Which of the rows `rows` (not all ASCII) the normalizer's `char_map` maps, learning their
    characters first: (mask over rows, cm, cd). The mapped rows' pieces have their lengths in pb."""
    chars_ = norm.char_map()
    if chars_ is None or not rows.shape[0]:
        return np.zeros(rows.shape[0], bool), *_NO_CHARS
    cm = chars_.arrays()[0]
    status = np.empty(rows.shape[0], np.uint8)
    seen = chars_.take_seen()
    on(char_rows)(data, rows, row_piece, ps, pe, pk, cm, seen, status, pb)
    again = np.flatnonzero(status >= 2)
    if again.shape[0]:  # (checked and counted again once their characters are known)
        chars_.learn(marked(seen))
        sub = np.empty(again.shape[0], np.uint8)
        on(char_rows)(data, rows[again], row_piece, ps, pe, pk, cm, seen, sub, pb)
        status[again] = sub  # (bit 1 no more: every character marked was learned, and `marked` cleared it)
    chars_.give_seen(seen)
    # (taken after the checks: a character another thread learned meanwhile has its bytes in this `cd`)
    cm, cd = chars_.arrays()
    return status == 0, cm, cd


split_pieces_serial = _twin(split_pieces)


@cpu_kernel
def serial_pieces(data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4):
    """`_pieces` of a small call, on the calling thread: (row_piece, ps, pe, pk)."""
    n = offsets.shape[0] - 1
    counts = np.empty(n, np.int64)
    z64, z32 = np.zeros(1, np.int64), np.zeros(1, np.int32)
    # (np.bool_: a bool, as Python passes it; a literal False would compile a specialization of its own)
    split_pieces_serial(np.bool_(False), data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4,
                        z64, z64, z64, z32, counts)
    row_piece = np.empty(n + 1, np.int64)
    row_piece[0] = 0
    for r in range(n):
        row_piece[r + 1] = row_piece[r] + counts[r]
    m = row_piece[n]
    ps, pe, pk = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int32)
    split_pieces_serial(np.bool_(True), data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4,
                        row_piece, ps, pe, pk, counts)
    return row_piece, ps, pe, pk


@jitable
def mapped_len(data, a, b, amap_off, cm, cd_len):
    """Bytes that text data[a:b] maps to a character at a time (ASCII by the normalizer's ASCII map,
    others by its char map), or -1 when the char map does not know one of its characters or finds
    it unsafe (the text then takes the passes). An entry past cd_len bytes is one another thread
    learned after this call took the map's bytes: as unknown."""
    k = 0
    p = a
    while p < b:
        c = data[p]
        if c < 128:
            k += amap_off[c + 1] - amap_off[c]
            p += 1
            continue
        c, L = decode(data, p)
        v = cm[c] if c < cm.shape[0] else UNKNOWN
        if v < 0 or (v >> 8) + (v & 255) > cd_len:
            return -1
        k += v & 255
        p += L
    return k


@cpu_kernel
def mapped_rows(data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4, amap_off, amap_data, cm,
                cd, aligned):
    """`normalize_rows` of a small call whose characters its normalizer maps one at a time (the ASCII
    map, then the char map: `char_map` has the whole BMP learned), in one compiled step: (text, pb,
    pk, row_piece, ias, iae), each byte a character maps to aligned to that character (with aligned;
    else empty ias, iae), an added token's bytes to their characters; an empty row_piece when some
    character is unknown or unsafe (the caller then takes the general way, which learns it). As
    Python and numpy steps this was ~50 us of a one-sentence bert call on a non-ASCII row."""
    row_piece, ps, pe, pk = serial_pieces(data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, first4)
    n = offsets.shape[0] - 1
    m = row_piece[n]
    # (an all-ASCII text piece, most of them, is a byte loop: its lengths by one lookup a byte, and
    # where every ASCII character maps to one byte or none and no alignments are wanted, its bytes too;
    # through the character loop below such a piece took 2.9x the time)
    alen = np.zeros(256, np.int64)  # (bytes of 128 and up: 0, their pieces take the character loop)
    one = np.zeros(128, np.uint8)
    single = not aligned
    for c in range(128):
        alen[c] = amap_off[c + 1] - amap_off[c]
        if alen[c] > 1:
            single = False
        elif alen[c] == 1:
            one[c] = amap_data[amap_off[c]]
    ascii_piece = np.zeros(m, np.bool_)
    pb = np.empty(m + 1, np.int64)
    pb[0] = 0
    for i in range(m):
        k = pe[i] - ps[i]
        if pk[i] < 0:
            k = 0
            x = np.uint8(0)
            for p in range(ps[i], pe[i]):
                x |= data[p]
                k += alen[data[p]]
            ascii_piece[i] = x < 128
            if x >= 128:
                k = mapped_len(data, ps[i], pe[i], amap_off, cm, cd.shape[0])
                if k < 0:
                    return np.zeros(0, np.uint8), pb[:0], pk, pb[:0], pb[:0], pb[:0]
        pb[i + 1] = pb[i] + k
    text = np.empty(pb[m], np.uint8)
    na = pb[m] if aligned else 0
    ias, iae = np.empty(na, np.int64), np.empty(na, np.int64)
    for i in range(m):
        o = pb[i]
        if single and ascii_piece[i]:
            for p in range(ps[i], pe[i]):
                if alen[data[p]]:
                    text[o] = one[data[p]]
                    o += 1
            continue
        if ascii_piece[i]:
            for p in range(ps[i], pe[i]):
                c = data[p]
                for q in range(amap_off[c], amap_off[c + 1]):
                    text[o] = amap_data[q]
                    if aligned:
                        ias[o], iae[o] = p, p + 1
                    o += 1
            continue
        p = ps[i]
        while p < pe[i]:
            c = data[p]
            if pk[i] >= 0:  # (an added token's bytes, each aligned to its character)
                L = seq_len(c)
                for q in range(L):
                    text[o + q] = data[p + q]
                    if aligned:
                        ias[o + q], iae[o + q] = p, p + L
                o += L
            elif c < 128:
                L = 1
                for q in range(amap_off[c], amap_off[c + 1]):
                    text[o] = amap_data[q]
                    if aligned:
                        ias[o], iae[o] = p, p + 1
                    o += 1
            else:
                c, L = decode(data, p)
                v = cm[c]
                for q in range(v >> 8, (v >> 8) + (v & 255)):
                    text[o] = cd[q]
                    if aligned:
                        ias[o], iae[o] = p, p + L
                    o += 1
            p += L
    return text, pb, pk, row_piece, ias, iae


def normalize_rows_ids(norm, data, offsets, at, classes, small=False, aligned=False):
    """`normalize_rows` without alignments, for the ids-only path: (text, pb, pk, row_piece); with
    aligned, `normalize_rows`' six outputs. All-ASCII rows take the normalizer's ASCII map (one pass,
    when it has one), other rows its `char_map` (when it has one and the row holds no unsafe
    character); only the rest run its passes (the passes over every row were ~85% of a bert offsets
    call over big.txt)."""
    on = _on(small)
    data, offsets = _readonly(data), _readonly(offsets)  # (as in `normalize_rows`)
    amap = norm.ascii_map()
    flags = on(ascii_rows)(data, offsets) if amap is not None else None
    if flags is None or (not flags.any() and norm.char_map() is None):
        got = normalize_rows(norm, data, offsets, at, classes, small)
        return got if aligned else got[:4]
    n = offsets.shape[0] - 1
    row_piece, ps, pe, pk = _pieces(data, offsets, at, classes, small)
    other = np.flatnonzero(flags == 0)
    row_sub = np.full(n, -1, np.int64)
    pb = np.zeros(ps.shape[0] + 1, np.int64)
    mapped, cm, cd = _char_mapped(norm, data, other, row_piece, ps, pe, pk, pb, on)
    row_sub[other[mapped]] = -2
    other = other[~mapped]
    row_sub[other] = np.arange(other.shape[0])
    # (the same array types whether or not some rows are not ASCII: one compiled specialization)
    z64 = np.zeros(1, np.int64)
    sub_text, sub_pb, sub_row_piece, shift = _readonly(np.zeros(1, np.uint8)), z64, z64, z64
    sub_as = sub_ae = _R64
    if other.shape[0]:  # (without `aligned`, their alignments are computed and dropped: the passes have no ids-only mode)
        sub_data, sub_off = gather_rows(data, offsets, other)
        sub_text, sub_pb, _, sub_row_piece, sub_as, sub_ae = normalize_rows(norm, sub_data, sub_off, at, classes, small)
        shift = offsets[other] - sub_off[:-1]
    args = (data, ps, pe, pk, row_piece, row_sub, *amap, cm, cd, sub_text, sub_pb, sub_row_piece, sub_as, sub_ae,
            shift)
    on(merge_pieces)(False, *args, pb, np.zeros(1, np.uint8), _EMPTY_I64, _EMPTY_I64)
    np.cumsum(pb, out=pb)
    total = int(pb[-1])
    text = np.empty(total, np.uint8)
    if not aligned:
        on(merge_pieces)(True, *args, pb, text, _EMPTY_I64, _EMPTY_I64)
        return text, pb, pk, row_piece
    ias, iae = np.empty(total, np.int64), np.empty(total, np.int64)
    on(merge_pieces)(True, *args, pb, text, ias, iae)
    return text, pb, pk, row_piece, ias, iae


def _words(tok, data, offsets, small=False):
    """Words of every row: (text they point into, its row offsets, words per row, ws, we, wv, wk, alignment)."""
    on = _on(small)
    n = offsets.shape[0] - 1
    pt = tok.spec.pre_tokenizer
    at = tok._added.arrays()
    classes = tok._classes
    if tok._norm is None and small:
        counts, row_word, ws, we, wv, wk = words_serial(data, offsets, pt.prog, pt.add_prefix_space, classes, *at)
        return data, offsets, counts, row_word, ws, we, wv, wk, None
    counts = np.empty(n, np.int64)
    if tok._norm is None:
        count_words(data, offsets, pt.prog, pt.add_prefix_space, classes, *at, counts)
        text, text_off, align = data, offsets, None
    else:
        text, pb, pk, row_piece, ias, iae = normalize_rows_ids(tok._norm, data, offsets, at, classes, small, True)
        text = _readonly(text)  # (as the batch's own bytes are: one specialization of each kernel after this)
        z = np.zeros(1, np.int64)
        on(piece_word_rows)(False, text, pb, pk, row_piece, pt.prog, pt.add_prefix_space, classes, *at, z, z, z,
                            np.zeros(1, np.uint8), np.zeros(1, np.int32), counts)
        text_off, align = _readonly(pb[row_piece]), (ias, iae)
    row_word = _scan(counts)
    nw = int(row_word[-1])
    ws = np.empty(nw, np.int64)
    we = np.empty(nw, np.int64)
    wv = np.empty(nw, np.uint8)
    wk = np.empty(nw, np.int32)
    if tok._norm is None:
        fill_words(data, offsets, pt.prog, pt.add_prefix_space, classes, *at, row_word, ws, we, wv, wk)
    else:
        on(piece_word_rows)(True, text, pb, pk, row_piece, pt.prog, pt.add_prefix_space, classes, *at, row_word,
                            ws, we, wv, wk, counts)
    return text, text_off, counts, row_word, ws, we, wv, wk, align


count_words_serial = _twin(count_words)
fill_words_serial = _twin(fill_words)


@cpu_kernel
def word_room(counts):
    """(each row's first word, ws, we, wv, wk) for rows of counts[r] words: the words' arrays, to fill."""
    n = counts.shape[0]
    row_word = np.empty(n + 1, np.int64)
    row_word[0] = 0
    for r in range(n):
        row_word[r + 1] = row_word[r] + counts[r]
    nw = row_word[n]
    return row_word, np.empty(nw, np.int64), np.empty(nw, np.int64), np.empty(nw, np.uint8), np.empty(nw, np.int32)


@cpu_kernel
def words_serial(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first):
    """`_words` of a small call without a normalizer, in one compiled step on the calling thread:
    (words per row, each row's first word, ws, we, wv, wk)."""
    n = offsets.shape[0] - 1
    counts = np.empty(n, np.int64)
    count_words_serial(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first, counts)
    row_word, ws, we, wv, wk = word_room(counts)
    fill_words_serial(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first, row_word,
                      ws, we, wv, wk)
    return counts, row_word, ws, we, wv, wk


def _model_distinct(tok, text, ws, we, wv, wk, small=False):
    """The model over each distinct word once; every word then points at its representative's
    tokens (cap_off per word), which the compaction copies with the word's own spans."""
    if small:
        return model_distinct_serial(text, ws, we, wv, wk, *tok._model.arrays())
    uid, first = distinct_words(text, ws, we, wv, wk, word_hashes(text, ws, we, wv, wk), 2 * numba.get_num_threads())
    uws, uwe, uwv, uwk = ws[first], we[first], wv[first], wk[first]
    cap = np.where(uwk >= 0, 1, uwe - uws + uwv).astype(np.int64)
    ucap_off = _scan(cap)
    total = int(ucap_off[-1])
    cap_ids = np.empty(total, np.int32)
    cap_st = np.empty(total, np.int64)
    cap_en = np.empty(total, np.int64)
    untok = np.empty(first.shape[0], np.int64)
    n_chunks = min(max(first.shape[0] // 256, 1), 8 * numba.get_num_threads())
    encode_words(text, uws, uwe, uwv, uwk, ucap_off, *tok._model.arrays(), n_chunks, cap_ids, cap_st, cap_en, untok)
    return ucap_off[uid], cap_ids, cap_st, cap_en, untok[uid]


word_hashes_serial = _twin(word_hashes)
distinct_words_serial = _twin(distinct_words)
encode_words_serial = _twin(encode_words)


@cpu_kernel
def model_distinct_serial(text, ws, we, wv, wk, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
                          byte_fallback_ids, affix, params):
    """`_model_distinct` of a small call in one compiled step on the calling thread (its numpy steps
    were a third of a one-document `encode`)."""
    uid, first = distinct_words_serial(text, ws, we, wv, wk, word_hashes_serial(text, ws, we, wv, wk), 1)
    nu = first.shape[0]
    uws, uwe, uwv, uwk = ws[first], we[first], wv[first], wk[first]
    ucap_off = np.empty(nu + 1, np.int64)
    ucap_off[0] = 0
    for u in range(nu):
        ucap_off[u + 1] = ucap_off[u] + (1 if uwk[u] >= 0 else uwe[u] - uws[u] + uwv[u])
    total = ucap_off[nu]
    cap_ids = np.empty(total, np.int32)
    cap_st = np.empty(total, np.int64)
    cap_en = np.empty(total, np.int64)
    untok = np.empty(nu, np.int64)
    encode_words_serial(text, uws, uwe, uwv, uwk, ucap_off, tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                        byte_ids, byte_fallback_ids, affix, params, 1, cap_ids, cap_st, cap_en, untok)
    return ucap_off[uid], cap_ids, cap_st, cap_en, untok[uid]


compact_serial = _twin(compact)


# ---- a small call's tables as one argument ----
# numba unboxes each array argument into a meminfo of its own, ~0.1 us an array: a small call's 18-23
# tables were ~2 us of a one-row call's ~14. Their addresses in one int64 array are one argument;
# `tables` makes the arrays from it inside the compiled call, without a meminfo.

# (the dtype and number of dimensions of each table, in the order `tables` returns them)
TABLE_KINDS = ((np.int64, 1), (np.uint8, 1), (np.uint8, 1), (np.uint8, 1),  # program, classes, asc, first4
               (np.uint8, 1), (np.int64, 1), (np.int32, 1), (np.int32, 1), (np.uint8, 2),  # added tokens
               (np.uint8, 1), (np.int64, 1), (np.int32, 1), (np.int64, 2), (np.int64, 1), (np.int32, 1),  # model
               (np.int32, 1), (np.uint8, 1), (np.int64, 1),
               (np.int32, 1), (np.int32, 1), (np.uint8, 1), (np.int64, 1), (np.uint8, 1))  # lead, trail, raw first4, amap


def address_table(arrays):
    """(table, kept): row i of table is array i's address and shape, for `tables`; `kept` holds the
    arrays it points into (C-contiguous, of TABLE_KINDS' dtypes), which must live as long as the
    table is used."""
    assert len(arrays) == len(TABLE_KINDS)
    tab = np.zeros((len(arrays), 3), np.int64)
    kept = []
    for i, (a, (dtype, ndim)) in enumerate(zip(arrays, TABLE_KINDS)):
        a = np.ascontiguousarray(a, dtype)
        assert a.ndim == ndim
        kept.append(a)
        tab[i] = a.__array_interface__["data"][0], a.shape[0], a.shape[1] if ndim == 2 else 0
    return tab, tuple(kept)


# (compiled with reference counting: a function without it may return no array it made)
@jitable(inline="always", _nrt=True)
def _vec(tab, i, dtype):
    return numba.carray(pointer(tab[i, 0], dtype), tab[i, 1])


@jitable(inline="always", _nrt=True)
def _grid(tab, i, dtype):
    return numba.carray(pointer(tab[i, 0], dtype), (tab[i, 1], tab[i, 2]))


@jitable(inline="always", _nrt=True)
def tables(tab):
    """The tables of an `address_table`, typed as Python passes them to the threaded kernels: (program,
    classes, asc, first4, added tokens' five, model's nine, lead spaces, trail spaces, the raw-text
    added tokens' first4, ASCII map offsets, ASCII map bytes)."""
    at = (_vec(tab, 4, np.uint8), _vec(tab, 5, np.int64), _vec(tab, 6, np.int32), _vec(tab, 7, np.int32),
          _grid(tab, 8, np.uint8))
    model = (_vec(tab, 9, np.uint8), _vec(tab, 10, np.int64), _vec(tab, 11, np.int32), _grid(tab, 12, np.int64),
             _vec(tab, 13, np.int64), _vec(tab, 14, np.int32), _vec(tab, 15, np.int32), _vec(tab, 16, np.uint8),
             _vec(tab, 17, np.int64))
    return (_vec(tab, 0, np.int64), _vec(tab, 1, np.uint8), readonly(_vec(tab, 2, np.uint8)),
            readonly(_vec(tab, 3, np.uint8)), at, model, _vec(tab, 18, np.int32), _vec(tab, 19, np.int32),
            readonly(_vec(tab, 20, np.uint8)), _vec(tab, 21, np.int64), _vec(tab, 22, np.uint8))


@cpu_kernel
def spans_serial(data, offsets, tab, pt_prefix, trim):
    """A small call's `Encoding` fields (`token_table`) and its rows' token offsets, without a normalizer,
    in one compiled step on the calling thread: `encode`'s eight steps, their numpy glue and the
    fields' own were most of a one-text `Tokenizer.encode`. tab: the tokenizer's `address_table`."""
    (pt_kind, classes, asc, first4, (at_data, at_off, at_ids, at_flags, at_first),
     (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params),
     lead_tab, trail_tab, first4_raw, amap_off, amap_data) = tables(tab)
    counts, row_word, ws, we, wv, wk = words_serial(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                                                    at_flags, at_first)
    return spans_of_words(data, offsets, data, offsets, row_word, ws, we, wv, wk, _EMPTY_I64, _EMPTY_I64, classes,
                          tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix,
                          params, lead_tab, trail_tab, trim)


piece_word_rows_serial = _twin(piece_word_rows)


@cpu_kernel
def mapped_words(data, offsets, tab, cm, cd, pt_prefix):
    """A small call's rows through a normalizer's ASCII and char maps (`mapped_rows`) and their words
    (`piece_word_rows`): (text, pb, pk, row_piece, ias, iae, row_word, ws, we, wv, wk); an empty
    row_piece when the maps do not cover some character."""
    (pt_kind, classes, _, _, (at_data, at_off, at_ids, at_flags, at_first), _, _, _, first4_raw, amap_off,
     amap_data) = tables(tab)
    text, pb, pk, row_piece, ias, iae = mapped_rows(data, offsets, classes, at_data, at_off, at_ids, at_flags,
                                                    at_first, first4_raw, amap_off, amap_data, cm, cd, np.bool_(True))
    text = readonly(text)  # (the types `_words` passes: one specialization of each step for every caller)
    counts = np.zeros(offsets.shape[0] - 1 if row_piece.shape[0] else 0, np.int64)
    if row_piece.shape[0]:
        z = np.zeros(1, np.int64)
        piece_word_rows_serial(np.bool_(False), text, pb, pk, row_piece, pt_kind, pt_prefix, classes, at_data, at_off,
                               at_ids, at_flags, at_first, z, z, z, np.zeros(1, np.uint8), np.zeros(1, np.int32),
                               counts)
    row_word, ws, we, wv, wk = word_room(counts)
    if row_piece.shape[0]:
        piece_word_rows_serial(np.bool_(True), text, pb, pk, row_piece, pt_kind, pt_prefix, classes, at_data, at_off,
                               at_ids, at_flags, at_first, row_word, ws, we, wv, wk, counts)
    return text, pb, pk, row_piece, ias, iae, row_word, ws, we, wv, wk


@cpu_kernel
def spans_mapped_serial(data, offsets, tab, cm, cd, pt_prefix, trim):
    """`spans_serial` of a small call with a normalizer that maps text character by character
    (`Normalizer.ascii_map`, `Normalizer.char_map`: cm, cd): (fields, row_tok, normalized text), or
    empty row_tok when the maps do not cover some character (the caller takes the general way)."""
    (_, classes, _, _, _, (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix,
                           params), lead_tab, trail_tab, _, _, _) = tables(tab)
    text, pb, pk, row_piece, ias, iae, row_word, ws, we, wv, wk = mapped_words(data, offsets, tab, cm, cd, pt_prefix)
    if row_piece.shape[0] == 0:
        return np.empty((9, 0), np.int64), _EMPTY_I64, text
    n = offsets.shape[0] - 1
    text_off = np.empty(n + 1, np.int64)
    for r in range(n + 1):
        text_off[r] = pb[row_piece[r]]
    f, row_tok = spans_of_words(data, offsets, text, readonly(text_off), row_word, ws, we, wv, wk, ias, iae, classes,
                                tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids,
                                affix, params, lead_tab, trail_tab, trim)
    return f, row_tok, text


@cpu_kernel
def wordpiece_ids_mapped_serial(data, offsets, tab, cm, cd, pt_prefix, rec, idata, kdata, state, lim, trim):
    """`spans_mapped_serial` of a WordPiece tokenizer from its ids (`serial_ids`, the word cache) and
    one walk over its words (`wordpiece_spans`): (fields, row_tok, normalized text, ok), or empty
    row_tok when the maps do not cover some character. The model on every word was most of a
    paragraph's `encode`."""
    (_, classes, _, _, _, (tok_data, tok_offsets, _, _, _, _, _, affix, params), lead_tab, trail_tab, _, _,
     _) = tables(tab)
    text, pb, pk, row_piece, ias, iae, row_word, ws, we, wv, wk = mapped_words(data, offsets, tab, cm, cd, pt_prefix)
    if row_piece.shape[0] == 0:
        return np.empty((9, 0), np.int64), _EMPTY_I64, text, False
    normalized = row_piece.shape[0] > 0  # (a bool, not the literal True: `serial_ids` as Python calls it)
    none = np.zeros(0, np.int32)
    ids, row_tok = serial_ids(text, readonly(pb[row_piece]), pb, pk, row_piece, normalized, tab, pt_prefix, rec, idata,
                              kdata, state, lim, np.bool_(False), none, none)
    f = np.empty((9, ids.shape[0]), np.int64)
    ok = wordpiece_spans_serial(data, offsets, text, row_word, ws, we, wv, wk, ias, iae, classes, ids, row_tok,
                                tok_data, tok_offsets, affix, params, lead_tab, trail_tab, trim, 1, f)
    return f, row_tok, text, ok


@cpu_kernel
def spans_of_words(data, offsets, text, text_off, row_word, ws, we, wv, wk, ias, iae, classes, tok_data, tok_offsets,
                   vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params, lead_tab, trail_tab,
                   trim):
    """`token_table` and row token offsets of a small call's words (ws.. into `text`, whose rows are
    text_off; byte j of `text` from data[ias[j]:iae[j]], or `text` is `data` when ias is empty)."""
    cap_off, cap_ids, cap_st, cap_en, ntok = model_distinct_serial(text, ws, we, wv, wk, tok_data, tok_offsets,
                                                                   vocab_slots, merges, byte_pairs, byte_ids,
                                                                   byte_fallback_ids, affix, params)
    n = text_off.shape[0] - 1
    nw = ws.shape[0]
    word_tok = np.empty(nw + 1, np.int64)
    word_tok[0] = 0
    for i in range(nw):
        word_tok[i + 1] = word_tok[i] + ntok[i]
    word_row = np.empty(nw, np.int64)
    for r in range(n):
        word_row[row_word[r]:row_word[r + 1]] = r
    T = word_tok[nw]
    ids = np.empty(T, np.int32)
    t_st, t_en = np.empty(T, np.int64), np.empty(T, np.int64)
    t_lead, t_trail = np.empty(T, np.int32), np.empty(T, np.int32)
    t_added = np.empty(T, np.uint8)
    compact_serial(text, ws, we, wv, wk, word_row, text_off, cap_off, cap_ids, cap_st, cap_en, word_tok, True, classes,
                   lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added)
    row_tok = np.empty(n + 1, np.int64)
    for r in range(n + 1):
        row_tok[r] = word_tok[row_word[r]]
    o_st, o_en = t_st, t_en
    if ias.shape[0]:  # (token spans are never empty)
        o_st, o_en = np.empty(T, np.int64), np.empty(T, np.int64)
        for t in range(T):
            o_st[t] = ias[t_st[t]]
            o_en[t] = iae[t_en[t] - 1]
    return token_table_serial(char_index_serial(data), offsets, row_tok, row_word, word_tok, ids, o_st, o_en, t_lead,
                              t_trail, t_added, t_st, t_en, trim), row_tok


@cpu_kernel(parallel=True)
def token_table(cum, row_start, row_tok, row_word, word_tok, ids, t_st, t_en, t_lead, t_trail, t_added, s_st, s_en,
                trim):
    """A run's per-token fields as one (9, tokens) array, whose `tolist` gives an `Encoding`'s lists at
    once: ids, character offsets within the row (start, end), the word's index within the row,
    leading and trailing spaces (ByteLevel trimming), added-token flag, and the span in the text the
    token was cut from (an added token shows that text). As numpy steps they were a fifth of a
    one-text `Tokenizer.encode`. trim: 1, the offsets trimmed as ByteLevel's post-processor does
    (`postprocess.trim_offsets`, a Python loop over every token); 2, the same with add_prefix_space."""
    T = ids.shape[0]
    f = np.empty((9, T), np.int64)
    for r in prange(row_tok.shape[0] - 1):  # (serial in a small call's step: `token_table_serial`)
        base = cum[row_start[r]]
        for w in range(row_word[r], row_word[r + 1]):
            for t in range(word_tok[w], word_tok[w + 1]):
                table_column(f, t, t == row_tok[r], ids[t], cum[t_st[t]] - base, cum[t_en[t]] - base,
                             w - row_word[r], t_lead[t], t_trail[t], t_added[t], s_st[t], s_en[t], trim)
    return f


@jitable
def table_column(f, t, first, tid, a, z, word, lead, trail, added, s_st, s_en, trim):
    """Token t's column of `token_table` (first: the row's first token), its character offsets a, z
    trimmed as `trim` says."""
    if trim > 0:
        if lead > 0:
            if trim == 2 and lead == 1 and (first or a == 0):
                lead = 0
            a = min(a + lead, z)
        if trail > 0 and z >= trail:
            z = max(z - trail, a)
    f[0, t] = tid
    f[1, t] = a
    f[2, t] = z
    f[3, t] = word
    f[4, t] = lead
    f[5, t] = trail
    f[6, t] = added
    f[7, t] = s_st
    f[8, t] = s_en


token_table_serial = _twin(token_table)
SMALL_TABLE = 1 << 12  # tokens: a smaller run's table is made on the calling thread


@cpu_kernel(parallel=True)
def spans_from_ids(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first, ids,
                   row_tok, tok_offsets, lead_tab, trail_tab, trim, threads, f):
    """`token_table` into f (ok) of a byte-level run from its ids (the word cache's path) and its words
    (no prefix space, no normalizer, no affixes): a word's tokens hold its bytes in order, each as
    many as its vocabulary entry, so their spans follow from the ids alone and the model need not run
    again. Each block of rows finds its words in scratch of its own (no count pass, no words array
    for the batch); characters are counted as a row's tokens advance (token starts never move back).
    ok is False where a row's tokens do not fill its words exactly (then nothing is trusted)."""
    n = offsets.shape[0] - 1
    bad = np.zeros(n, np.uint8)
    blocks = min(n, 4 * threads)
    for k in prange(blocks):
        lo, hi = k * n // blocks, (k + 1) * n // blocks
        longest = 0
        for r in range(lo, hi):
            longest = max(longest, offsets[r + 1] - offsets[r])
        ws, we = np.empty(longest + 1, np.int64), np.empty(longest + 1, np.int64)
        wv, wk = np.empty(longest + 1, np.uint8), np.empty(longest + 1, np.int32)
        for r in range(lo, hi):
            row_end = offsets[r + 1]
            nw = row_words(data, offsets[r], row_end, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags,
                           at_first, True, ws, we, wv, wk, 0)
            p, chars = offsets[r], 0  # characters that start in [row start, p)
            t, t_end = row_tok[r], row_tok[r + 1]
            for w in range(nw):
                s, e = ws[w], we[w]
                acc = 0
                while acc < e - s and bad[r] == 0:
                    if t >= t_end:
                        bad[r] = 1
                        break
                    tid = ids[t]
                    if wk[w] >= 0:  # an added token: one token, the whole word
                        a, z = s, e
                        lead, trail = space_counts(data, a, z, classes)
                        added, acc = 1, e - s
                        if tid != wk[w]:
                            bad[r] = 1
                    else:
                        size = tok_offsets[tid + 1] - tok_offsets[tid]
                        if size <= 0 or acc + size > e - s:
                            bad[r] = 1
                            break
                        a, z = token_span(data, s, e, 0, -1, acc, acc + size, row_end)
                        lead, trail = lead_tab[tid], trail_tab[tid]
                        added = 0
                        acc += size
                    while p < a:
                        chars += (data[p] & 0xC0) != 0x80
                        p += 1
                    c1 = chars
                    for q in range(a, z):
                        c1 += (data[q] & 0xC0) != 0x80
                    table_column(f, t, t == row_tok[r], tid, chars, c1, w, lead, trail, added, a, z, trim)
                    t += 1
            if t != t_end:
                bad[r] = 1
    return not bad.any()


spans_from_ids_serial = _twin(spans_from_ids)


@cpu_kernel(parallel=True)
def wordpiece_spans(data, offsets, text, row_word, ws, we, wv, wk, ias, iae, classes, ids, row_tok, tok_data,
                    tok_offsets, affix, params, lead_tab, trail_tab, trim, threads, f):
    """`token_table` into f (ok) of a WordPiece run from its ids (the word cache's path) and its words
    in the normalized `text` (byte j from data[ias[j]:iae[j]]; ias empty when `text` is `data`): a
    word's tokens are its text in order, each its vocabulary entry less the continuing prefix after
    the first, or one unk token for the whole word; the model need not run again. Each token's
    bytes are checked against the text. ok is False where a row's tokens do not fill its words so
    (then nothing is trusted)."""
    n = offsets.shape[0] - 1
    bad = np.zeros(n, np.uint8)
    n_prefix, unk = params[1], params[4]
    blocks = min(n, 4 * threads)
    for k in prange(blocks):
        for r in range(k * n // blocks, (k + 1) * n // blocks):
            p, chars = offsets[r], 0  # characters that start in [row start, p)
            t, t_end = row_tok[r], row_tok[r + 1]
            for w in range(row_word[r], row_word[r + 1]):
                s, e = ws[w], we[w]
                if wv[w] != 0:
                    bad[r] = 1
                acc = 0
                while acc < e - s and bad[r] == 0:
                    if t >= t_end:
                        bad[r] = 1
                        break
                    tid = ids[t]
                    a, z = s, e
                    if wk[w] >= 0:  # an added token: one token, the whole word
                        lead, trail = space_counts(text, a, z, classes)
                        added = 1
                        if tid != wk[w]:
                            bad[r] = 1
                    else:
                        ts, te = tok_offsets[tid], tok_offsets[tid + 1]
                        added = 0
                        lead, trail = lead_tab[tid], trail_tab[tid]
                        if acc > 0:  # a later piece: its entry starts with the prefix
                            if te - ts <= n_prefix:
                                bad[r] = 1
                                break
                            for q in range(n_prefix):
                                if tok_data[ts + q] != affix[q]:
                                    bad[r] = 1
                            ts += n_prefix
                        size = te - ts
                        fits = size > 0 and acc + size <= e - s
                        if fits:
                            for q in range(size):
                                if text[s + acc + q] != tok_data[ts + q]:
                                    fits = False
                                    break
                        if tid == unk and acc == 0:  # the whole word, unless the word starts with unk's text
                            if fits and size < e - s:
                                bad[r] = 1
                        elif not fits:
                            bad[r] = 1
                        else:
                            a, z = s + acc, s + acc + size
                    if bad[r]:
                        break
                    acc = z - s
                    oa, oz = a, z
                    if ias.shape[0]:
                        oa, oz = ias[a], iae[z - 1]
                    if oa < p:  # (alignments that move back: count again from the row's start)
                        p, chars = offsets[r], 0
                    while p < oa:
                        chars += (data[p] & 0xC0) != 0x80
                        p += 1
                    c1 = chars
                    if oz >= oa:
                        for q in range(oa, oz):
                            c1 += (data[q] & 0xC0) != 0x80
                    else:
                        c1 = 0
                        for q in range(offsets[r], oz):
                            c1 += (data[q] & 0xC0) != 0x80
                    table_column(f, t, t == row_tok[r], tid, chars, c1, w - row_word[r], lead, trail, added, a, z,
                                 trim)
                    t += 1
            if t != t_end:
                bad[r] = 1
    return not bad.any()


wordpiece_spans_serial = _twin(wordpiece_spans)
KEEP_TABLE = 1 << 25  # int64 entries (256 MB)
KEEP_MIN = 1 << 16  # entries: a small call's table is not worth the lock
# A token table's memory kept for the next call: a fresh table faulted its pages in at 30 of the 68 ms
# it took over big.txt (gpt2, 2 cores). Callers give a table back once they have read it.
_TABLE = Spare(lambda n: np.empty(n, np.int64), KEEP_TABLE)


def give_back_table(f):
    if f.size < KEEP_MIN:
        return
    root = f
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.dtype == np.int64 and root.flags.c_contiguous:
        _TABLE.give_back(root if root.ndim == 1 else root.reshape(-1))


def _spans_from_ids(tok, b, data, offsets, trim):
    """`spans` of a byte-level tokenizer's larger call from the ids path (its word cache) and one pass
    over the words, or None where it does not apply. The spans path proper runs the model on every
    distinct word of every call (gpt2 over big.txt: ~25 MB/s against ~570 for ids alone)."""
    consts = _ids_consts(tok)
    model, from_ids = consts[5], consts[8]
    if not from_ids:
        return None
    ids, row_tok = tok._run_ids(b)
    pt = tok.spec.pre_tokenizer
    f = _TABLE.take(9 * ids.shape[0])[:9 * ids.shape[0]].reshape(9, ids.shape[0])
    if spans_from_ids(data, offsets, pt.prog, pt.add_prefix_space, tok._classes, *tok._added.arrays(), ids, row_tok,
                      model[1], tok._model.lead_spaces, tok._model.trail_spaces, trim, numba.get_num_threads(), f):
        return data, f, row_tok
    give_back_table(f)
    return None


def _wordpiece_spans(tok, b, data, offsets, trim):
    """`spans` of a WordPiece tokenizer's larger call from the ids path (its word cache) and one pass
    over the words, or None where it does not apply. The spans path proper runs the model on every
    distinct word of every call (bert-base-uncased over big.txt: ~40% of the call)."""
    if tok._model.kind != WORDPIECE:
        return None
    text, _, _, row_word, ws, we, wv, wk, align = _words(tok, data, offsets)
    ias, iae = (_EMPTY_I64, _EMPTY_I64) if align is None else align
    ids, row_tok = tok._run_ids(b)
    f = _TABLE.take(9 * ids.shape[0])[:9 * ids.shape[0]].reshape(9, ids.shape[0])
    model = tok._model
    if wordpiece_spans(data, offsets, _readonly(text), row_word, ws, we, wv, wk, _readonly(ias), _readonly(iae),
                       tok._classes, ids, row_tok, model.tok_data, model.tok_offsets, model.affix, model.params,
                       model.lead_spaces, model.trail_spaces, trim, numba.get_num_threads(), f):
        return text, f, row_tok
    give_back_table(f)
    return None


def spans(tok, b, trim=0):
    """(text the tokens were cut from, `token_table`, rows' token offsets) of host Batch `b`. Give the
    table back (`give_back_table`) once it is read."""
    data, offsets = _readonly(b.data), _readonly(b.offsets)
    total = int(offsets[-1]) - int(offsets[0])
    # (WordPiece's offsets calls gain from the calling thread as ids-only calls do: 0.62-0.81x the
    # threaded time at 9-12 KB on two threads; gpt2's lose, 1.08-1.25x)
    if total < SERIAL_CALL or (tok._model.kind == WORDPIECE and serial_ids_call(total)):
        norm = tok._norm
        if norm is None:
            got = _small_spans_from_ids(tok, data, offsets, total, trim)
            if got is not None:
                return got
            consts = _ids_consts(tok)
            f, row_tok = spans_serial(data, offsets, consts[9][0], consts[0].add_prefix_space, trim)
            return data, f, row_tok
        consts = _ids_consts(tok)
        if consts[10] is not None and tok._model.kind == WORDPIECE and total >= WORDPIECE_FROM_IDS:
            got = _small_wordpiece_spans(tok, data, offsets, total, trim)
            if got is not None:
                return got
        elif consts[10] is not None:
            f, row_tok, text = spans_mapped_serial(data, offsets, consts[9][0], *_known_chars(norm),
                                                   consts[0].add_prefix_space, trim)
            if row_tok.shape[0]:
                return text, f, row_tok
    else:
        got = _spans_from_ids(tok, b, data, offsets, trim) or _wordpiece_spans(tok, b, data, offsets, trim)
        if got is not None:
            return got
    r = encode(tok, b, True)
    return r["text"], fields(r, trim), r["row_tok"]


def fields(r, trim=0):
    """`token_table` of a run's raw arrays (host arrays, from either backend)."""
    table = _on(r["ids"].shape[0] < SMALL_TABLE)(token_table)
    return table(r["char_index"], r["row_start"], r["row_tok"], r["row_word"], r["word_tok"], r["ids"], r["t_st"],
                 r["t_en"], r["t_lead"], r["t_trail"], r["t_added"], r["s_st"], r["s_en"], trim)


def encode(tok, b, want_spans):
    """Runs the pipeline for Tokenizer `tok` over host Batch `b`; returns the raw per-token arrays."""
    data, offsets = _readonly(b.data), _readonly(b.offsets)  # one specialization per kernel (see encode_ids)
    n = len(offsets) - 1
    classes = tok._classes
    small = int(offsets[-1] - offsets[0]) < SERIAL_CALL
    text, text_off, counts, row_word, ws, we, wv, wk, align = _words(tok, data, offsets, small)
    cap_off, cap_ids, cap_st, cap_en, ntok = _model_distinct(tok, text, ws, we, wv, wk, small)
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
    _on(small)(compact)(text, ws, we, wv, wk, word_row, text_off, cap_off, cap_ids, cap_st, cap_en, word_tok,
                        want_spans, classes, tok._model.lead_spaces, tok._model.trail_spaces, ids, t_st, t_en, t_lead,
                        t_trail, t_added)
    r = {"ids": ids, "row_tok": word_tok[row_word], "row_word": row_word, "word_tok": word_tok,
         "row_start": offsets[:-1]}
    if want_spans:
        # t_st/t_en: spans in the original bytes; s_st/s_en: in `text`, the (normalized) buffer they were cut from
        r.update(t_st=t_st, t_en=t_en, t_lead=t_lead, t_trail=t_trail, t_added=t_added,
                 char_index=_on(small)(char_index)(data), text=text, s_st=t_st, s_en=t_en)
        if align is not None:  # normalized spans -> original bytes (token spans are never empty)
            r.update(t_st=align[0][t_st], t_en=align[1][t_en - 1])
    return r


# ---- the ids-only fast path: one fused pass per chunk of rows, with the tokenizer's word cache ----

BLOCK = 32  # words per block of the fused loop: their table lookups are prefetched together
# byte-level words up to this long merge by a linear scan; longer ones are cut where no merge can
# join two bytes first (`merge_byte_long`: 0.47-0.71x the scan's time for CJK and the UDHR's 17-32-byte
# words, 1.2x for English ones, which are few)
LINEAR_BYTES = 16
assert LINEAR_BYTES <= GROUP_ROOM  # (`fill_misses` merges the words of up to LINEAR_BYTES in that room)
SCRATCH = 1024  # model-space bytes of the fused loop's model scratch; a longer word has its own


@cpu_kernel
def long_word_ids(data, s, e, virt, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
                  byte_fallback_ids, affix, params, out, pos):
    """Writes the ids of a word too long for the fused loop's scratch at out[pos:], with scratch of its
    own; returns how many."""
    extra = params[1] + params[2] + 8
    w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf = model_scratch(e - s + virt + 1, extra)
    k = word_tokens_cut(data, s, e, virt, -1, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
                        byte_fallback_ids, affix, params, w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv,
                        kbuf)
    for q in range(k):
        out[pos + q] = sym_id[q]
    return k


@jitable
def word_tokens_cut(data, s, e, virt, kind, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
                    byte_fallback_ids, affix, params, w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv,
                    kbuf):
    """`word_tokens` on the CPU, where a byte-level word over LINEAR_BYTES is cut first as the ids path
    cuts it (`merge_byte_long`; the GPU sends such words here): its spans follow from its tokens'
    lengths, since a byte-level word's tokens hold its bytes in order."""
    if kind < 0 and e - s + virt > LINEAR_BYTES and (params[3] & 16) != 0 and (params[3] & 4) == 0:
        k = merge_byte_long(data, s, e, virt, byte_ids, byte_pairs, merges, params[0], sym_id, sym_st, nxt, prv, heap)
        p = 0
        for q in range(k):
            sym_st[q] = p
            p += tok_offsets[sym_id[q] + 1] - tok_offsets[sym_id[q]]
            sym_en[q] = p
        return k
    return word_tokens(data, s, e, virt, kind, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
                       byte_fallback_ids, affix, params, w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv,
                       kbuf)


@jitable
def whole_word(text, s, e, tok_data, tok_offsets, vocab_slots, sym_id):
    """1, with the id in sym_id[0], where the word is a token itself (ignore_merges takes it whole), else 0."""
    t_id = bytes_lookup(vocab_slots, tok_data, tok_offsets, text, s, e)
    if t_id < 0:
        return 0
    sym_id[0] = t_id
    return 1


@cpu_kernel(parallel=True)
def encode_ids_chunks(g_lo, g_hi, group_chunk, text, text_off, pb, pk, row_piece, normalized, chunk_row, chunk_cap,
                      pt_kind, pt_prefix, classes, asc, first4, at_data, at_off, at_ids, at_flags, at_first,
                      tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                      byte_ids, byte_fallback_ids, affix, params, rec, idata, kdata, out, row_ntok, resume, state, lim):
    """One prange iteration per group g_lo..g_hi-1 of a wave, each taking the wave's chunks
    (group_chunk[g_lo] to group_chunk[g_hi] - 1; rows chunk_row[c] to chunk_row[c + 1] - 1 in chunk c)
    from one counter until none is left, so that no thread waits at the wave's end while another
    still has chunks of its own to do: pre-tokenize a row, then each word's ids come from the shared
    cache (`rec`/`idata`) or from the model, a new word going into the shared table at once
    (`insert_word`, within `state`/`lim`, as in `scan_rest`). Chunk c's ids go to out[chunk_cap[c]:],
    room for its worst case. Chunk c starts at row resume[c, 0], its byte resume[c, 1] and id
    resume[c, 2] (that row's first id at resume[c, 3]): where `cached_prefix` or `scan_rest` stopped.

    Words go in blocks: the spans and keys of up to BLOCK words first (each word's slot in the shared
    table prefetched), then their lookups. With `asc` (the GPT-2, cl100k or o200k pattern alone, no
    normalizer, no prefix space) a row that holds no added token's bytes is scanned here (GPT-2's ASCII
    runs keyed as they are read)."""
    extra = params[1] + params[2] + 8
    bytewise = (params[3] & 16) != 0  # every byte a symbol
    whole_first = (params[3] & 4) != 0  # ignore_merges: a word that is a token is taken whole
    fused = asc.shape[0] == 256
    gpt2 = pt_kind[1] == GPT2  # (else, with `fused`, the cl100k or o200k pattern)
    rec_flat = rec.reshape(rec.shape[0] * 4)
    c_lo = group_chunk[g_lo]
    c_hi = group_chunk[g_hi]
    claim = np.zeros(1, np.int64)
    longest = 1  # (the wave's longest row: any of its chunks may fall to any group)
    for r in range(chunk_row[c_lo], chunk_row[c_hi]):
        longest = max(longest, text_off[r + 1] - text_off[r])
    for _g in prange(g_hi - g_lo):
        wcap = longest + 1 if pt_prefix == 0 else 2 * longest + 2
        ws = np.empty(wcap, np.int64)
        we = np.empty(wcap, np.int64)
        wv = np.empty(wcap, np.uint8)
        wk = np.empty(wcap, np.int32)
        bs = np.empty(BLOCK, np.int64)
        be = np.empty(BLOCK, np.int64)
        bv = np.empty(BLOCK, np.uint8)
        bkind = np.empty(BLOCK, np.int32)
        bkey = np.empty((BLOCK, 3), np.uint64)
        # (allocated once: scratch reassigned inside the loop made every model call count references
        # to all ten arrays, a tenth of a WordPiece first pass)
        w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf = model_scratch(SCRATCH, extra)
        for _ in range(c_hi - c_lo):
            c = c_lo + fetch_add(claim, 0, 1)  # (the wave's next chunk: a group that finishes early takes more)
            if c >= c_hi:
                break
            pos = resume[c, 2]
            for r in range(resume[c, 0], chunk_row[c + 1]):
                a = text_off[r]
                b = text_off[r + 1]
                scan = fused and not holds_token(text, a, b, first4, asc, A_ADDED, at_data, at_off, at_flags)
                nw = 0
                if not scan:
                    if normalized:
                        nw = piece_words(text, pb, pk, row_piece[r], row_piece[r + 1], pt_kind, pt_prefix, classes,
                                         at_data, at_off, at_ids, at_flags, at_first, True, ws, we, wv, wk, 0)
                    else:
                        nw = row_words(text, a, b, pt_kind, pt_prefix, classes, at_data, at_off,
                                       at_ids, at_flags, at_first, True, ws, we, wv, wk, 0)
                start = pos
                i = 0
                p = a
                if r == resume[c, 0]:  # (the row `cached_prefix` stopped in: its words from resume[c, 1] on)
                    p = resume[c, 1]
                    start = resume[c, 3]
                while True:
                    n = 0
                    while n < BLOCK:
                        j = 0
                        k0 = np.uint64(0)
                        k1 = np.uint64(0)
                        if scan:
                            if p >= b:
                                break
                            s = p
                            v = 0
                            kind = -1
                            if gpt2:
                                e, j, k0, k1 = ascii_word(text, p, b, asc)
                                if e < 0:
                                    e = match_end(text, p, a, b, 0, classes)
                                    j = 0
                            else:
                                e = pattern_end(text, p, b, classes, pt_kind[1], pt_kind[2])
                            p = e
                        else:
                            if i >= nw:
                                break
                            s, e, v, kind = ws[i], we[i], wv[i], wk[i]
                            i += 1
                        m = e - s + v
                        h = np.uint64(0)
                        if kind < 0 and m <= LONG_BYTES:
                            if j > 0 and m <= KEY_BYTES:
                                h = key_hash(k0, k1, m)
                            elif m <= KEY_BYTES:
                                h, k0, k1 = pack_key(text, s, e, v)
                            else:  # a long key is the word itself: (position in text, virtual space)
                                h, k0, k1 = hash_long(text, s, e, v), np.uint64(s), np.uint64(v)
                            prefetch(rec_flat, 4 * home(h, rec.shape[0]))
                        bs[n] = s
                        be[n] = e
                        bv[n] = v
                        bkind[n] = kind
                        bkey[n, 0] = h
                        bkey[n, 1] = k0
                        bkey[n, 2] = k1
                        n += 1
                    if n == 0:
                        break
                    for t in range(n):
                        if bkind[t] >= 0:
                            out[pos] = bkind[t]
                            pos += 1
                            continue
                        # (v as int64, as `scan_rest` passes it: the helpers compile once for both loops)
                        s, e, v, h, k0, k1 = bs[t], be[t], np.int64(bv[t]), bkey[t, 0], bkey[t, 1], bkey[t, 2]
                        m = e - s + v
                        if m <= LONG_BYTES:
                            if m <= KEY_BYTES:
                                hit = probe(rec, h, k0, k1, m)
                            else:
                                hit = probe_long(rec, h, m, text, s, v, kdata)
                            if hit >= 0:
                                pos += copy_ids(rec[hit, 3], idata, out, pos)
                                continue
                        if m + 1 > SCRATCH:  # (longer than the group's scratch: a word with scratch of its own)
                            k = long_word_ids(text, s, e, v, tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                                              byte_ids, byte_fallback_ids, affix, params, out, pos)
                        else:
                            byte_merges = bytewise and (not whole_first or v == 0)
                            k = 0
                            if byte_merges and whole_first:
                                k = whole_word(text, s, e, tok_data, tok_offsets, vocab_slots, sym_id)
                            if k == 0:
                                if byte_merges and m <= LINEAR_BYTES:
                                    k = merge_byte_word(text, s, e, v, byte_ids, byte_pairs, merges, params[0], sym_id,
                                                        new_buf, 0)
                                elif byte_merges:
                                    k = merge_byte_long(text, s, e, v, byte_ids, byte_pairs, merges, params[0], sym_id,
                                                        sym_st, nxt, prv, heap)
                                else:
                                    k = word_tokens(text, s, e, v, -1, tok_data, tok_offsets, vocab_slots, merges,
                                                    byte_pairs, byte_ids, byte_fallback_ids, affix, params,
                                                    w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf)
                            for q in range(k):
                                out[pos + q] = sym_id[q]
                        if m <= LONG_BYTES and k <= MAX_IDS:
                            insert_word(rec, rec_flat, h, k0, k1, m, s, v, out, pos, k, idata, kdata, text, state, lim)
                        pos += k
                row_ntok[r] = pos - start


@jitable(inline="always")  # (the cached-words loops' hottest code: inlined where LLVM would not)
def scan_block(text, p, a, b, asc, classes, sp, q, st, rec_flat, n_slots, bs, bm, bkey, lean, kind, arg):
    """The next BLOCK words (fewer at the row's end) of a row [a, b) of the GPT-2, cl100k or o200k
    pattern (`kind`, `arg` as in the pre-tokenizer's program) from p, into bs (start), bm (length) and
    bkey (hash, k0, k1; hash 0: a word the cache never holds), each word's first slot prefetched: 64-byte
    `next_start` masks where no apostrophe or byte of 128 and up is near (`sp`, the next such byte),
    `ascii_word` and `match_end` (GPT-2) or `pattern_end` elsewhere. Returns (words, p, sp, q, st)."""
    nt = text.shape[0]
    gpt2 = kind == GPT2
    starts = 0 if gpt2 else (2 if kind == O200K else 1)  # (`next_start`'s kind)
    most = arg if kind == CL100K else 3  # (the most digits in a number)
    n = 0
    was_fast = False  # (the word before p was read with the masks: the bytes before p are plain ASCII)
    while n < BLOCK and p < b:
        if sp < p:
            sp = next_special(text, p, b)
        fast = sp > p + 2 or sp >= b  # (a special byte at p + 1 or p + 2 is in the word or just after it)
        x = text[p]
        # (`pattern_starts` reads the byte before p: not one of 128 and up, nor o200k's '/', which may
        # end a symbol run's [\r\n/]* and so not join a symbol after it)
        if fast and not gpt2 and not was_fast and p > a and (text[p - 1] >= 128 or
                                                             (starts == 2 and text[p - 1] == 47)):
            fast = False
        e = b
        if fast:
            e, q, st = next_start(text, p, a, b, q, st, starts)
            fast = sp > e + 1 or sp >= b
            if fast and not gpt2:
                if 48 <= x <= 57:
                    e = min(e, p + most)
                elif e < b and (text[e - 1] == 10 or text[e - 1] == 13):
                    # (a space or tab after \r or \n starts a word unless a later \r or \n in its
                    # whitespace run takes it too (`\s*[\r\n]+`); o200k's '/' there joins the symbols)
                    y = text[e]
                    if y == 32 or y == 9 or y == 11 or y == 12 or (starts == 2 and y == 47):
                        fast = False
        was_fast = fast
        k0 = np.uint64(0)
        k1 = np.uint64(0)
        j = 0
        if not fast:
            if not gpt2:
                e = pattern_end(text, p, b, classes, kind, arg)
            else:
                e, j, k0, k1 = ascii_word(text, p, b, asc)
                if e < 0:
                    if lean:  # (a constant: `cached_prefix` inlines `match_end`, the loops that run the model call it)
                        e = match_end_inline(text, p, a, b, 0, classes)
                    else:
                        e = match_end(text, p, a, b, 0, classes)
                    j = 0
        m = e - p
        h = np.uint64(0)  # (0: a word the cache never holds)
        # (the two loads written out here, not `pack_key`'s: calling it, warm passes took 1.06-1.17x)
        if j == 0 and m <= KEY_BYTES and p + 16 <= nt:
            k0 = load8(text, p)
            k1 = load8(text, p + 8)
            if m < 8:
                k0 &= ~(ALL_BITS << np.uint64(8 * m))
                k1 = np.uint64(0)
            elif m < 16:
                k1 &= ~(ALL_BITS << np.uint64(8 * (m - 8)))
            h = key_hash(k0, k1, m)
        elif j > 0 and m <= KEY_BYTES:
            h = key_hash(k0, k1, m)
        elif m <= KEY_BYTES:
            h, k0, k1 = pack_key(text, p, e, 0)
        elif m <= LONG_BYTES:
            h = hash_long(text, p, e, 0)
        if h != 0:
            prefetch(rec_flat, 4 * home(h, n_slots))
        bs[n] = p
        bm[n] = m
        bkey[n, 0] = h
        bkey[n, 1] = k0
        bkey[n, 2] = k1
        n += 1
        p = e
    return n, p, sp, q, st


@jitable
def scan_pattern_block(text, p, a, b, asc, classes, sp, q, st, rec_flat, n_slots, bs, bm, bkey, kind, arg):
    """`scan_block` of a cl100k or o200k row, called (a second inlined copy in one loop made numba's
    SSA pass warn)."""
    return scan_block(text, p, a, b, asc, classes, sp, q, st, rec_flat, n_slots, bs, bm, bkey, False, kind, arg)


@cpu_kernel(parallel=True)
def cached_prefix(text, text_off, chunk_row, chunk_cap, pt_kind, asc, first4, at_data, at_off, at_flags,
                  classes, rec, idata, kdata, out, row_ntok, resume, threads):
    """Every chunk of rows of the GPT-2, cl100k or o200k pattern (no normalizer, no prefix space), from
    its start until the first word the shared cache does not hold or the first row that may hold an
    added token; `scan_rest` (byte-level vocabularies) or `encode_ids_chunks` takes over there
    (resume[c]: row, byte, next id's position, the row's first id's position). One prange iteration
    per thread, each taking chunks from one counter (a thread with a static share of the chunks waited
    at the end for the other's). A warm pass is mostly this loop: the words found with `next_start` bit masks, keyed
    with two loads, their records prefetched BLOCK at a time, then probed and copied. Kept apart from
    the fused loop, whose scanner and model leave it short of registers (a lean loop inside it, tried
    before, was slower)."""
    rec_flat = rec.reshape(rec.shape[0] * 4)
    gpt2 = pt_kind[1] == GPT2
    n_chunks = chunk_row.shape[0] - 1
    claim = np.zeros(1, np.int64)
    for _t in prange(min(threads, n_chunks)):  # (numba's thread count read in here stops the kernel's caching)
        bs = np.empty(BLOCK, np.int64)
        bm = np.empty(BLOCK, np.int64)
        bkey = np.empty((BLOCK, 3), np.uint64)
        for _ in range(n_chunks):
            c = fetch_add(claim, 0, 1)  # (chunks taken from one counter: no thread waits while another has a queue)
            if c >= n_chunks:
                break
            pos = chunk_cap[c]
            resume[c, 0] = chunk_row[c + 1]  # (the whole chunk, unless a row below stops it)
            for r in range(chunk_row[c], chunk_row[c + 1]):
                a = text_off[r]
                b = text_off[r + 1]
                if holds_token(text, a, b, first4, asc, A_ADDED, at_data, at_off, at_flags):
                    resume[c, 0], resume[c, 1], resume[c, 2], resume[c, 3] = r, a, pos, pos
                    break
                start = pos
                p = a
                q = a - 128  # word_starts(q): start bits of text[q:q + 64]
                st = np.uint64(0)
                sp = a - 1  # the next byte at or after p that `word_starts` cannot judge
                miss = -1
                while p < b and miss < 0:
                    if gpt2:  # (constants: GPT-2's copy of the inlined scanner leaves the other kinds' code out)
                        n, p, sp, q, st = scan_block(text, p, a, b, asc, classes, sp, q, st, rec_flat, rec.shape[0],
                                                     bs, bm, bkey, True, GPT2, 0)
                    else:
                        n, p, sp, q, st = scan_pattern_block(text, p, a, b, asc, classes, sp, q, st, rec_flat,
                                                             rec.shape[0], bs, bm, bkey, pt_kind[1], pt_kind[2])
                    for t in range(n):
                        h, m = bkey[t, 0], bm[t]
                        hit = -1
                        if h == 0:
                            pass
                        elif m <= KEY_BYTES:
                            hit = probe(rec, h, bkey[t, 1], bkey[t, 2], m)
                        else:
                            hit = probe_long(rec, h, m, text, bs[t], 0, kdata)
                        if hit < 0:
                            miss = bs[t]
                            break
                        pos += copy_ids(rec[hit, 3], idata, out, pos)
                if miss >= 0:
                    resume[c, 0], resume[c, 1], resume[c, 2], resume[c, 3] = r, miss, pos, start
                    break
                row_ntok[r] = pos - start


# A first pass's words the shared cache lacks get room for their worst case (an id a byte) in
# `scan_rest`'s output, and run the model together once MISSES of them wait (or ROWS rows hold them)
MISSES = 32
ROWS = 64
SEEN = 128  # slots of the waiting misses' table (a word met twice among them runs the model once)


@cpu_kernel
def miss_scratch():
    """`scan_rest`'s per-thread arrays for misses: (their keys, starts, lengths, places in the output,
    rows, ids, counts, table of the seen, merge scratch: ranks, counts, words, ids), for the rows
    that hold them (rows, ids before the misses' shrink, each row's shrink), and their hashes: views
    of one allocation (a call with a new word makes them, a small one too)."""
    room = MISSES * GROUP_ROOM
    buf = np.zeros(11 * MISSES + 2 * room + SEEN + 3 * ROWS + 1, np.int64)
    mkey = buf[:3 * MISSES].view(np.uint64).reshape(MISSES, 3)
    p = 3 * MISSES
    mws, mm, mat, mrow = buf[p:p + MISSES], buf[p + MISSES:p + 2 * MISSES], buf[p + 2 * MISSES:p + 3 * MISSES], \
        buf[p + 3 * MISSES:p + 4 * MISSES]
    p += 4 * MISSES
    mk, pend, sel = buf[p:p + MISSES], buf[p + MISSES:p + 2 * MISSES], buf[p + 2 * MISSES:p + 3 * MISSES]
    p += 3 * MISSES
    hv = buf[p:p + MISSES].view(np.uint64)
    p += MISSES
    mids, gsym = buf[p:p + room // 2].view(np.int32), buf[p + room // 2:p + room].view(np.int32)
    p += room
    rv = buf[p:p + room]
    p += room
    seen = buf[p:p + SEEN]
    p += SEEN
    rr, rc, shrink = buf[p:p + ROWS], buf[p + ROWS:p + 2 * ROWS], buf[p + 2 * ROWS:p + 3 * ROWS + 1]
    return mkey, mws, mm, mat, mrow, mids, mk, seen, rv, pend, sel, gsym, rr, rc, shrink, hv


@jitable
def fill_misses(text, miss, nm, nr, carry, pos, rec, rec_flat, idata, kdata, out, row_ntok, model, sym_id, sym_st,
                nxt, prv, heap, state, lim):
    """The ids of `scan_rest`'s nm waiting misses (`miss_scratch()`: word j at text[ws[j]:][:m[j]], its
    room out[at[j]:][:m[j]], in row list entry row[j]), each put in its room and the ids after it moved
    up over what the room had to spare, and the nr listed rows' row_ntok (row rr[i]: ids rc[i] with
    the rooms). Returns (pos, carry) with the misses' spare room taken off. A word met twice among the
    misses runs the model once (`seen`), one that is a token whole where ignore_merges says so is
    looked up, those of up to LINEAR_BYTES merge together (`merge_byte_words`), longer ones alone.
    `model`: (tok_data, tok_offsets, vocab_slots, merges, the merges as one array, byte_pairs,
    byte_ids, byte_fallback_ids, affix, params)."""
    mkey, mws, mm, mat, mrow, mids, mk, seen, rv, pend, sel, gsym, rr, rc, shrink, hv = miss
    tok_data, tok_offsets, vocab_slots, merges, mflat, byte_pairs, byte_ids, byte_fallback_ids, affix, params = model
    whole_first = (params[3] & 4) != 0
    mask = SEEN - 1
    g = 0
    for j in range(nm):
        m = mm[j]
        mk[j] = -1  # (ids from the model when written)
        h = mkey[j, 0]
        if h != 0:
            i = np.int64(h >> np.uint64(1)) & mask
            while seen[i] != 0:
                o = seen[i] - 1
                if mkey[o, 0] == h and mm[o] == m and (mkey[o, 1] == mkey[j, 1] and mkey[o, 2] == mkey[j, 2]
                                                       if m <= KEY_BYTES else
                                                       same_bytes(text, mws[o], text, mws[j], m)):
                    mk[j] = -2 - o  # (the ids of miss o, written before)
                    break
                i = (i + 1) & mask
            if mk[j] != -1:
                continue
            seen[i] = j + 1
    if whole_first:  # (the vocabulary's slot, offset and bytes of each: three loads a word, each waiting on
        # the last, so each is prefetched for all the misses before the next is read)
        vmask = vocab_slots.shape[0] - 1
        for j in range(nm):
            if mk[j] == -1:
                hv[j] = fnv1a(text, mws[j], mws[j] + mm[j])
                prefetch(vocab_slots, np.int64(hv[j] & np.uint64(vmask)))
        for j in range(nm):
            if mk[j] == -1:
                t_id = vocab_slots[np.int64(hv[j] & np.uint64(vmask))]
                if t_id >= 0:
                    prefetch(tok_offsets, np.int64(t_id))
                    pend[j] = t_id
        for j in range(nm):
            if mk[j] == -1 and vocab_slots[np.int64(hv[j] & np.uint64(vmask))] >= 0:
                prefetch(tok_data, tok_offsets[pend[j]])
    for j in range(nm):
        if mk[j] != -1:
            continue
        m = mm[j]
        if whole_first:
            t_id = bytes_lookup_hashed(vocab_slots, tok_data, tok_offsets, hv[j], text, 0, text, mws[j], mws[j] + m)
            if t_id >= 0:
                mids[j * GROUP_ROOM] = t_id
                mk[j] = 1
                continue
        if m <= LINEAR_BYTES:
            sel[g] = j
            g += 1
    for j in range(nm):  # (the table of the seen emptied for the next misses)
        if mkey[j, 0] != 0:
            i = np.int64(mkey[j, 0] >> np.uint64(1)) & mask
            while seen[i] != 0:
                seen[i] = 0
                i = (i + 1) & mask
    if g:
        merge_byte_words(text, mws, mm, sel, g, byte_ids, byte_pairs, merges, mflat, params[0], gsym, rv, pend,
                         sym_st)
        for i in range(g):  # (the merged words' ids to their misses' places)
            j = sel[i]
            mk[j] = pend[i]
            for q in range(pend[i]):
                mids[j * GROUP_ROOM + q] = gsym[i * GROUP_ROOM + q]
    less = 0  # (spare room so far: where the ids after it move up to)
    done = mat[0]
    for j in range(nm):
        for q in range(done, mat[j]):  # (the ids between the last room and this one)
            out[q - less] = out[q]
        at = mat[j] - less
        m = mm[j]
        k = mk[j]
        if k <= -2:  # (a word met before among the misses: its ids, already in place)
            o = -2 - k
            k = mk[o]
            for q in range(k):
                out[at + q] = out[mat[o] + q]
        else:
            if k > 0:
                for q in range(k):
                    out[at + q] = mids[j * GROUP_ROOM + q]
            else:
                k = merge_byte_long(text, mws[j], mws[j] + m, 0, byte_ids, byte_pairs, merges, params[0], sym_id,
                                    sym_st, nxt, prv, heap)
                for q in range(k):
                    out[at + q] = sym_id[q]
            if mkey[j, 0] != 0 and k <= MAX_IDS:
                insert_word(rec, rec_flat, mkey[j, 0], mkey[j, 1], mkey[j, 2], m, mws[j], 0, out, at, k, idata,
                            kdata, text, state, lim)
        mk[j] = k
        mat[j] = at  # (final: a later twin copies from here)
        shrink[mrow[j]] += m - k
        done = mat[j] + less + m
        less += m - k
    for q in range(done, pos):
        out[q - less] = out[q]
    for i in range(nr):
        row_ntok[rr[i]] = rc[i] - shrink[i]
        shrink[i] = 0
    carry -= shrink[nr]
    shrink[nr] = 0
    return pos - less, carry


@cpu_kernel(parallel=True)
def scan_rest(c0, c1, text, text_off, chunk_row, pt_kind, asc, first4, at_data, at_off, at_flags, classes, rec, idata,
              kdata, out, row_ntok, resume, threads, tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids,
              byte_fallback_ids, affix, params, state, lim):
    """Chunks c0..c1-1 of rows of a byte-level vocabulary (`cached_prefix`'s), each from where `cached_prefix`
    stopped (resume[c]) to its end or to the first row that may hold an added token (resume[c] updated:
    `encode_ids_chunks` takes over there). Its loop, but a word the shared cache lacks runs the model
    and goes into the shared table (`insert_word`), where every thread finds it next. Apart from
    `cached_prefix`, whose warm passes the model's code made 1.04-1.12x slower.

    A missing word gets room for its worst case and waits, the words after it written on, until
    MISSES wait (or ROWS rows hold them, or the chunk ends): then they run the model together and
    the ids after each move up (`fill_misses`). Their lookups in the merge table overlap there."""
    rec_flat = rec.reshape(rec.shape[0] * 4)
    model = (tok_data, tok_offsets, vocab_slots, merges, merges.reshape(merges.size), byte_pairs, byte_ids,
             byte_fallback_ids, affix, params)
    gpt2 = pt_kind[1] == GPT2
    n_chunks = c1 - c0
    claim = np.zeros(1, np.int64)
    for _t in prange(min(threads, n_chunks)):
        bs = np.empty(BLOCK, np.int64)
        bm = np.empty(BLOCK, np.int64)
        bkey = np.empty((BLOCK, 3), np.uint64)
        w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf = model_scratch(SCRATCH, 8)
        miss = miss_scratch()
        mkey, mws, mm, mat, mrow = miss[:5]
        rr, rc = miss[12:14]
        for _ in range(n_chunks):
            c = c0 + fetch_add(claim, 0, 1)
            if c >= c1:
                break
            r0, p0, pos, first_id = resume[c, 0], resume[c, 1], resume[c, 2], resume[c, 3]
            resume[c, 0] = chunk_row[c + 1]  # (the whole chunk, unless a row below stops it)
            carry = pos - first_id  # (the open row's ids so far, with the rooms of its misses)
            nm = nr = 0
            for r in range(r0, chunk_row[c + 1]):
                a = text_off[r]
                b = text_off[r + 1]
                if holds_token(text, a, b, first4, asc, A_ADDED, at_data, at_off, at_flags):
                    if nm:
                        pos, carry = fill_misses(text, miss, nm, nr, carry, pos, rec, rec_flat, idata, kdata, out,
                                                 row_ntok, model, sym_id, sym_st, nxt, prv, heap, state, lim)
                        nm = nr = 0
                    resume[c, 0], resume[c, 1], resume[c, 2], resume[c, 3] = r, a, pos, pos
                    break
                p = a
                if r == r0:  # (the row `cached_prefix` stopped in: its words from resume[c, 1] on)
                    p = p0
                q = a - 128
                st = np.uint64(0)
                sp = a - 1
                while p < b:
                    if gpt2:  # (constants: GPT-2's copy of the inlined scanner leaves the other kinds' code out)
                        n, p, sp, q, st = scan_block(text, p, a, b, asc, classes, sp, q, st, rec_flat, rec.shape[0],
                                                     bs, bm, bkey, False, GPT2, 0)
                    else:
                        n, p, sp, q, st = scan_pattern_block(text, p, a, b, asc, classes, sp, q, st, rec_flat,
                                                             rec.shape[0], bs, bm, bkey, pt_kind[1], pt_kind[2])
                    for t in range(n):
                        h, m, ws = bkey[t, 0], bm[t], bs[t]
                        hit = -1
                        if h == 0:
                            pass
                        elif m <= KEY_BYTES:
                            hit = probe(rec, h, bkey[t, 1], bkey[t, 2], m)
                        else:
                            hit = probe_long(rec, h, m, text, ws, 0, kdata)
                        if hit >= 0:
                            k = copy_ids(rec[hit, 3], idata, out, pos)
                        elif m + 1 <= SCRATCH:  # (room for its worst case: its ids come with the others')
                            if nm == MISSES:
                                pos, carry = fill_misses(text, miss, nm, nr, carry, pos, rec, rec_flat, idata, kdata,
                                                         out, row_ntok, model, sym_id, sym_st, nxt, prv, heap, state,
                                                         lim)
                                nm = nr = 0
                            mkey[nm, 0], mkey[nm, 1], mkey[nm, 2] = h, bkey[t, 1], bkey[t, 2]
                            mws[nm], mm[nm], mat[nm], mrow[nm] = ws, m, pos, nr
                            nm += 1
                            k = m
                        else:  # (longer than the scratch: a word with scratch of its own)
                            k = long_word_ids(text, ws, ws + m, np.int64(0), tok_data, tok_offsets, vocab_slots,
                                              merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params, out, pos)
                            if h != 0 and k <= MAX_IDS:
                                insert_word(rec, rec_flat, h, bkey[t, 1], bkey[t, 2], m, ws, 0, out, pos, k, idata,
                                            kdata, text, state, lim)
                        pos += k
                        carry += k
                if nm and mrow[nm - 1] == nr:  # (the row holds a waiting miss: its count once they are in)
                    rr[nr], rc[nr] = r, carry
                    nr += 1
                    if nr == ROWS:
                        pos, carry = fill_misses(text, miss, nm, nr, 0, pos, rec, rec_flat, idata, kdata, out,
                                                 row_ntok, model, sym_id, sym_st, nxt, prv, heap, state, lim)
                        nm = nr = 0
                else:
                    row_ntok[r] = carry
                carry = 0
            if nm:
                fill_misses(text, miss, nm, nr, carry, pos, rec, rec_flat, idata, kdata, out, row_ntok, model,
                            sym_id, sym_st, nxt, prv, heap, state, lim)


cached_prefix_serial = _twin(cached_prefix)
scan_rest_serial = _twin(scan_rest)
encode_ids_chunks_serial = _twin(encode_ids_chunks)
SERIAL_CALL = 1 << 13  # a call of fewer bytes runs on the calling thread (`serial_ids`, the spans' serial steps)
# An ids-only call does less work a byte than one with offsets, so waking the threads pays only at a
# larger size: on two threads it runs `serial_ids` up to 1.5x SERIAL_CALL (0.62-0.98x the threaded
# time at 12 KB, 0.99-1.24x at 16 KB; offsets calls of gpt2 were 1.08-1.25x at 12 KB). With more
# threads the threaded side divides the bytes wider; not measured there, so SERIAL_CALL.
IDS_SERIAL_SCALE = 1.5 if numba.config.NUMBA_NUM_THREADS <= 2 else 1.0


def serial_ids_call(total):
    """Whether an ids-only call of `total` bytes runs `serial_ids` on the calling thread."""
    return total < IDS_SERIAL_SCALE * SERIAL_CALL


# On two threads an ids-only call of rows without normalizer (or with one that maps characters one at
# a time), up to this many bytes, runs `split_ids`: one launch, not `encode_ids`' planning, waves and
# gather (gpt2, 13 and 35 KB of big.txt paragraphs: 0.70-0.76x and 0.85-0.94x the time). Under the
# serial limit one thread is faster still: the launch of a kernel that hands its threads ~40 arrays
# costs ~7-18 us. More threads: not measured, so not used.
SPLIT_MAX = 1 << 15


def small_ids_call(tok, total, rows):
    """Whether an ids-only call runs in one compiled step (`_serial_ids`): on the calling thread
    (`serial_ids_call`), or on two threads (`split_ids`, SPLIT_MAX) when its rows have no normalizer
    or one that maps characters one at a time (bert's: normalized in the same step)."""
    return serial_ids_call(total) or (total < SPLIT_MAX and rows > 1 and numba.get_num_threads() == 2
                                      and (tok._norm is None or _ids_consts(tok)[10] is not None))


@jitable(_nrt=True)
def chunk_ids(c, text, text_off, pb, pk, row_piece, normalized, chunk_row, chunk_cap, pt_kind, pt_prefix, classes, asc,
              first4, at_data, at_off, at_ids, at_flags, at_first, tok_data, tok_offsets, vocab_slots, merges,
              byte_pairs, byte_ids, byte_fallback_ids, affix, params, rec, idata, kdata, out, row_ntok, resume, state,
              lim, ins):
    """Chunk c's ids on this thread (rows chunk_row[c] to chunk_row[c + 1] - 1, from out[chunk_cap[c]]): its
    cached words through the lean loop, then `scan_rest` (when `ins`) and `encode_ids_chunks` from where
    the one before stopped, as `encode_ids` runs a wave; new words added within the room (state, lim)."""
    cr = chunk_row[c:c + 2]
    cc = chunk_cap[c:c + 2]
    rs = resume[c:c + 1]
    rs[0, 0], rs[0, 1], rs[0, 2], rs[0, 3] = cr[0], text_off[cr[0]], cc[0], cc[0]
    if ins and not normalized and not pt_prefix:
        cached_prefix_serial(text, text_off, cr, cc, pt_kind, asc, first4, at_data, at_off, at_flags, classes, rec,
                             idata, kdata, out, row_ntok, rs, 1)
    if ins and rs[0, 0] < cr[1]:
        scan_rest_serial(0, 1, text, text_off, cr, pt_kind, asc, first4, at_data, at_off, at_flags, classes, rec, idata,
                         kdata, out, row_ntok, rs, 1, tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                         byte_ids, byte_fallback_ids, affix, params, state, lim)
    if rs[0, 0] < cr[1]:
        encode_ids_chunks_serial(0, 1, np.arange(2), text, text_off, pb, pk, row_piece, normalized, cr, cc, pt_kind,
                                 pt_prefix, classes, asc, first4, at_data, at_off, at_ids, at_flags, at_first,
                                 tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids,
                                 affix, params, rec, idata, kdata, out, row_ntok, rs, state, lim)


@jitable(_nrt=True)
def chunk_rooms(text_off, chunk_row, prefix):
    """chunk_cap: where each chunk's ids start in the output, with room for its worst case: two ids a
    byte with a prefix space (one without), one more a row, and COPY_IDS past its last id (`copy_ids`
    stores a cached word's ids as one block)."""
    k = chunk_row.shape[0]
    chunk_cap = np.empty(k, np.int64)
    chunk_cap[0] = 0
    for c in range(k - 1):
        nbytes = text_off[chunk_row[c + 1]] - text_off[chunk_row[c]]
        chunk_cap[c + 1] = chunk_cap[c] + nbytes * (2 if prefix else 1) + chunk_row[c + 1] - chunk_row[c] + COPY_IDS
    return chunk_cap


@jitable(_nrt=True)
def call_chunks(text_off, parts, prefix):
    """(chunk_row, chunk_cap) of a small call cut into `parts` chunks of whole rows, of about equal bytes."""
    n = text_off.shape[0] - 1
    total = text_off[n] - text_off[0]
    chunk_row = np.empty(parts + 1, np.int64)
    chunk_row[0] = 0
    k = 1
    for q in range(1, parts):
        r = np.searchsorted(text_off, text_off[0] + q * total // parts)
        if chunk_row[k - 1] < r < n:
            chunk_row[k] = r
            k += 1
    chunk_row[k] = n
    chunk_row = chunk_row[:k + 1]
    return chunk_row, chunk_rooms(text_off, chunk_row, prefix)


@jitable(_nrt=True)
def assemble(out, chunk_row, chunk_cap, row_ntok, pre, post):
    """(ids, row offsets): every chunk's ids from its room in `out`, each row between the template's
    tokens pre and post."""
    n = row_ntok.shape[0]
    a, z = pre.shape[0], post.shape[0]
    row_off = np.empty(n + 1, np.int64)
    row_off[0] = 0
    for r in range(n):
        row_off[r + 1] = row_off[r] + row_ntok[r] + a + z
    if a + z == 0 and chunk_row.shape[0] == 2:
        return out[:row_off[n]].copy(), row_off
    ids = np.empty(row_off[n], np.int32)
    for c in range(chunk_row.shape[0] - 1):
        src = chunk_cap[c]
        for r in range(chunk_row[c], chunk_row[c + 1]):  # (each row's ids follow the last row's in its chunk)
            o = row_off[r]
            k = row_ntok[r]
            ids[o:o + a] = pre
            ids[o + a:o + a + k] = out[src:src + k]
            ids[o + a + k:o + a + k + z] = post
            src += k
    return ids, row_off


@cpu_kernel
def serial_ids(text, text_off, pb, pk, row_piece, normalized, tab, pt_prefix, rec, idata, kdata, state, lim, ins, pre,
               post):
    """(ids, row offsets) of a small call in one compiled step on the calling thread: the whole batch
    as one chunk (`chunk_ids`), compiled without threads, new words added within the room
    `open_inserts` reserved (state, lim).
    `encode_ids`'s planning, thread launches and gather were 60-110 us, most of a one-row call.
    tab: the tokenizer's `address_table`; every row between the template's tokens pre and post (a
    compiled call of their own was ~2 us of a one-row bert call)."""
    (pt_kind, classes, asc, first4, (at_data, at_off, at_ids, at_flags, at_first),
     (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params),
     lead_tab, trail_tab, first4_raw, amap_off, amap_data) = tables(tab)
    n = text_off.shape[0] - 1
    chunk_row, chunk_cap = call_chunks(text_off, 1, pt_prefix)
    out = np.empty(chunk_cap[-1], np.int32)
    row_ntok = np.zeros(n, np.int64)
    resume = np.empty((1, 4), np.int64)
    chunk_ids(0, text, text_off, pb, pk, row_piece, normalized, chunk_row, chunk_cap, pt_kind, pt_prefix, classes, asc,
              first4, at_data, at_off, at_ids, at_flags, at_first, tok_data, tok_offsets, vocab_slots, merges,
              byte_pairs, byte_ids, byte_fallback_ids, affix, params, rec, idata, kdata, out, row_ntok, resume, state,
              lim, ins)
    return assemble(out, chunk_row, chunk_cap, row_ntok, pre, post)


@cpu_kernel(parallel=True)
def split_ids(text, text_off, pb, pk, row_piece, normalized, tab, pt_prefix, rec, idata, kdata, state, lim, ins, pre,
              post, parts):
    """`serial_ids` of a call too large for one thread yet too small for `encode_ids`' planning and
    waves: its rows in `parts` chunks of about equal bytes, one a thread, in one launch."""
    (pt_kind, classes, asc, first4, (at_data, at_off, at_ids, at_flags, at_first),
     (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params),
     lead_tab, trail_tab, first4_raw, amap_off, amap_data) = tables(tab)
    n = text_off.shape[0] - 1
    chunk_row, chunk_cap = call_chunks(text_off, parts, pt_prefix)
    k = chunk_row.shape[0] - 1
    out = np.empty(chunk_cap[k], np.int32)
    row_ntok = np.zeros(n, np.int64)
    resume = np.empty((k, 4), np.int64)
    for c in prange(k):
        chunk_ids(c, text, text_off, pb, pk, row_piece, normalized, chunk_row, chunk_cap, pt_kind, pt_prefix, classes,
                  asc, first4, at_data, at_off, at_ids, at_flags, at_first, tok_data, tok_offsets, vocab_slots,
                  merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params, rec, idata, kdata, out, row_ntok,
                  resume, state, lim, ins)
    return assemble(out, chunk_row, chunk_cap, row_ntok, pre, post)


@cpu_kernel
def mapped_serial_ids(data, offsets, tab, cm, cd, pt_prefix, rec, idata, kdata, state, lim, ins, pre, post, parts):
    """`serial_ids` of a small call to a tokenizer whose normalizer has an ASCII map (`split_ids` over
    `parts` threads when parts > 1), its rows normalized first (`mapped_rows`) in the same compiled
    step; empty row offsets when the maps do not cover some character. Two compiled calls and the
    Python between them were a fifth of a one-row bert call."""
    (pt_kind, classes, asc, first4, (at_data, at_off, at_ids, at_flags, at_first),
     (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params),
     lead_tab, trail_tab, first4_raw, amap_off, amap_data) = tables(tab)
    text, pb, pk, row_piece, _, _ = mapped_rows(data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first,
                                                first4_raw, amap_off, amap_data, cm, cd, np.bool_(False))
    normalized = row_piece.shape[0] > 0  # (a bool, not the literal True: `serial_ids` as Python calls it)
    if not normalized:
        return np.zeros(0, np.int32), pb[:0]
    if parts > 1:
        return split_ids(readonly(text), readonly(pb[row_piece]), pb, pk, row_piece, normalized, tab, pt_prefix, rec,
                         idata, kdata, state, lim, ins, pre, post, parts)
    return serial_ids(readonly(text), readonly(pb[row_piece]), pb, pk, row_piece, normalized, tab, pt_prefix, rec,
                      idata, kdata, state, lim, ins, pre, post)


@cpu_kernel
def spans_ids_serial(data, offsets, tab, pt_prefix, rec, idata, kdata, state, lim, ins, trim):
    """`spans_serial` of a byte-level tokenizer's small call from its ids (`serial_ids`, the word cache)
    and one walk over its words (`spans_from_ids`): (fields, row_tok, ok). The spans path proper
    ran the model on every word of every call and made ~25 arrays, most of a short `encode`."""
    (pt_kind, classes, asc, first4, (at_data, at_off, at_ids, at_flags, at_first),
     (tok_data, tok_offsets, vocab_slots, merges, byte_pairs, byte_ids, byte_fallback_ids, affix, params),
     lead_tab, trail_tab, first4_raw, amap_off, amap_data) = tables(tab)
    z64 = np.zeros(1, np.int64)
    none = np.zeros(0, np.int32)
    ids, row_tok = serial_ids(data, offsets, z64, np.zeros(1, np.int32), z64, np.bool_(False), tab, pt_prefix, rec,
                              idata, kdata, state, lim, ins, none, none)
    f = np.empty((9, ids.shape[0]), np.int64)
    ok = spans_from_ids_serial(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                               ids, row_tok, tok_offsets, lead_tab, trail_tab, trim, 1, f)
    return f, row_tok, ok


SMALL_CALL = 1 << 18
# Chunks a thread's share of a call is cut into (`plan_chunks`), and segments a long row (`encode_ids`):
# the last chunk of a wave, or the last segment, leaves the other threads waiting. 32 against 8: first
# passes over big.txt's paragraphs 0.95x the time (three runs), one 10 MB document 0.89x first and 0.92x
# warm, the UDHR level (benchmarks/NOTES.md, section 72).
CHUNKS = 32
SCAN_REST = True  # `scan_rest` for `cached_prefix`'s rows of byte-level vocabularies (off: the fused loop for them too)
PREFIX_CALL = 1 << 16


@cpu_kernel
def plan_chunks(text_off, threads, prefix):
    """How `encode_ids` cuts a batch (in one compiled call: as numpy steps, this planning was a third of a
    small call's time). Chunks of whole rows, about 1/CHUNKS of a thread's share of the bytes each (16 KB
    at least), so that uneven rows balance: rows chunk_row[c] to chunk_row[c + 1] - 1, their
    worst-case ids from chunk_cap[c] on. Waves of an eighth, a quarter, then the rest of the chunks: the
    first waves' new words tell how much room the shared table needs for the rest (the loops add
    words as they go, within the room reserved before each wave). Within a wave each thread is a
    group (group g sized for chunks group_chunk[g] to group_chunk[g + 1] - 1, though it takes
    whichever of the wave's chunks are left when it is free; wave w: groups wave_group[w] to
    wave_group[w + 1] - 1). A call under SMALL_CALL bytes is one wave of smaller chunks: waves of a
    few chunks left threads idle there."""
    n = text_off.shape[0] - 1
    total = text_off[n] - text_off[0]
    small = total < SMALL_CALL
    target = max(total // (CHUNKS * threads), 1 << 12 if small else 1 << 14)
    chunk_row = np.empty(total // target + 2, np.int64)
    chunk_row[0] = 0
    k = 1
    for q in range(target, total, target):
        r = np.searchsorted(text_off, text_off[0] + q)
        if r > chunk_row[k - 1]:
            chunk_row[k] = r
            k += 1
    if n > chunk_row[k - 1]:
        chunk_row[k] = n
        k += 1
    chunk_row = chunk_row[:k].copy()
    n_chunks = k - 1
    chunk_cap = chunk_rooms(text_off, chunk_row, prefix)
    waves = np.empty(4, np.int64)
    waves[0] = 0
    nw = 1
    for c in (CHUNKS // 8 * threads, CHUNKS * 3 // 8 * threads):
        if c < n_chunks and not small:
            waves[nw] = c
            nw += 1
    waves[nw] = n_chunks
    group_chunk = np.empty(n_chunks + 1, np.int64)
    group_chunk[0] = 0
    wave_group = np.zeros(nw + 1, np.int64)
    ng = 1
    for w in range(nw):
        lo, hi = waves[w], waves[w + 1]
        parts = max(min(threads, hi - lo), 1)
        for i in range(1, parts + 1):
            c = lo + i * (hi - lo) // parts
            if c > group_chunk[ng - 1]:
                group_chunk[ng] = c
                ng += 1
        wave_group[w + 1] = ng - 1
    group_chunk = group_chunk[:ng].copy()
    resume = np.empty((n_chunks, 4), np.int64)  # (every chunk from its start: `cached_prefix` moves them on)
    for c in range(n_chunks):
        resume[c, 0] = chunk_row[c]
        resume[c, 1] = text_off[chunk_row[c]]
        resume[c, 2] = chunk_cap[c]
        resume[c, 3] = chunk_cap[c]
    return chunk_row, chunk_cap, group_chunk, wave_group, resume


@cpu_kernel
def bytes_left(c0, c1, chunk_row, text_off, resume):
    """Bytes of chunks c0..c1-1 from where the loops stopped (resume), or -1 when no row of them is left."""
    left = -1
    for c in range(c0, c1):
        if resume[c, 0] < chunk_row[c + 1]:
            left = max(left, 0) + text_off[chunk_row[c + 1]] - resume[c, 1]
    return left


@cpu_kernel(parallel=True)
def gather_chunks(out, chunk_cap, chunk_row, row_ntok):
    """(ids, row offsets): every chunk's ids, from its room in `out`, back to back."""
    n = row_ntok.shape[0]
    row_off = np.empty(n + 1, np.int64)
    row_off[0] = 0
    for r in range(n):
        row_off[r + 1] = row_off[r] + row_ntok[r]
    ids = np.empty(row_off[n], np.int32)
    for c in prange(chunk_row.shape[0] - 1):
        a = row_off[chunk_row[c]]
        m = row_off[chunk_row[c + 1]] - a
        p = chunk_cap[c]
        ids[a:a + m] = out[p:p + m]  # (a slice: copied 3-12x faster than element by element)
    return ids, row_off


@functools.lru_cache(maxsize=64)
def _scan_tables(at_first):
    """The fused loop's ASCII table and the added tokens' first bytes, for the added-token bitmap
    `at_first` (as bytes): computed once per tokenizer, not per call (a batch of one is ~0.2 ms)."""
    at_first = np.frombuffer(at_first, np.uint8).reshape(2, 256)
    asc, first4 = ascii_classes(unicode_tables.load(), at_first), first_bytes(at_first[0] | at_first[1])
    return _readonly(asc), _readonly(first4)  # shared by every call


@cpu_kernel
def segment_rows(data, offsets, seg, strict):
    """Offsets with rows longer than 2 * seg cut about every seg bytes at a `cut_at` boundary, and the
    position of each original row start: one long document then spreads over all threads."""
    n = offsets.shape[0] - 1
    out = np.empty(n + 1 + (offsets[n] - offsets[0]) // seg + 1, np.int64)
    orig = np.empty(n + 1, np.int64)
    k = 0
    for r in range(n):
        a = offsets[r]
        b = offsets[r + 1]
        orig[r] = k
        out[k] = a
        k += 1
        if b - a <= 2 * seg:
            continue
        p = a + seg
        while p < b - seg:
            if cut_at(data, p, strict):
                out[k] = p
                k += 1
                p += seg
            else:
                p += 1
    orig[n] = k
    out[k] = offsets[n]
    return out[:k + 1].copy(), orig


_PER_CHAR_HEADS = (passes.IDENT, passes.NFD, passes.NFKD)
_PER_CHAR_OPS = (chars.CLEAN, chars.CJK, chars.STRIP_MN, chars.STRIP_MARK, chars.LOWERCASE)


NO_CUTS, CUTS, STRICT_CUTS = 0, 1, 2  # (`_segmentable`: rows stay whole, cut at `cut_at`, cut with its `strict`)


def _segmentable(tok):
    """Rows may be cut at `cut_at` boundaries (CUTS) when no added token contains whitespace or strips
    the space after it, and either: the GPT-2 pattern alone, with no normalizer and no virtual prefix
    space; or a pre-tokenizer that first splits on whitespace and removes it (BertPreTokenizer,
    Whitespace, WhitespaceSplit) after a normalizer that maps each character on its own and keeps
    a space a space (BertNormalizer, NFD, NFKD, Lowercase, StripAccents); or, at the STRICT_CUTS
    boundaries, the cl100k or o200k pattern alone with no normalizer. NO_CUTS where rows stay whole."""
    pt = tok.spec.pre_tokenizer
    if any(a.rstrip or any(c.isspace() for c in a.content) for a in tok.spec.added_tokens) or pt.prog[0] < 1:
        return NO_CUTS
    if pt.prog[1] == CL100K or pt.prog[1] == O200K:
        return STRICT_CUTS if tok._norm is None else NO_CUTS
    if pt.prog[1] == GPT2:
        return CUTS if tok._norm is None and pt.prog[0] == 1 and not pt.add_prefix_space else NO_CUTS
    if pt.prog[1] == SPLIT and pt.prog[2] == SPACE | (REMOVED << 8):
        per_char = tok._norm is None or all(head in _PER_CHAR_HEADS and all(op in _PER_CHAR_OPS for op in ops)
                                            for head, _, _, ops in tok._norm.plan)
        return CUTS if per_char else NO_CUTS
    return NO_CUTS


def _ids_consts(tok):
    """What `encode_ids` passes that changes only with the tokenizer's tables: (pre-tokenizer, its
    program, added tokens' arrays, the fused loop's ASCII table, the added tokens' first bytes, the
    model's arrays, lean, ins, from_ids, tab, amap), built once per set of tables (rebuilding it was a
    fifth of a one-row call). lean: the cached-words loops apply (`cached_prefix`: the GPT-2, cl100k
    or o200k pattern alone, no normalizer, no prefix space); ins: so does `scan_rest` (every byte a
    symbol); from_ids: a run's spans follow from its ids; tab: the small calls' `address_table` (the
    arrays it points into are kept in the tuple); amap: the normalizer's ASCII map, or None."""
    pt = tok.spec.pre_tokenizer
    got = getattr(tok, "_ids_consts", None)
    if got is not None and got[0] is tok._added and got[1] is tok._model and got[2] is pt.prog and \
            got[3] is tok._norm:
        return got[4]
    prog, at, model = pt.prog, tok._added.arrays(), tok._model.arrays()
    alone = tok._norm is None and prog[0] == 1 and not pt.add_prefix_space
    lean = bool(alone and prog[1] in (GPT2, CL100K, O200K))
    asc, first4 = _scan_tables(at[4].tobytes())
    if not lean:
        asc = asc[:1]  # (a full table: the fused loop scans rows itself, `encode_ids_chunks`)
    flags = model[8][3]
    ins = bool(lean and (flags & 16) != 0)
    # from_ids: spans follow from the ids (`spans_from_ids`, GPT-2's pattern): each token's bytes in
    # order, merges not ignored, no affixes
    from_ids = bool(alone and prog[1] == GPT2 and ins and (flags & 4) == 0 and model[8][1] == 0 and
                    model[8][2] == 0)
    amap = tok._norm.ascii_map() if tok._norm is not None else None
    tab = address_table((prog, tok._classes, asc, first4, *at, *model, tok._model.lead_spaces,
                         tok._model.trail_spaces, _raw_first4(at[4][0].tobytes()),
                         *(amap[:2] if amap is not None else (np.zeros(129, np.int64), np.zeros(1, np.uint8)))))
    consts = (pt, prog, at, asc, first4, model, lean, ins, from_ids, tab, amap)
    tok._ids_consts = (tok._added, tok._model, prog, tok._norm, consts)
    return consts


def _ids_step(parts, *args):
    """`serial_ids`, or `split_ids` over `parts` threads when parts > 1."""
    return split_ids(*args, parts) if parts > 1 else serial_ids(*args)


def _serial_ids(tok, data, offsets, total, pre=_NONE32, post=_NONE32):
    """`encode_ids` of a small call (`serial_ids_call`): one compiled step on the calling thread, new words
    added within the room `open_inserts` reserves (or run uncached while another call adds); every
    row between the template's tokens pre and post."""
    consts = _ids_consts(tok)
    pt, tab, amap = consts[0], consts[9], consts[10]
    ins = SCAN_REST and consts[7]
    prefix = pt.add_prefix_space
    cache = tok._word_cache
    rec, idata, kdata, state, lim = cache.open_small(total)
    try:
        norm = tok._norm
        parts = 1 if serial_ids_call(total) else numba.get_num_threads()  # (`small_ids_call`'s larger calls: 2)
        if norm is None:
            return _ids_step(parts, data, offsets, _Z64, _Z32, _Z64, False, tab[0], prefix, rec, idata, kdata, state,
                             lim, ins, pre, post)
        if amap is not None:
            ids, row_off = mapped_serial_ids(data, offsets, tab[0], *_known_chars(norm), prefix, rec, idata, kdata,
                                             state, lim, ins, pre, post, parts)
            if row_off.shape[0]:
                return ids, row_off
        text, pb, pk, row_piece = normalize_rows_ids(norm, data, offsets, consts[2], tok._classes, True)
        return _ids_step(parts, _readonly(text), _readonly(pb[row_piece]), pb, pk, row_piece, True, tab[0], prefix,
                         rec, idata, kdata, state, lim, ins, pre, post)
    finally:
        cache.close_small(lim)


def _small_spans_from_ids(tok, data, offsets, total, trim):
    """`spans` of a byte-level tokenizer's small call from its ids (`spans_ids_serial`), or None where
    that does not apply."""
    consts = _ids_consts(tok)
    if not consts[8]:
        return None
    cache = tok._word_cache
    rec, idata, kdata, state, lim = cache.open_small(total)
    try:
        f, row_tok, ok = spans_ids_serial(data, offsets, consts[9][0], consts[0].add_prefix_space, rec, idata, kdata,
                                          state, lim, SCAN_REST, trim)
    finally:
        cache.close_small(lim)
    return (data, f, row_tok) if ok else None


# (bytes: below, the model on every word costs less than the ids path's cache and larger call; one
# row, bert-base-uncased: 1.11x the time at 39 bytes, 0.99x at 150, 0.81x at 600)
WORDPIECE_FROM_IDS = 128


def _small_wordpiece_spans(tok, data, offsets, total, trim):
    """`spans` of a WordPiece tokenizer's small call whose characters its normalizer maps one at a
    time, from its ids (`wordpiece_ids_mapped_serial`); None where the maps do not cover some
    character, and where the walk disagrees with the ids, `spans_mapped_serial`'s (the model on
    every word)."""
    consts = _ids_consts(tok)
    tab, prefix = consts[9][0], consts[0].add_prefix_space
    chars_ = _known_chars(tok._norm)
    cache = tok._word_cache
    rec, idata, kdata, state, lim = cache.open_small(total)
    try:
        f, row_tok, text, ok = wordpiece_ids_mapped_serial(data, offsets, tab, *chars_, prefix, rec, idata, kdata,
                                                           state, lim, trim)
    finally:
        cache.close_small(lim)
    if ok:
        return text, f, row_tok
    if row_tok.shape[0] == 0:
        return None
    f, row_tok, text = spans_mapped_serial(data, offsets, tab, *chars_, prefix, trim)
    return text, f, row_tok


def encode_ids(tok, b, segment=True):
    """ids and row token offsets of host Batch `b` (no special tokens, no spans): the fast path."""
    # read-only views, whichever way the batch was built (str join, Arrow, bytes): every kernel then has
    # one compiled specialization, loaded by any earlier call, never compiled in the middle of a job
    data, offsets = _readonly(b.data), _readonly(b.offsets)
    n = offsets.shape[0] - 1
    total = int(offsets[n]) - int(offsets[0])
    if small_ids_call(tok, total, n):
        return _serial_ids(tok, data, offsets, total)
    threads = numba.get_num_threads()
    seg = max(total // (CHUNKS * threads), 1 << 16)
    cuts = NO_CUTS
    if segment and threads > 1 and total > 2 * seg and int(np.diff(offsets).max()) > 2 * seg:
        cuts = _segmentable(tok)
    if cuts != NO_CUTS:
        pieces, orig = segment_rows(data, offsets, seg, cuts == STRICT_CUTS)
        ids, piece_off = encode_ids(tok, type(b)(data, pieces), segment=False)
        return ids, piece_off[orig]
    pt, prog, at, asc, first4, model, lean, ins = _ids_consts(tok)[:8]
    ins = SCAN_REST and ins
    if tok._norm is None:
        text, text_off, pb, pk, row_piece = data, offsets, _Z64, _Z32, _Z64
    else:
        text, pb, pk, row_piece = normalize_rows_ids(tok._norm, data, offsets, at, tok._classes)
        text_off = pb[row_piece]
    text, text_off = _readonly(text), _readonly(text_off)  # one compiled specialization for every input
    cache = tok._word_cache
    chunk_row, chunk_cap, group_chunk, wave_group, resume = plan_chunks(text_off, threads, pt.add_prefix_space)
    out = cache.out_buffer(int(chunk_cap[-1]))
    row_ntok = np.zeros(n, np.int64)
    # cached words first, once for all the chunks (per wave, it and the next loop each waited on their
    # slowest chunk); not for a small call, where one more launch costs more than the loop saves
    if lean and len(cache) and total >= PREFIX_CALL:
        rec, idata, kdata = cache.snapshot()
        try:
            cached_prefix(text, text_off, chunk_row, chunk_cap, prog, asc, first4, at[0], at[1], at[3], tok._classes,
                          rec, idata, kdata, out, row_ntok, resume, threads)
        finally:
            cache.release()
    rate = 1 / 16  # (new words a byte: a first wave's guess, then three quarters of the last wave's)
    for lo, hi in zip(wave_group[:-1], wave_group[1:]):
        # the wave's rows from where `cached_prefix` stopped, new words added to the shared table as they are found
        c0, c1 = int(group_chunk[lo]), int(group_chunk[hi])
        left = bytes_left(c0, c1, chunk_row, text_off, resume)
        if left < 0:  # (`cached_prefix` did the whole wave)
            continue
        est = int(rate * left)
        room = cache.open_inserts(est, max(8 * est, left // 4), max(4 * est, left // 4))
        if room is None:  # (another call is adding: this one's new words run the model, uncached)
            rec, idata, kdata = cache.snapshot()
            state, lim = np.zeros(5, np.int64), np.zeros(3, np.int64)
        else:
            rec, idata, kdata, state, lim = room
        n_before = int(state[0])
        try:
            if ins:
                scan_rest(c0, c1, text, text_off, chunk_row, prog, asc, first4, at[0], at[1], at[3], tok._classes, rec,
                          idata, kdata, out, row_ntok, resume, threads, *model, state, lim)
            if not ins or bytes_left(c0, c1, chunk_row, text_off, resume) >= 0:  # (rows left to the fused loop)
                encode_ids_chunks(lo, hi, group_chunk, text, text_off, pb, pk, row_piece, tok._norm is not None,
                                  chunk_row, chunk_cap, prog, pt.add_prefix_space, tok._classes, asc, first4, *at,
                                  *model, rec, idata, kdata, out, row_ntok, resume, state, lim)
        finally:
            if room is None:
                cache.release()
            else:
                cache.close_inserts(lim)
        rate = 0.75 * (int(state[0]) - n_before) / max(left, 1)
    ids, row_off = gather_chunks(out, chunk_cap, chunk_row, row_ntok)
    cache.give_back_out(out)
    return ids, row_off


@cpu_kernel(parallel=True)
def wrap_rows(ids, row_off, pre, post):
    """Every row's ids between the template's leading and trailing special tokens."""
    n = row_off.shape[0] - 1
    extra = pre.shape[0] + post.shape[0]
    new_off = np.empty(n + 1, np.int64)
    for r in range(n + 1):
        new_off[r] = row_off[r] + r * extra
    out = np.empty(ids.shape[0] + n * extra, np.int32)
    for r in prange(n):
        p = new_off[r]
        for q in range(pre.shape[0]):
            out[p + q] = pre[q]
        p += pre.shape[0]
        m = row_off[r + 1] - row_off[r]
        out[p:p + m] = ids[row_off[r]:row_off[r + 1]]  # (slices: element loops with signed indices are not vectorized)
        p += m
        for q in range(post.shape[0]):
            out[p + q] = post[q]
    return out, new_off


wrap_rows_serial = _twin(wrap_rows)  # (a small call's: no threads to wake)


@cpu_kernel(parallel=True)
def wrap_table(f, row_tok, pre, post):
    """`encode_ragged`'s arrays with offsets from a `token_table` f: (row offsets, ids, character
    offsets, special-token mask, word ids), every row between the template's tokens `pre` and `post`
    (offsets (0, 0), word id -1). As numpy steps over every token they were a fifth of a large call."""
    n = row_tok.shape[0] - 1
    a, b = pre.shape[0], post.shape[0]
    new_off = np.empty(n + 1, np.int64)
    for r in range(n + 1):
        new_off[r] = row_tok[r] - row_tok[0] + r * (a + b)
    T = new_off[n]
    ids = np.empty(T, np.int32)
    offs = np.empty((T, 2), np.int64)
    special = np.empty(T, np.uint8)
    words = np.empty(T, np.int64)
    for r in prange(n):
        p = new_off[r]
        e = new_off[r + 1] - b
        for q in range(a + b):  # (the template's tokens: pre at the row's start, post at its end)
            k = p + q if q < a else e + q - a
            ids[k] = pre[q] if q < a else post[q - a]
            offs[k, 0] = 0
            offs[k, 1] = 0
            special[k] = 1
            words[k] = -1
        p += a
        for t in range(row_tok[r], row_tok[r + 1]):
            ids[p] = f[0, t]
            offs[p, 0] = f[1, t]
            offs[p, 1] = f[2, t]
            special[p] = 0
            words[p] = f[3, t]
            p += 1
    return new_off, ids, offs, special, words


wrap_table_serial = _twin(wrap_table)
