"""WordLevel: a word is its vocabulary id, or the unk token."""
from .._numba import jitable
from ..kernels.hashing import bytes_lookup

NAME = "WordLevel"


@jitable
def tokenize(w, n, tok_data, tok_offsets, vocab_slots, params, sym_id, sym_st, sym_en):
    tid = bytes_lookup(vocab_slots, tok_data, tok_offsets, w, 0, n)
    sym_id[0] = tid if tid >= 0 else params[4]
    sym_st[0] = 0
    sym_en[0] = n
    return 1
