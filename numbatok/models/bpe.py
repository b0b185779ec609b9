"""BPE model: merge a word's symbols by lowest merge rank, leftmost first, exactly as the reference.

Tables: see `models.tables.ModelTables`.

Words of up to SMALL symbols merge with a linear scan over cached pair ranks in scratch the caller
provides (registers/local memory on the GPU); longer words use a heap, O(n log n), so a 1 MB word
costs milliseconds, not hours.
"""
import numpy as np

from .._numba import jitable, prefetch
from ..kernels.hashing import bytes_lookup, pair_home, pair_value
from ..kernels.utf8 import seq_len

NAME = "BPE"
SMALL = 64
NO_PAIR = np.int64(2**63 - 1)
# byte_pairs' value for two bytes that no merged token holds side by side: no merge ever joins a
# symbol ending in the first to one starting with the second, so a word cut there merges as two
CUT = -2


@jitable
def _lookup_affixed(w, s, e, first, last, tok_data, tok_offsets, vocab_slots, affix, n_prefix, n_suffix, kbuf):
    # Vocabulary lookup of (prefix if not first) + w[s:e] + (suffix if last), built in kbuf.
    if (first or n_prefix == 0) and (not last or n_suffix == 0):
        return bytes_lookup(vocab_slots, tok_data, tok_offsets, w, s, e)
    k = 0
    if not first:
        for j in range(n_prefix):
            kbuf[k] = affix[j]
            k += 1
    for j in range(s, e):
        kbuf[k] = w[j]
        k += 1
    if last:
        for j in range(n_suffix):
            kbuf[k] = affix[n_prefix + j]
            k += 1
    return bytes_lookup(vocab_slots, tok_data, tok_offsets, kbuf, 0, k)


@jitable
def _push(sym_id, sym_st, sym_en, k, acc, tid, length):
    # Appends a symbol placed by the running sum of kept lengths; returns (count, sum).
    sym_id[k] = tid
    sym_st[k] = acc
    sym_en[k] = acc + length
    return k + 1, acc + length


@jitable
def init_symbols(w, n, tok_data, tok_offsets, vocab_slots, byte_ids, byte_fallback_ids, affix, params,
                 sym_id, sym_st, sym_en, kbuf):
    """Initial symbols of word w[0:n] (one per byte or per character), unknowns handled as the reference.

    Writes ids and byte spans; returns the symbol count (which may be 0 when unknowns are dropped).
    Spans are the running sum of the kept symbols' lengths, as the reference's Word computes them:
    after a dropped unknown character the following offsets shift left, exactly as there.
    """
    n_prefix = params[1]
    n_suffix = params[2]
    flags = params[3]
    unk_id = params[4]
    byte_level = (flags & 8) != 0
    k = 0
    acc = 0
    unk_open = False
    unk_st = 0
    unk_en = 0
    i = 0
    while i < n:
        step = 1 if byte_level else seq_len(w[i])
        j = i + step
        first = i == 0
        last = j >= n
        if byte_level and n_prefix == 0 and n_suffix == 0:
            tid = byte_ids[w[i]]
        else:
            tid = _lookup_affixed(w, i, j, first, last, tok_data, tok_offsets, vocab_slots, affix,
                                  n_prefix, n_suffix, kbuf)
        if tid >= 0:
            if unk_open:
                k, acc = _push(sym_id, sym_st, sym_en, k, acc, unk_id, unk_en - unk_st)
                unk_open = False
            k, acc = _push(sym_id, sym_st, sym_en, k, acc, tid, j - i)
        else:
            handled = False
            if (flags & 2) != 0:
                all_known = True
                for q in range(i, j):
                    if byte_fallback_ids[w[q]] < 0:
                        all_known = False
                if all_known:
                    # (the reference checks only the bytes of the character itself)
                    for q in range(i, j):
                        k, acc = _push(sym_id, sym_st, sym_en, k, acc, byte_fallback_ids[w[q]], 1)
                    handled = True
            if not handled and unk_id >= 0:
                if unk_open and (flags & 1) != 0:
                    unk_en = j
                else:
                    if unk_open:
                        k, acc = _push(sym_id, sym_st, sym_en, k, acc, unk_id, unk_en - unk_st)
                    unk_open = True
                    unk_st = i
                    unk_en = j
        i = j
    if unk_open:
        k, acc = _push(sym_id, sym_st, sym_en, k, acc, unk_id, unk_en - unk_st)
    return k


