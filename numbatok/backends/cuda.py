"""CUDA drivers: the same pipeline steps as `cpu`, as @cuda.jit kernels over device arrays.

Geometry: rows -> words is one thread per row (count pass, scan, fill pass); words -> tokens is one
thread per word with its scratch in local memory; compaction is one thread per word. Scans, sorts
and gathers between kernels use CuPy on a real GPU, and numpy under the CUDA simulator (where the
kernels run on host arrays), so the launch path is the same code in both.

Where the pattern allows (`cpu._segmentable`), rows are first cut about every SEG bytes at
`pipeline.cut_at` boundaries, so a long document spreads over many threads instead of one. The model
runs once per distinct word (64-bit hashes, sorted; every word is checked byte for byte against its
representative, and a collision sends every word through the model itself).

Words longer than SMALL bytes do not fit the per-thread scratch: the kernel flags them and the CPU
merges them with the heap path (a 100 KB word would otherwise stall its whole batch on one thread);
only their bytes travel.
"""
import os
import threading

import numpy as np
from numba import cuda

# (importing _numba also sets numpy shims before the first CUDA compile)
from .._numba import CACHE_DIR, cached, cpu_kernel, prange
from ..kernels.dedup import same_word, word_hash
from ..models.bpe import SMALL
from ..normalizers.passes import identity_alignment, is_nf, nf_piece, normalize_piece
from ..kernels.lines import copy_rows
from ..pipeline import compact_word, cut_at, piece_words, row_pieces, row_words, store_tokens, word_tokens
from . import cpu

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
AFFIX_MAX = 64
KBUF = SMALL + AFFIX_MAX  # local array sizes must be plain constants
THREADS = 128  # threads per block; tests patch it small so tiny batches still cross blocks
SEG = 256  # bytes of a row per word-splitting thread where rows can be cut; tests patch it small
PINNED_MIN = 1 << 20  # host arrays of this size go to the GPU through the pinned staging buffer (`_Staging`)
PINNED_MAX = 1 << 28
TOUCHED_MIN = 1 << 20  # device arrays of this size come back into host pages touched on every thread first


def kernel(fn):
    """@cuda.jit with its machine code cached beside the CPU kernels: a fresh process loads each kernel
    instead of compiling it again (about a second each)."""
    return cached(lambda: cuda.jit(cache=CACHE_DIR is not None)(fn))


@kernel
def cut_points_kernel(data, lo, hi, seg, strict, cuts):
    """One thread per seg bytes of data[lo:hi]: the first `cut_at` boundary in its window, or -1."""
    k = cuda.grid(1)
    if k < cuts.shape[0]:
        p = max(lo + k * seg, lo + 1)
        e = min(lo + (k + 1) * seg, hi)
        c = -1
        while p < e:
            if cut_at(data, p, strict):
                c = p
                break
            p += 1
        cuts[k] = c


@kernel
def count_words_kernel(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                       d64, d8, d32, counts):
    """One thread per row: number of words."""
    r = cuda.grid(1)
    if r < offsets.shape[0] - 1:
        counts[r] = row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off,
                              at_ids, at_flags, at_first, False, d64, d64, d8, d32, 0)


@kernel
def fill_words_kernel(data, offsets, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                      row_word_off, ws, we, wv, wk):
    """One thread per row: writes its words at row_word_off[r]."""
    r = cuda.grid(1)
    if r < offsets.shape[0] - 1:
        row_words(data, offsets[r], offsets[r + 1], pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                  at_flags, at_first, True, ws, we, wv, wk, row_word_off[r])


@kernel
def encode_words_kernel(data, ws, we, wv, wk, cap_off, tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                        byte_ids, byte_fallback_ids, affix, params, cap_ids, cap_st, cap_en, ntok):
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
    new_buf = cuda.local.array(SMALL, np.int64)
    heap = cuda.local.array(1, np.int64)
    nxt = cuda.local.array(1, np.int64)
    prv = cuda.local.array(1, np.int64)
    kbuf = cuda.local.array(KBUF, np.uint8)
    k = word_tokens(data, ws[i], we[i], wv[i], wk[i], tok_data, tok_offsets, vocab_slots, merges, byte_pairs,
                    byte_ids, byte_fallback_ids, affix, params,
                    w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf)
    store_tokens(cap_off[i], k, sym_id, sym_st, sym_en, cap_ids, cap_st, cap_en)
    ntok[i] = k


