"""The per-row and per-word steps of an encode, written once and driven by both backends.

Row step (one row -> its words): added-token split (two passes, as the reference), then the
pre-tokenizer on every remaining piece. A word is a byte span [ws, we) of the batch, a flag wv for a
virtual leading space (add_prefix_space), and wk: -1 for text, else the id of the added token it is.
With a normalizer the row step runs in two halves around it (`row_pieces`, `piece_words`), and words
are spans of the normalized buffer.

Word step (one word -> its tokens): copy the word's model-space bytes, build the initial symbols,
merge. Tokens are written at the word's capacity offset (a word never yields more tokens than its
byte length), then compacted, so the model runs once, not once to size and once to fill.
"""
from ._numba import jitable
from .added_tokens import find_next
from .kernels.utf8 import seq_len
from .models import wordlevel, wordpiece
from .models.bpe import SMALL, init_symbols, merge_heap, merge_linear
from .models.tables import WORDLEVEL, WORDPIECE
from .pre_tokenizers import split_piece
from .unicode_tables import SPACE
from .kernels.utf8 import skip_backward, skip_forward
from .kernels.hashing import bytes_lookup


@jitable
def cut_at(data, p, strict):
    """True where an ASCII non-space byte is followed by a space, tab, CR or LF: the GPT-2 pattern
    never matches across such a boundary and has no look-behind, and a whitespace split keeps it a
    boundary, so a row cut there encodes to exactly the ids of the whole row (see
    `backends.cpu._segmentable` for the tokenizers this holds for). Not at a vertical tab or form
    feed: BertNormalizer deletes those as control characters. `strict` (the cl100k and o200k
    patterns, whose symbol runs take the CRs and LFs after them): a CR or LF only after a letter or digit."""
    x = data[p]
    y = data[p - 1]
    if not ((x == 32 or x == 9 or x == 10 or x == 13) and y < 128 and y != 32 and not (y >= 9 and y <= 13)):
        return False
    if strict and (x == 10 or x == 13):
        return (y >= 48 and y <= 57) or ((y | 32) >= 97 and (y | 32) <= 122)
    return True


@jitable
def _added_pass2(data, a, b, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                 write, ws, we, wv, wk, k):
    start_offset = a
    pos = a
    while True:
        t, s, e, resume = find_next(data, pos, a, b, start_offset, 1, classes, at_data, at_off, at_flags, at_first)
        if t < 0:
            break
        if start_offset < s:
            k = split_piece(data, start_offset, s, pt_kind, pt_prefix, classes, write, ws, we, wv, wk, k)
        if write:
            ws[k] = s
            we[k] = e
            wv[k] = 0
            wk[k] = at_ids[t]
        k += 1
        start_offset = e
        pos = resume
    if start_offset < b:
        k = split_piece(data, start_offset, b, pt_kind, pt_prefix, classes, write, ws, we, wv, wk, k)
    return k


@jitable
def row_words(data, a, b, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
              write, ws, we, wv, wk, k):
    """Words of row [a, b) appended at k; returns the new count. With write=False it only counts."""
    if at_ids.shape[0] == 0:
        return split_piece(data, a, b, pt_kind, pt_prefix, classes, write, ws, we, wv, wk, k)
    start_offset = a
    pos = a
    while True:
        t, s, e, resume = find_next(data, pos, a, b, start_offset, 0, classes, at_data, at_off, at_flags, at_first)
        if t < 0:
            break
        if start_offset < s:
            k = _added_pass2(data, start_offset, s, pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                             at_flags, at_first, write, ws, we, wv, wk, k)
        if write:
            ws[k] = s
            we[k] = e
            wv[k] = 0
            wk[k] = at_ids[t]
        k += 1
        start_offset = e
        pos = resume
    if start_offset < b:
        k = _added_pass2(data, start_offset, b, pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                         at_flags, at_first, write, ws, we, wv, wk, k)
    return k


@jitable
def _piece(write, ps, pe, pk, k, s, e, kind):
    if write:
        ps[k] = s
        pe[k] = e
        pk[k] = kind
    return k + 1


@jitable
def row_pieces(data, a, b, classes, at_data, at_off, at_ids, at_flags, at_first, write, ps, pe, pk, k):
    """With a normalizer, the row step splits in two around it. First: the pieces of row [a, b) after
    the added tokens with normalized=false (matched in the raw text), appended at k: a text piece
    (pk = -1) goes through the normalizer, a token piece (pk = its id) passes unchanged. Returns the
    new count."""
    start_offset = a
    pos = a
    while True:
        t, s, e, resume = find_next(data, pos, a, b, start_offset, 0, classes, at_data, at_off, at_flags, at_first)
        if t < 0:
            break
        if start_offset < s:
            k = _piece(write, ps, pe, pk, k, start_offset, s, -1)
        k = _piece(write, ps, pe, pk, k, s, e, at_ids[t])
        start_offset = e
        pos = resume
    if start_offset < b:
        k = _piece(write, ps, pe, pk, k, start_offset, b, -1)
    return k