@jitable
def _rank(merges, n_ids, left, right):
    """(rank, merged id) of the pair; rank 2**31 - 1 and id -1 when it never merges."""
    v = pair_value(merges, np.int64(left) * n_ids + right)
    if v < 0:
        return np.int64(2147483647), np.int64(-1)
    if merges.shape[1] == 4:
        return v >> 16, v & 0xFFFF
    return v >> 32, v & 0xFFFFFFFF


@jitable
def merge_linear(sym_id, sym_st, sym_en, n, merges, n_ids, rank_buf, new_buf, by_bytes, w, byte_pairs):
    """Merges in place (lowest rank, leftmost first); returns the new symbol count. O(n^2), for short words.
    by_bytes: symbol i is the byte w[i], so the first ranks come from the dense byte_pairs (512 KB,
    mostly in cache) instead of hashing into the merge table."""
    if by_bytes:
        for i in range(n - 1):
            v = byte_pairs[np.int64(w[i]) * 256 + w[i + 1]]
            if v < 0:
                rank_buf[i], new_buf[i] = 2147483647, -1
            else:
                rank_buf[i], new_buf[i] = v >> 32, v & 0xFFFFFFFF
    else:
        for i in range(n - 1):
            rank_buf[i], new_buf[i] = _rank(merges, n_ids, sym_id[i], sym_id[i + 1])
    while n > 1:
        best = -1
        best_rank = 2147483647
        for i in range(n - 1):
            if rank_buf[i] < best_rank:
                best_rank = rank_buf[i]
                best = i
        if best < 0:
            break
        sym_id[best] = new_buf[best]
        sym_en[best] = sym_en[best + 1]
        for i in range(best + 1, n - 1):
            sym_id[i] = sym_id[i + 1]
            sym_st[i] = sym_st[i + 1]
            sym_en[i] = sym_en[i + 1]
            rank_buf[i] = rank_buf[i + 1]
            new_buf[i] = new_buf[i + 1]
        n -= 1
        if best > 0:
            rank_buf[best - 1], new_buf[best - 1] = _rank(merges, n_ids, sym_id[best - 1], sym_id[best])
        if best < n - 1:
            rank_buf[best], new_buf[best] = _rank(merges, n_ids, sym_id[best], sym_id[best + 1])
    return n


@jitable
def _packed_rank(merges, n_ids, left, right):
    # rank << 32 | merged id of the pair (ranks order merges; a rank names one merge, so one id),
    # NO_PAIR when it never merges
    r, t = _rank(merges, n_ids, left, right)
    return NO_PAIR if t < 0 else (r << 32) | t


@jitable
def _byte_symbols(data, s, e, virt, byte_ids, byte_pairs, sym_id, rv):
    """A byte-level word's symbols (one per byte, a virtual space first if virt) and the packed
    (rank << 32 | id) value of each adjacent pair, NO_PAIR where it never merges; returns the count."""
    n = e - s + virt
    prev = 32 if virt else data[s]
    sym_id[0] = byte_ids[prev]
    for j in range(1, n):
        c = data[s + j - virt]
        sym_id[j] = byte_ids[c]
        x = byte_pairs[np.int64(prev) * 256 + c]
        rv[j - 1] = x if x >= 0 else NO_PAIR
        prev = c
    return n


