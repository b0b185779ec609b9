"""WordPiece: greedy longest match first, with the continuing-subword prefix on non-initial pieces;
a word with any unmatched remainder, or longer than max_input_chars_per_word characters, is one
unk token spanning the whole word (exactly the reference's rule).

A piece's longest match is one walk down a trie of the vocabulary's bytes (a double array: a byte
step reads one 8-byte slot), not a hash probe per candidate length: the vocabulary's candidates were
~11 probes a word over the UDHR, ~0.3 us a new word against ~0.09 for the walk."""
import numpy as np

from .._numba import cpu_kernel, jitable
from ..kernels.utf8 import seq_len

# The trie's S slots: trie[s, 0] = (parent's slot + 1) << 32 | base << 1 | (1 if a token ends at s),
# that token's id at trie[S + s, 0]. Slot 0 is the root (parent mark -1); a node's child for byte b
# is slot base + b, when that slot's parent is the node.
CONT_ROOT = 7  # where params keep the continuation root
LOW = 0xFFFFFFFF


def build_trie(id_bytes, prefix):
    """(trie, continuation root) for the ids' bytes (None: no token): trie as a (2 x slots, 1) int64
    array (the tables' `merges` slot, unused by WordPiece), the continuation root the node of
    `prefix` (-1 when no token starts with it: a word's later pieces all miss)."""
    ids = [i for i, b in enumerate(id_bytes) if b]
    order = np.array(sorted(ids, key=id_bytes.__getitem__), np.int64)  # (equal bytes: the lower id first)
    lens = np.array([len(id_bytes[i]) for i in order.tolist()], np.int64)
    off = np.zeros(order.shape[0] + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    data = np.frombuffer(b"".join(id_bytes[i] for i in order.tolist()) + b"\0", np.uint8)
    cap = int(off[-1]) + 1024
    while True:
        slots, tok, used = _fill(data, off, order, cap)
        if used >= 0:
            break
        cap *= 2
    trie = np.concatenate([slots[:used + 257], tok[:used + 257]]).reshape(-1, 1)
    node = 0
    for b in prefix:
        node = _step(trie, node, b)
        if node < 0:
            break
    return trie, node


@cpu_kernel
def _fill(data, off, order, cap):
    """Places the sorted keys' trie in `cap` slots: (slots, token ids, highest slot used), or (_, _, -1)
    when they do not fit. Each node's children take the first base (walked along a list of free
    slots) where all their slots are free."""
    trie = np.zeros(cap, np.int64)  # (0: a free slot)
    tok = np.full(cap, -1, np.int64)
    trie[0] = np.int64(-1) << 32  # (the root: a parent mark no node's child has)
    nextf = np.empty(cap + 1, np.int64)  # free slots, doubly linked; the list's head is nextf[cap]
    prevf = np.empty(cap + 1, np.int64)
    for q in range(cap + 1):
        nextf[q] = q + 1
        prevf[q] = q - 1
    nextf[cap] = 1
    prevf[1] = cap
    nextf[cap - 1] = cap
    n = order.shape[0]
    st_node = np.empty(off[n] + 1, np.int64)  # (a node a key byte at most)
    st_lo = np.empty(off[n] + 1, np.int64)
    st_hi = np.empty(off[n] + 1, np.int64)
    st_d = np.empty(off[n] + 1, np.int64)
    st_node[0], st_lo[0], st_hi[0], st_d[0] = 0, 0, n, 0
    top = 1
    gb = np.empty(256, np.int64)
    glo = np.empty(257, np.int64)
    gtok = np.empty(256, np.int64)
    used = 0
    while top > 0:
        top -= 1
        node, lo, hi, d = st_node[top], st_lo[top], st_hi[top], st_d[top]
        i = lo
        while i < hi and off[i + 1] - off[i] == d:  # (the node's own token: set when it was placed)
            i += 1
        if i == hi:
            continue
        k = 0
        while i < hi:  # its children: the keys grouped by their byte at depth d
            b = data[off[i] + d]
            gb[k], glo[k], gtok[k] = b, i, -1
            while i < hi and data[off[i] + d] == b:
                if off[i + 1] - off[i] == d + 1 and gtok[k] < 0:
                    gtok[k] = order[i]
                i += 1
            k += 1
        glo[k] = hi
        p = nextf[cap]
        while True:
            if p == cap:
                return trie, tok, -1
            base = p - gb[0]
            if base >= 0 and base + 256 <= cap:
                ok = True
                for g in range(1, k):
                    if trie[base + gb[g]] != 0:
                        ok = False
                        break
                if ok:
                    break
            p = nextf[p]
        trie[node] |= base << 1
        for g in range(k):
            c = base + gb[g]
            trie[c] = ((node + 1) << 32) | (1 if gtok[g] >= 0 else 0)
            tok[c] = gtok[g]
            nextf[prevf[c]] = nextf[c]
            prevf[nextf[c]] = prevf[c]
            used = max(used, c)
            st_node[top], st_lo[top], st_hi[top], st_d[top] = c, glo[g], glo[g + 1], d + 1
            top += 1
    return trie, tok, used


@jitable
def _step(trie, node, b):
    c = ((trie[node, 0] & LOW) >> 1) + b
    return c if (trie[c, 0] >> 32) == node + 1 else -1


@jitable
def tokenize(w, n, trie, params, sym_id, sym_st, sym_en):
    """Tokens of word w[0:n] into sym_* (spans in word bytes); returns the count. `trie`: see
    `build_trie`; params[CONT_ROOT] its continuation root. Tokens are whole UTF-8 characters, so a
    piece's longest token ends on a character boundary, as the reference's candidates do."""
    unk_id = params[4]
    max_chars = params[6]
    chars = 0
    i = 0
    while i < n:
        i += seq_len(w[i])
        chars += 1
    k = 0
    start = 0
    while start < n and chars <= max_chars:
        node = params[CONT_ROOT] if start > 0 else 0
        end = -1
        last = -1
        j = start
        while node >= 0 and j < n:
            node = _step(trie, node, w[j])
            j += 1
            if node >= 0 and trie[node, 0] & 1:
                end = j
                last = node
        found = -1 if last < 0 else trie[(trie.shape[0] >> 1) + last, 0]
        if found < 0:
            break
        sym_id[k] = found
        sym_st[k] = start
        sym_en[k] = end
        k += 1
        start = end
    if start < n or chars > max_chars:
        sym_id[0] = unk_id
        sym_st[0] = 0
        sym_en[0] = n
        return 1
    return k