@kernel
def compact_kernel(data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off, want_spans,
                   classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added):
    """One thread per word: moves its tokens to their final place (and byte spans when asked)."""
    i = cuda.grid(1)
    if i < ws.shape[0]:
        compact_word(i, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off,
                     want_spans, classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added)


@kernel
def claim_words_kernel(data, ws, we, wv, wk, keys, slot_uid, state, first, slot):
    """One thread per word: its hash's slot in an open-addressing table (key 0: empty). The thread that
    claims a slot numbers it as the next distinct word (state[0] counts them), whose representative
    is its own word (first).
    (Replaced a sort of the hashes, CuPy's unique: 1.7 of an 11 ms encode on the GPU machine.)"""
    i = cuda.grid(1)
    if i < ws.shape[0]:
        h = word_hash(data, ws, we, wv, wk, i) | np.uint64(1)  # (a merged pair of hashes is caught below)
        mask = np.uint64(keys.shape[0] - 1)
        s = (h ^ (h >> np.uint64(29))) & mask
        while True:
            k = keys[s]
            if k == 0:
                k = cuda.atomic.cas(keys, s, np.uint64(0), h)
                if k == 0:
                    d = cuda.atomic.add(state, 0, 1)
                    slot_uid[s] = d
                    first[d] = i
                    break
            if k == h:
                break
            s = (s + np.uint64(1)) & mask
        slot[i] = s


@kernel
def word_uids_kernel(data, ws, we, wv, wk, slot, slot_uid, first, uid, state):
    """One thread per word: its distinct word's number; state[1] = 1 where a word is not byte-identical
    to that number's representative (a 64-bit hash collision)."""
    i = cuda.grid(1)
    if i < ws.shape[0]:
        d = slot_uid[slot[i]]
        uid[i] = d
        if not same_word(data, ws, we, wv, wk, i, first[d]):
            state[1] = 1


@kernel
def char_start_kernel(data, flags):
    """One thread per byte: 1 where a character starts."""
    p = cuda.grid(1)
    if p < data.shape[0]:
        flags[p] = 1 if (data[p] & 0xC0) != 0x80 else 0


@kernel
def split_pieces_kernel(write, data, offsets, classes, at_data, at_off, at_ids, at_flags, at_first, row_off, ps, pe,
                        pk, counts):
    """One thread per row: its pieces after the raw-text added tokens (count, or write at row_off[r])."""
    r = cuda.grid(1)
    if r < offsets.shape[0] - 1:
        k0 = row_off[r] if write else 0
        counts[r] = row_pieces(data, offsets[r], offsets[r + 1], classes, at_data, at_off, at_ids, at_flags,
                               at_first, write, ps, pe, pk, k0) - k0


@kernel
def identity_alignment_kernel(data, ias, iae):
    """One thread per byte: the original range of the character it belongs to."""
    p = cuda.grid(1)
    if p < data.shape[0]:
        identity_alignment(data, p, ias, iae)


@kernel
def nf_items_kernel(fill, head, data, ps, pe, pk, props, maps, map_off, map_data, comp, item_off, icp, ich, counts):
    """One thread per piece: the item capacity of an NF pass, or its items (in the global scratch)."""
    i = cuda.grid(1)
    if i < ps.shape[0]:
        counts[i] = nf_piece(i, head, fill, data, ps, pe, pk, props, maps, map_off, map_data, comp, item_off, icp, ich)


@kernel
def normalize_pieces_kernel(write, head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, ps, pe,
                            pk, porig, icp, ich, item_off, n_items, out_off, out, oas, oae, counts):
    """One thread per piece: one normalizer pass (count, or write at out_off[i])."""
    i = cuda.grid(1)
    if i < ps.shape[0]:
        counts[i] = normalize_piece(i, head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, ps,
                                    pe, pk, porig, icp, ich, item_off, n_items, write, out_off, out, oas, oae)