@jitable
def merge_byte_word(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, sym_id, rv, at=0):
    """Ids of a byte-level word data[s:e] (a virtual space first if virt) of at most SMALL bytes, for
    vocabularies where every byte is a symbol and no affix applies (flag bit 4): `merge_linear`
    without spans, over one packed (rank, id) array, the ids-only fast path's model. The ids go to
    sym_id[at:] (`merge_byte_long`'s pieces: an offset, not a view, which costs reference counts;
    the symbols are made here, as `_byte_symbols` does: with the offset, a call to it was 1.3x the
    pieces' time). Returns the count."""
    n = e - s + virt
    prev = 32 if virt else data[s]
    sym_id[at] = byte_ids[prev]
    for j in range(1, n):
        c = data[s + j - virt]
        sym_id[at + j] = byte_ids[c]
        x = byte_pairs[np.int64(prev) * 256 + c]
        rv[at + j - 1] = x if x >= 0 else NO_PAIR
        prev = c
    while n > 1:
        best = 0
        low = rv[at]
        for j in range(1, n - 1):
            if rv[at + j] < low:  # strictly lower: the leftmost of equal ranks wins
                low = rv[at + j]
                best = j
        if low == NO_PAIR:
            break
        sym_id[at + best] = np.int32(low & 0xFFFFFFFF)
        n -= 1
        for j in range(best + 1, n):
            sym_id[at + j] = sym_id[at + j + 1]
            rv[at + j] = rv[at + j + 1]
        if best > 0:
            rv[at + best - 1] = _packed_rank(merges, n_ids, sym_id[at + best - 1], sym_id[at + best])
        if best < n - 1:
            rv[at + best] = _packed_rank(merges, n_ids, sym_id[at + best], sym_id[at + best + 1])
    return n


# room per word in `merge_byte_words`' scratch: the longest word it takes (LINEAR_BYTES of the loops)
GROUP_ROOM = 16


@jitable
def merge_byte_words(data, ws, wm, sel, g, byte_ids, byte_pairs, merges, mflat, n_ids, sym_id, rv, nsym, pend):
    """`merge_byte_word` of g words at once (CPU loops only): word j is data[ws[u]:ws[u] + wm[u]] for
    u = sel[j], at most GROUP_ROOM bytes; its ids go to sym_id[j * GROUP_ROOM:], their count to
    nsym[j]. The words take one merge each in turn, and the merge table's slots for the pairs a merge
    makes are prefetched (`mflat`: the table as one array) and read at the word's next turn: one
    word's merges are a chain of lookups each waiting on the last, beyond L2 in a table of 4-17 MB,
    and side by side they wait together (alone 0.85-1.2 us a word for cl100k and o200k, 0.5-0.55
    in groups of 16)."""
    compact = merges.shape[1] == 4
    for j in range(g):
        s = ws[sel[j]]
        n = wm[sel[j]]
        at = j * GROUP_ROOM
        prev = data[s]
        sym_id[at] = byte_ids[prev]
        for q in range(1, n):
            c = data[s + q]
            sym_id[at + q] = byte_ids[c]
            x = byte_pairs[np.int64(prev) * 256 + c]
            rv[at + q - 1] = x if x >= 0 else NO_PAIR
            prev = c
        nsym[j] = n
        pend[j] = 0
    active = g
    while active > 0:
        active = 0
        for j in range(g):
            n = nsym[j]
            if n <= 0:  # (done: -count)
                continue
            at = j * GROUP_ROOM
            pd = pend[j]  # (the last merge's place << 2, bit 0: its left pair to read, bit 1: its right)
            if pd & 1:
                b = at + (pd >> 2)
                rv[b - 1] = _packed_rank(merges, n_ids, sym_id[b - 1], sym_id[b])
            if pd & 2:
                b = at + (pd >> 2)
                rv[b] = _packed_rank(merges, n_ids, sym_id[b], sym_id[b + 1])
            best = 0
            low = NO_PAIR
            if n > 1:
                low = rv[at]
                for q in range(1, n - 1):
                    if rv[at + q] < low:  # strictly lower: the leftmost of equal ranks wins
                        low = rv[at + q]
                        best = q
            if low == NO_PAIR:
                nsym[j] = -n
                continue
            sym_id[at + best] = np.int32(low & 0xFFFFFFFF)
            n -= 1
            for q in range(best + 1, n):
                sym_id[at + q] = sym_id[at + q + 1]
                rv[at + q] = rv[at + q + 1]
            nsym[j] = n
            pd = best << 2
            if best > 0:
                pd |= 1
                prefetch(mflat, pair_home(mflat, compact, np.int64(sym_id[at + best - 1]) * n_ids + sym_id[at + best]))
            if best < n - 1:
                pd |= 2
                prefetch(mflat, pair_home(mflat, compact, np.int64(sym_id[at + best]) * n_ids + sym_id[at + best + 1]))
            pend[j] = pd
            active += 1
    for j in range(g):
        nsym[j] = -nsym[j]


