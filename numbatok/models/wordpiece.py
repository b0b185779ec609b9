"""WordPiece: greedy longest match first, with the continuing-subword prefix on non-initial pieces;
a word with any unmatched remainder, or longer than max_input_chars_per_word characters, is one
unk token spanning the whole word (exactly the reference's rule)."""
import numpy as np

from .._numba import jitable
from ..kernels.hashing import bytes_lookup_hashed, fnv1a
from ..kernels.utf8 import char_start_before, seq_len
from .tables import PIECE_BOUNDS

NAME = "WordPiece"


@jitable
def tokenize(w, n, tok_data, tok_offsets, vocab_slots, affix, params, sym_id, sym_st, sym_en, hbuf):
    """Tokens of word w[0:n] into sym_* (spans in word bytes); returns the count. hbuf (int64, n
    entries): scratch for the candidates' hashes.

    A piece's candidates run from the longest a token starting with its first byte can match
    (params' piece bounds) down a character at a time, and their hashes (FNV-1a, as the vocabulary
    table's) come from one forward pass over the piece: each candidate costs a probe, not a hash of its
    bytes (a long word that matches nothing, a script the vocabulary lacks, was quadratic)."""
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
        npre = n_prefix if start > 0 else 0
        end = start + params[PIECE_BOUNDS + (256 if start > 0 else 0) + np.int64(w[start])]
        if end >= n:
            end = n
        else:
            while end > start and (int(w[end]) & 0xC0) == 0x80:
                end -= 1
        h = fnv1a(affix, 0, npre)
        for j in range(start, end):
            h = (h ^ np.uint64(w[j])) * np.uint64(0x100000001B3)
            hbuf[j] = np.int64(h)  # the hash of candidate w[start:j + 1]
        found = -1
        while start < end:
            found = bytes_lookup_hashed(vocab_slots, tok_data, tok_offsets, np.uint64(hbuf[end - 1]), affix, npre,
                                        w, start, end)
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

