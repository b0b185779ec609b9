"""WordPiece: greedy longest match first, with the continuing-subword prefix on non-initial pieces;
a word with any unmatched remainder, or longer than max_input_chars_per_word characters, is one
unk token spanning the whole word (exactly the reference's rule)."""
from .._numba import jitable
from ..kernels.hashing import bytes_lookup
from ..kernels.utf8 import char_start_before, seq_len

NAME = "WordPiece"


@jitable
def tokenize(w, n, tok_data, tok_offsets, vocab_slots, affix, params, sym_id, sym_st, sym_en, kbuf):
    """Tokens of word w[0:n] into sym_* (spans in word bytes); returns the count."""
    n_prefix = params[1]
    unk_id = params[4]
    max_chars = params[6]
    chars = 0
    i = 0
    while i < n:
        i += seq_len(w[i])
        chars += 1
    if chars > max_chars:
        sym_id[0] = unk_id
        sym_st[0] = 0
        sym_en[0] = n
        return 1
    k = 0
    start = 0
    while start < n:
        end = n
        found = -1
        while start < end:
            if start > 0:
                q = 0
                for j in range(n_prefix):
                    kbuf[q] = affix[j]
                    q += 1
                for j in range(start, end):
                    kbuf[q] = w[j]
                    q += 1
                found = bytes_lookup(vocab_slots, tok_data, tok_offsets, kbuf, 0, q)
            else:
                found = bytes_lookup(vocab_slots, tok_data, tok_offsets, w, start, end)
            if found >= 0:
                break
            end = char_start_before(w, end, start)
        if found < 0:
            sym_id[0] = unk_id
            sym_st[0] = 0
            sym_en[0] = n
            return 1
        sym_id[k] = found
        sym_st[k] = start
        sym_en[k] = end
        k += 1
        start = end
    return k