@jitable
def merge_byte_heap(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, sym_id, cur, nxt, prv, heap):
    """`merge_byte_word` in O(n log n), for long words (over 32 bytes it was the faster, 1.2-1.7x on
    Japanese, Chinese and the UDHR's longer words): a heap of (rank, position) over a linked list, as
    `merge_heap`, with each position's current pair value (rank << 32 | id) kept in `cur`, so that
    a popped entry is checked against it instead of looked up again (a rank names one merge: an
    entry whose rank is its position's current one is that pair). Scratch: sym_id n, cur, nxt, prv
    n, heap 3n. Returns the count; the ids are sym_id[:count]."""
    n = _byte_symbols(data, s, e, virt, byte_ids, byte_pairs, sym_id, cur)
    size = 0
    for j in range(n - 1):
        if cur[j] != NO_PAIR:
            size = _heap_push(heap, size, ((cur[j] >> 32) << 32) | j)
        nxt[j] = j + 1
        prv[j + 1] = j
    nxt[n - 1] = -1
    prv[0] = -1
    cur[n - 1] = NO_PAIR
    while size > 0:
        key, size = _heap_pop(heap, size)
        i = key & 0xFFFFFFFF
        v = cur[i]
        if (v >> 32) != (key >> 32):  # stale: the pair at i changed, or i was merged away
            continue
        sym_id[i] = np.int32(v & 0xFFFFFFFF)
        j = nxt[i]
        cur[j] = NO_PAIR
        nj = nxt[j]
        nxt[i] = nj
        cur[i] = NO_PAIR
        if nj >= 0:
            prv[nj] = i
            w = _packed_rank(merges, n_ids, sym_id[i], sym_id[nj])
            cur[i] = w
            if w != NO_PAIR:
                size = _heap_push(heap, size, ((w >> 32) << 32) | i)
        p = prv[i]
        if p >= 0:
            w = _packed_rank(merges, n_ids, sym_id[p], sym_id[i])
            cur[p] = w
            if w != NO_PAIR:
                size = _heap_push(heap, size, ((w >> 32) << 32) | p)
    k = 0
    i = 0
    while i >= 0:
        sym_id[k] = sym_id[i]
        k += 1
        i = nxt[i]
    return k


@jitable
def merge_byte_long(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, sym_id, cur, nxt, prv, heap):
    """`merge_byte_heap`'s ids of a long byte-level word, cut first where no merge can join two bytes
    (CUT), each piece merged alone: exact, since every merged symbol is a token of the merges. With
    gpt2, Japanese and Chinese words fall into pieces of 1.5-2 bytes on average (none over 12 in the
    UDHR's), so the heap's O(n log n) over 30-300-byte words becomes short linear merges, 2.3-2.8x
    faster; a word with no cut (base64, a run of letters) takes the linear scan up to 32 bytes and
    the heap above. Same scratch; returns the count."""
    k = 0
    a = s
    va = virt
    prev = 32 if virt else data[s]
    for j in range(s + 1 - virt, e):
        c = data[j]
        if byte_pairs[np.int64(prev) * 256 + c] == CUT:
            m = _merge_piece(data, a, j, va, byte_ids, byte_pairs, merges, n_ids, sym_id, cur, k)
            if m < 0:  # (a long piece: a view, rare; in `_merge_piece` it cost every piece reference counts)
                m = merge_byte_heap(data, a, j, va, byte_ids, byte_pairs, merges, n_ids, sym_id[k:], cur, nxt, prv,
                                    heap)
            k += m
            a = j
            va = 0
        prev = c
    m = _merge_piece(data, a, e, va, byte_ids, byte_pairs, merges, n_ids, sym_id, cur, k)
    if m < 0:
        m = merge_byte_heap(data, a, e, va, byte_ids, byte_pairs, merges, n_ids, sym_id[k:], cur, nxt, prv, heap)
    return k + m