@kernel
def piece_words_kernel(write, data, pb, pk, row_piece, pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                       at_flags, at_first, row_word, ws, we, wv, wk, counts):
    """One thread per row: the words of its normalized pieces (count, or write at row_word[r])."""
    r = cuda.grid(1)
    if r < row_piece.shape[0] - 1:
        k0 = row_word[r] if write else 0
        counts[r] = piece_words(data, pb, pk, row_piece[r], row_piece[r + 1], pt_kind, pt_prefix, classes, at_data,
                                at_off, at_ids, at_flags, at_first, write, ws, we, wv, wk, k0) - k0


KERNELS = [count_words_kernel, fill_words_kernel, encode_words_kernel, compact_kernel, char_start_kernel,
           split_pieces_kernel, identity_alignment_kernel, nf_items_kernel, normalize_pieces_kernel, piece_words_kernel,
           cut_points_kernel, claim_words_kernel, word_uids_kernel]


# Device bytes one pass holds at its peak per byte of input text: an estimate from the pipeline's
# allocations (word arrays, the distinct-word sort, per-token spans, the assembly) for prose, with
# room for short-word text; `gpu_profile.py` prints the measured peak. Tokenizer.gpu_memory_budget
# divided by this is the text one pass takes.
WORK_PER_BYTE = 64
WORK_PER_BYTE_SPANS = 192


def work_per_byte(tok, want_spans):
    per = WORK_PER_BYTE_SPANS if want_spans else WORK_PER_BYTE
    return per + per // 2 * (tok._norm is not None)  # a normalizer keeps alignments per byte of each pass


def default_budget():
    """Half the GPU's memory (unbounded under the simulator, whose "device" is host memory)."""
    if SIMULATOR:
        return 1 << 62
    import cupy
    return cupy.cuda.runtime.memGetInfo()[1] // 2


def xp():
    """The array module that pairs with the kernels: CuPy on a GPU, numpy under the simulator."""
    if SIMULATOR:
        return np
    import cupy
    return cupy