@jitable
def piece_words(data, pb, pk, i0, i1, pt_kind, pt_prefix, classes, at_data, at_off, at_ids, at_flags, at_first,
                write, ws, we, wv, wk, k):
    """Then: the words of a row's normalized pieces i0..i1-1 (piece i is data[pb[i]:pb[i + 1]]),
    appended at k. A token piece is one word; each text piece is a sentence of its own for the second
    added-token pass (normalized=true tokens, normalized contents) and the pre-tokenizer."""
    for i in range(i0, i1):
        if pk[i] >= 0:
            if write:
                ws[k] = pb[i]
                we[k] = pb[i + 1]
                wv[k] = 0
                wk[k] = pk[i]
            k += 1
        else:
            k = _added_pass2(data, pb[i], pb[i + 1], pt_kind, pt_prefix, classes, at_data, at_off, at_ids,
                             at_flags, at_first, write, ws, we, wv, wk, k)
    return k


@jitable
def word_tokens(data, s, e, virt, kind, tok_data, tok_offsets, vocab_slots, merges,
                byte_pairs, byte_ids, byte_fallback_ids, affix, params,
                w, sym_id, sym_st, sym_en, rank_buf, new_buf, heap, nxt, prv, kbuf):
    """Tokens of one word into sym_id / sym_st / sym_en (spans in model-space word bytes); returns count."""
    if kind >= 0:
        sym_id[0] = kind
        sym_st[0] = 0
        sym_en[0] = e - s
        return 1
    n = e - s + virt
    if virt:
        w[0] = 32
    for i in range(s, e):
        w[i - s + virt] = data[i]
    if params[5] == WORDPIECE:
        return wordpiece.tokenize(w, n, merges, params, sym_id, sym_st, sym_en)
    if params[5] == WORDLEVEL:
        return wordlevel.tokenize(w, n, tok_data, tok_offsets, vocab_slots, params, sym_id, sym_st, sym_en)
    if (params[3] & 4) != 0:  # ignore_merges: a word that is itself a token is taken whole
        from_vocab = _whole(w, n, tok_data, tok_offsets, vocab_slots)
        if from_vocab >= 0:
            sym_id[0] = from_vocab
            sym_st[0] = 0
            sym_en[0] = n
            return 1
    m = init_symbols(w, n, tok_data, tok_offsets, vocab_slots, byte_ids, byte_fallback_ids, affix, params,
                     sym_id, sym_st, sym_en, kbuf)
    if m <= SMALL:
        return merge_linear(sym_id, sym_st, sym_en, m, merges, params[0], rank_buf, new_buf,
                            (params[3] & 16) != 0, w, byte_pairs)
    return merge_heap(sym_id, sym_st, sym_en, m, merges, params[0], heap, nxt, prv, (params[3] & 16) != 0, w,
                      byte_pairs)


@jitable
def _whole(w, n, tok_data, tok_offsets, vocab_slots):
    return bytes_lookup(vocab_slots, tok_data, tok_offsets, w, 0, n)


@jitable
def token_span(data, s, e, virt, kind, st, en, row_end):
    """Byte span in the batch of a token covering model bytes [st, en) of word (s, e, virt), widened to
    whole characters as the reference's alignments do (a byte-level token inside a character gets the
    whole character)."""
    if kind >= 0:
        return s, e
    a = s + st - virt
    if a < s:
        a = s
    z = s + en - virt
    if virt and en == 1:
        z = s + seq_len(data[s]) if s < row_end else s
    while a > 0 and (data[a] & 0xC0) == 0x80:
        a -= 1
    while z < row_end and (data[z] & 0xC0) == 0x80:
        z += 1
    return a, z


@jitable
def space_counts(data, a, z, classes):
    """Leading and trailing White_Space characters of data[a:z] (offset trimming of added tokens)."""
    _, lead = skip_forward(data, a, z, classes, SPACE)
    _, trail = skip_backward(data, z, a, classes, SPACE)
    return lead, trail


@jitable
def store_tokens(base, k, sym_id, sym_st, sym_en, cap_ids, cap_st, cap_en):
    """Copies a word's k tokens from scratch to its capacity region."""
    for j in range(k):
        cap_ids[base + j] = sym_id[j]
        cap_st[base + j] = sym_st[j]
        cap_en[base + j] = sym_en[j]


@jitable
def compact_word(i, data, ws, we, wv, wk, word_row, offsets, cap_off, cap_ids, cap_st, cap_en, tok_off, want_spans,
                 classes, lead_tab, trail_tab, ids, t_st, t_en, t_lead, t_trail, t_added):
    """Moves word i's tokens to their final place; with want_spans also their byte spans and the
    leading/trailing space counts the ByteLevel offset trimming needs."""
    base = cap_off[i]
    out = tok_off[i]
    k = tok_off[i + 1] - out
    row_end = offsets[word_row[i] + 1]
    for j in range(k):
        tid = cap_ids[base + j]
        ids[out + j] = tid
        if want_spans:
            a, z = token_span(data, ws[i], we[i], wv[i], wk[i], cap_st[base + j], cap_en[base + j], row_end)
            t_st[out + j] = a
            t_en[out + j] = z
            if wk[i] >= 0:
                le, tr = space_counts(data, a, z, classes)
                t_lead[out + j] = le
                t_trail[out + j] = tr
                t_added[out + j] = 1
            else:
                t_lead[out + j] = lead_tab[tid]
                t_trail[out + j] = trail_tab[tid]
                t_added[out + j] = 0