@jitable
def _merge_piece(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, sym_id, rv, at):
    """A piece of `merge_byte_long`'s word, its ids from sym_id[at] on: one or two bytes without a
    merge scan (most pieces of CJK text), then the linear scan; -1 over 32 bytes (the heap's)."""
    n = e - s + virt
    b0 = 32 if virt else data[s]
    if n == 1:
        sym_id[at] = byte_ids[b0]
        return 1
    if n == 2:
        x = byte_pairs[np.int64(b0) * 256 + data[e - 1]]
        if x >= 0:
            sym_id[at] = np.int32(x & 0xFFFFFFFF)
            return 1
        sym_id[at] = byte_ids[b0]
        sym_id[at + 1] = byte_ids[data[e - 1]]
        return 2
    if n <= 32:  # (where the linear scan was the faster, as LINEAR_BYTES in the CPU backend)
        return merge_byte_word(data, s, e, virt, byte_ids, byte_pairs, merges, n_ids, sym_id, rv, at)
    return -1


@jitable
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        t = heap[parent]
        heap[parent] = heap[i]
        heap[i] = t
        i = parent
    return size + 1


@jitable
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        c = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            c = left + 1
        if heap[i] <= heap[c]:
            break
        t = heap[c]
        heap[c] = heap[i]
        heap[i] = t
        i = c
    return top, size


@jitable
def merge_heap(sym_id, sym_st, sym_en, n, merges, n_ids, heap, nxt, prv, by_bytes, w, byte_pairs):
    """Same result as merge_linear in O(n log n): a heap of (rank, position) over a linked list."""
    size = 0
    for i in range(n):
        nxt[i] = i + 1 if i + 1 < n else -1
        prv[i] = i - 1
    for i in range(n - 1):
        if by_bytes:
            v = byte_pairs[np.int64(w[i]) * 256 + w[i + 1]]
            r, t = v >> 32, v
        else:
            r, t = _rank(merges, n_ids, sym_id[i], sym_id[i + 1])
        if t >= 0:
            size = _heap_push(heap, size, (np.int64(r) << 32) | i)
    while size > 0:
        key, size = _heap_pop(heap, size)
        r = np.int32(key >> 32)
        i = np.int64(key & 0xFFFFFFFF)
        if sym_id[i] < 0:
            continue
        j = nxt[i]
        if j < 0:
            continue
        r2, t2 = _rank(merges, n_ids, sym_id[i], sym_id[j])
        if t2 < 0 or r2 != r:
            continue
        sym_id[i] = t2
        sym_en[i] = sym_en[j]
        sym_id[j] = -1
        nj = nxt[j]
        nxt[i] = nj
        if nj >= 0:
            prv[nj] = i
        p = prv[i]
        if p >= 0:
            r3, t3 = _rank(merges, n_ids, sym_id[p], sym_id[i])
            if t3 >= 0:
                size = _heap_push(heap, size, (np.int64(r3) << 32) | p)
        if nj >= 0:
            r3, t3 = _rank(merges, n_ids, sym_id[i], sym_id[nj])
            if t3 >= 0:
                size = _heap_push(heap, size, (np.int64(r3) << 32) | i)
    k = 0
    i = 0
    while i >= 0 and i < n:
        sym_id[k] = sym_id[i]
        sym_st[k] = sym_st[i]
        sym_en[k] = sym_en[i]
        k += 1
        i = nxt[i]
    return k