def _launch(kernel, n, *args):
    if n > 0:
        kernel[(n + THREADS - 1) // THREADS, THREADS](*args)


def _empty(m, n, dtype):
    return m.empty(max(n, 1), dtype)[:n]  # never a zero-size allocation


def _scan(m, counts):
    off = m.zeros(counts.shape[0] + 1, dtype=np.int64)
    m.cumsum(counts, out=off[1:])
    return off


def to_device(a):
    """Host array (or anything with __cuda_array_interface__) -> array of the kernels' array module.
    A large writable host array (the list[str] reader's output) crosses through `_Staging`."""
    m = xp()
    if isinstance(a, np.ndarray) and a.flags.writeable and not SIMULATOR and PINNED_MIN <= a.nbytes <= PINNED_MAX:
        src = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        with _STAGING as stage:
            buf = stage.get(src.shape[0])
            if buf is not None:
                d = m.empty(a.shape, a.dtype)
                cut = np.linspace(0, src.shape[0], 17).astype(np.int64)
                copy_rows(src, cut[:-1], cut, buf)
                d.set(buf.view(a.dtype).reshape(a.shape))
                # CuPy's set is asynchronous from pinned memory: the next caller must not refill the
                # buffer while the GPU still reads it
                m.cuda.get_current_stream().synchronize()
                return d
    a = m.asarray(a)
    if SIMULATOR and not a.flags.writeable:  # the simulator copies every argument back after a launch
        a = a.copy()
    return a


def to_host(a):
    """Device array -> numpy. A large one goes into fresh memory whose pages every thread touches
    first: `.get()` takes each fresh page's fault on one thread. On the GPU machine a call's 25 MB of
    ids came back in 9.8 ms that way and in 3.7 ms with the pages touched first (two device checks)."""
    if a.nbytes < TOUCHED_MIN or not a.flags.c_contiguous:
        return a.get()
    out = np.empty(a.shape, a.dtype)
    _touch_pages(out.reshape(-1).view(np.uint8))
    a.get(out=out)
    return out


@cpu_kernel(parallel=True)
def _touch_pages(buf):
    for p in prange((buf.shape[0] + 4095) // 4096):
        buf[p * 4096] = 0


class _Staging:
    """One page-locked host buffer, reused by every call (grown to the next power of two, at most
    PINNED_MAX), which a parallel kernel fills and the GPU then reads at the bus's speed. CuPy copies
    a pageable array into its own pinned block on one thread first: on the GPU machine 25.8 MB took
    2.1 ms that way, 0.9 ms this way. (Read-only arrays keep CuPy's path: the copy kernel would be
    compiled once more for them.)"""

    def __init__(self):
        self._lock = threading.Lock()
        self._buf = None

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc):
        self._lock.release()

    def get(self, n):
        """The buffer's first n bytes, or None where page-locked memory is refused (a container's
        limit, say): the copy then takes CuPy's own path."""
        if self._buf is None or self._buf.shape[0] < n:
            import cupy
            import cupyx
            self._buf = None  # (the old block goes back to CuPy's pinned pool)
            try:
                self._buf = cupyx.empty_pinned(1 << max(n - 1, 1).bit_length(), np.uint8)
            except (MemoryError, cupy.cuda.runtime.CUDARuntimeError):
                return None
        return self._buf[:n]


_STAGING = _Staging()


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
        norm = tok._norm
        if norm is not None:
            self.norm = tuple(to_device(a) for a in norm.tables.arrays())
            self.norm_strings = (to_device(norm.sdata), to_device(norm.soff))
            self.norm_passes = [(head, a0, a1, *(to_device(x) for x in chain))
                                for head, a0, a1, *chain in norm.passes]


def tables(tok):
    if tok._cuda is None:
        tok._cuda = _DeviceTables(tok)
    return tok._cuda


def normalize_rows(t, m, data, offsets):
    """Added tokens' first pass, then the normalizer's passes: see `cpu.normalize_rows` (same outputs,
    on the device). NF passes size and fill their item scratch with two launches of nf_items_kernel."""
    n = int(offsets.shape[0]) - 1
    z64, z32 = m.zeros(1, np.int64), m.zeros(1, np.int32)
    counts = _empty(m, n, np.int64)
    _launch(split_pieces_kernel, n, False, data, offsets, t.classes, *t.added, z64, z64, z64, z32, counts)
    row_piece = _scan(m, counts)
    k = int(row_piece[-1])
    ps, pe, pk = _empty(m, k, np.int64), _empty(m, k, np.int64), _empty(m, k, np.int32)
    _launch(split_pieces_kernel, n, True, data, offsets, t.classes, *t.added, row_piece, ps, pe, pk, counts)
    porig = ps
    text = data
    ias, iae = _empty(m, int(data.shape[0]), np.int64), _empty(m, int(data.shape[0]), np.int64)
    _launch(identity_alignment_kernel, int(data.shape[0]), data, ias, iae)
    counts = _empty(m, k, np.int64)
    for head, arg0, arg1, cmap, coff, cdata in t.norm_passes:
        item_off, n_items, icp, ich = m.zeros(k + 1, np.int64), m.zeros(max(k, 1), np.int64), z32, z32
        if is_nf(head):
            _launch(nf_items_kernel, k, False, head, text, ps, pe, pk, *t.norm, item_off, icp, ich, counts)
            item_off = _scan(m, 2 * counts)  # items, then sorting scratch
            icp, ich = _empty(m, int(item_off[-1]), np.int32), _empty(m, int(item_off[-1]), np.int32)
            _launch(nf_items_kernel, k, True, head, text, ps, pe, pk, *t.norm, item_off, icp, ich, n_items)
        args = (head, arg0, arg1, cmap, coff, cdata, *t.norm_strings, t.norm[0], text, ias, iae, ps, pe, pk, porig,
                icp, ich, item_off, n_items)
        _launch(normalize_pieces_kernel, k, False, *args, z64, m.zeros(1, np.uint8), z64, z64, counts)
        pb = _scan(m, counts)
        total = int(pb[-1])
        text, ias, iae = _empty(m, total, np.uint8), _empty(m, total, np.int64), _empty(m, total, np.int64)
        _launch(normalize_pieces_kernel, k, True, *args, pb, text, ias, iae, counts)
        ps, pe = pb[:-1], pb[1:]
    return text, pb, pk, row_piece, ias, iae


def _words(tok, t, m, data, offsets):
    """Words of every row: (text they point into, its row offsets, row_word, ws, we, wv, wk, alignment)."""
    n = int(offsets.shape[0]) - 1
    pt = tok.spec.pre_tokenizer
    counts = _empty(m, n, np.int64)
    d64, d8, d32 = m.zeros(1, np.int64), m.zeros(1, np.uint8), m.zeros(1, np.int32)
    if tok._norm is None:
        _launch(count_words_kernel, n, data, offsets, t.pt_prog, pt.add_prefix_space, t.classes, *t.added,
                d64, d8, d32, counts)
        text, text_off, align = data, offsets, None
    else:
        text, pb, pk, row_piece, ias, iae = normalize_rows(t, m, data, offsets)
        _launch(piece_words_kernel, n, False, text, pb, pk, row_piece, t.pt_prog, pt.add_prefix_space, t.classes,
                *t.added, d64, d64, d64, d8, d32, counts)
        text_off, align = pb[row_piece], (ias, iae)
    row_word = _scan(m, counts)
    nw = int(row_word[-1])
    ws, we, wv, wk = _empty(m, nw, np.int64), _empty(m, nw, np.int64), _empty(m, nw, np.uint8), _empty(m, nw, np.int32)
    if tok._norm is None:
        _launch(fill_words_kernel, n, data, offsets, t.pt_prog, pt.add_prefix_space, t.classes, *t.added,
                row_word, ws, we, wv, wk)
    else:
        _launch(piece_words_kernel, n, True, text, pb, pk, row_piece, t.pt_prog, pt.add_prefix_space, t.classes,
                *t.added, row_word, ws, we, wv, wk, counts)
    return text, text_off, row_word, ws, we, wv, wk, align


def _segments(m, data, offsets, strict):
    """Row offsets with cuts about every SEG bytes (see `cut_points_kernel`), and where each original
    row starts among them. Merged without a sort: cuts never fall on a row start."""
    n = int(offsets.shape[0]) - 1
    lo, hi = int(offsets[0]), int(offsets[-1])
    nk = (hi - lo + SEG - 1) // SEG
    cuts = _empty(m, nk, np.int64)
    _launch(cut_points_kernel, nk, data, lo, hi, SEG, strict, cuts)
    cuts = cuts[cuts >= 0]
    cuts = cuts[offsets[m.searchsorted(offsets, cuts)] != cuts]
    nc = int(cuts.shape[0])
    orig = m.arange(n + 1, dtype=np.int64) + m.searchsorted(cuts, offsets)
    seg_off = m.empty(n + 1 + nc, np.int64)
    seg_off[orig] = offsets
    seg_off[m.arange(nc, dtype=np.int64) + m.searchsorted(offsets, cuts, side="right")] = cuts
    return seg_off, orig


def _model_distinct(tok, t, m, text, ws, we, wv, wk):
    """The model over each distinct word once (as `cpu._model_distinct`): per word, where its
    representative's tokens start (cap_off) and how many there are."""
    nw = int(ws.shape[0])
    size = 1 << (nw + nw // 2).bit_length()  # a power of two over 1.5x the words: at most two thirds full
    keys, slot_uid = m.zeros(size, np.uint64), m.empty(size, np.int64)
    state = m.zeros(2, np.int64)  # distinct words, and whether a hash collided
    first, slot, uid = _empty(m, nw, np.int64), _empty(m, nw, np.int64), _empty(m, nw, np.int64)
    _launch(claim_words_kernel, nw, text, ws, we, wv, wk, keys, slot_uid, state, first, slot)
    _launch(word_uids_kernel, nw, text, ws, we, wv, wk, slot, slot_uid, first, uid, state)
    distinct, collided = state.tolist()
    if collided:  # no sharing in this batch
        first = uid = m.arange(nw, dtype=np.int64)
    else:
        first = first[:distinct]
    uws, uwe, uwv, uwk = ws[first], we[first], wv[first], wk[first]
    nu = int(uws.shape[0])
    cap = m.where(uwk >= 0, 1, uwe - uws + uwv.astype(np.int64)).astype(np.int64)
    ucap_off = _scan(m, cap)
    total = int(ucap_off[-1])
    cap_ids = m.empty(max(total, 1), np.int32)
    cap_st = m.empty(max(total, 1), np.int64)
    cap_en = m.empty(max(total, 1), np.int64)
    untok = _empty(m, nu, np.int64)
    _launch(encode_words_kernel, nu, text, uws, uwe, uwv, uwk, ucap_off, *t.bpe, cap_ids, cap_st, cap_en, untok)
    _long_words_on_cpu(tok, text, m, uws, uwe, uwv, uwk, ucap_off, cap_ids, cap_st, cap_en, untok)
    return ucap_off[uid], cap_ids, cap_st, cap_en, untok[uid]


def encode(tok, b, want_spans):
    """The pipeline over Batch `b` (host or device arrays); returns raw per-token device arrays."""
    m = xp()
    t = tables(tok)
    data = to_device(b.data)
    offsets = to_device(b.offsets)
    d64 = m.zeros(1, np.int64)
    d8 = m.zeros(1, np.uint8)
    d32 = m.zeros(1, np.int32)
    rows = offsets
    cuts = cpu._segmentable(tok)
    if cuts != cpu.NO_CUTS and int(offsets.shape[0]) > 1:
        offsets, orig = _segments(m, data, rows, cuts == cpu.STRICT_CUTS)
    text, text_off, row_word, ws, we, wv, wk, align = _words(tok, t, m, data, offsets)
    nw = int(ws.shape[0])  # (known on the host: no read back from the device)
    cap_off, cap_ids, cap_st, cap_en, ntok = _model_distinct(tok, t, m, text, ws, we, wv, wk)
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
    _launch(compact_kernel, nw, text, ws, we, wv, wk, word_row, text_off, cap_off, cap_ids, cap_st, cap_en, word_tok,
            want_spans, t.classes, t.lead, t.trail, ids, t_st, t_en, t_lead, t_trail, t_added)
    if offsets is not rows:  # segments -> the rows they were cut from
        row_word = row_word[orig]
    r = {"ids": ids, "row_tok": word_tok[row_word], "row_word": row_word, "word_tok": word_tok,
         "row_start": rows[:-1]}
    if want_spans:
        flags = m.empty(max(data.shape[0], 1), np.int64)[:data.shape[0]]
        _launch(char_start_kernel, int(data.shape[0]), data, flags)
        r.update(t_st=t_st, t_en=t_en, t_lead=t_lead, t_trail=t_trail, t_added=t_added,
                 char_index=_scan(m, flags), text=text, s_st=t_st, s_en=t_en)
        if align is not None:  # normalized spans -> original bytes (token spans are never empty)
            r.update(t_st=align[0][t_st], t_en=align[1][t_en - 1])
    return r


def _long_words_on_cpu(tok, text, m, ws, we, wv, wk, cap_off, cap_ids, cap_st, cap_en, ntok):
    """Words the kernel flagged (ntok == -1) are merged by the CPU's heap path and written back. Only
    their bytes travel, packed end to end (token spans are relative to the word, so they need no shift)."""
    sel = m.flatnonzero(ntok < 0)
    if int(sel.shape[0]) == 0:
        return
    host = lambda a: a.get() if hasattr(a, "get") else np.asarray(a)  # noqa: E731
    sws, swe, swv, swk = host(ws[sel]), host(we[sel]), host(wv[sel]), host(wk[sel])
    lens = swe - sws
    pack_off = cpu._scan(lens)
    pos = np.repeat(sws - pack_off[:-1], lens) + np.arange(int(pack_off[-1]), dtype=np.int64)
    data_h = cpu._readonly(host(text[to_device(pos)]))  # (the type the CPU's own calls pass)
    pws, pwe = pack_off[:-1], pack_off[1:]
    scap = np.where(swk >= 0, 1, lens + swv).astype(np.int64)
    scap_off = cpu._scan(scap)
    total = int(scap_off[-1])
    ids = np.empty(total, np.int32)
    st = np.empty(total, np.int64)
    en = np.empty(total, np.int64)
    k = np.empty(len(sws), np.int64)
    cpu.encode_words(data_h, pws, pwe, swv, swk, scap_off, *tok._model.arrays(), max(1, min(len(sws), 8)),
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
