"""NFD, NFKD, NFC, NFKC of one piece into an item buffer, exactly as the reference's
unicode-normalization-alignments iterators produce them.

An item is (code point, change): change 0 means "takes the place of the next original character",
1 "inserted after it", -n "takes the place of the next character and n more are removed" (the
reference's `transform` protocol, which `passes` replays to compute alignments). Decomposition gives
the first character of each expansion change 0 and the rest 1; canonical reordering then moves items
with their changes (a stable sort of every run of non-starters by combining class), and composition
merges a pair into one item of change c1 + c2 - 1. Reordered marks therefore take the alignments of
the original characters in their new order, as in the reference.

The buffer is the caller's (global scratch of twice `capacity`: the items, then room for merge-sorting
a long run of marks); composition works in place, so a piece of any length needs no per-thread memory.
"""
from .._numba import jitable
from ..kernels.utf8 import decode
from .unicode_data import CANON, CCC, COMPAT, F_SECOND

S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT


@jitable
def capacity(compat, data, a, b, maps, map_off):
    """Number of items the decomposition of data[a:b] yields (the caller reserves twice that)."""
    k = COMPAT if compat else CANON
    n = 0
    p = a
    while p < b:
        c, L = decode(data, p)
        p += L
        j = maps[k, c]
        n += 1 if j == 0 else map_off[j + 1] - map_off[j]
    return n


@jitable
def compose_pair(x, y, comp):
    """The primary composite of x + y, or -1 (Hangul by arithmetic, the rest from the pair table)."""
    if L_BASE <= x < L_BASE + L_COUNT and V_BASE <= y < V_BASE + V_COUNT:
        return S_BASE + ((x - L_BASE) * V_COUNT + (y - V_BASE)) * T_COUNT
    if S_BASE <= x < S_BASE + S_COUNT and (x - S_BASE) % T_COUNT == 0 and T_BASE < y < T_BASE + T_COUNT:
        return x + (y - T_BASE)
    key = (x << 21) | y
    lo = 0
    hi = comp.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        k = comp[mid] >> 21
        if k < key:
            lo = mid + 1
        elif k > key:
            hi = mid
        else:
            return comp[mid] & 0x1FFFFF
    return -1


@jitable
def _insertion_sort(props, icp, ich, j, k):
    for q in range(j + 1, k):
        c = icp[q]
        ch = ich[q]
        cc = props[c] & CCC
        r = q
        while r > j and (props[icp[r - 1]] & CCC) > cc:
            icp[r] = icp[r - 1]
            ich[r] = ich[r - 1]
            r -= 1
        icp[r] = c
        ich[r] = ch


@jitable
def _merge_sort(props, icp, ich, j, k, t):
    # Stable bottom-up merge sort of items [j, k) by class, through the scratch at [t, t + k - j):
    # a long run of marks costs n log n, not n^2.
    n = k - j
    src = j
    dst = t
    width = 1
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a = lo
            b = mid
            for o in range(lo, hi):
                if b >= hi or (a < mid and (props[icp[src + a]] & CCC) <= (props[icp[src + b]] & CCC)):
                    icp[dst + o] = icp[src + a]
                    ich[dst + o] = ich[src + a]
                    a += 1
                else:
                    icp[dst + o] = icp[src + b]
                    ich[dst + o] = ich[src + b]
                    b += 1
            lo = hi
        src, dst = dst, src
        width *= 2
    if src != j:
        for o in range(n):
            icp[j + o] = icp[src + o]
            ich[j + o] = ich[src + o]


@jitable
def _reorder(props, icp, ich, i0, n):
    # Canonical ordering: a stable sort of each run of non-starters by combining class (scratch at n).
    j = i0
    while j < n:
        if (props[icp[j]] & CCC) == 0:
            j += 1
            continue
        k = j
        while k < n and (props[icp[k]] & CCC) != 0:
            k += 1
        if k - j <= 32:
            _insertion_sort(props, icp, ich, j, k)
        else:
            _merge_sort(props, icp, ich, j, k, n)
        j = k


@jitable
def _compose(props, comp, icp, ich, i0, n):
    # The reference's recomposition state machine, in place: the composee lives in registers, the
    # marks blocked from it sit right after the write position (never past the read position) and
    # are emitted after it, as the reference emits its buffer. Returns the new end.
    w = i0
    have = False
    kc = 0
    kch = 0
    last = -1   # class of the last blocked mark, -1 when none
    nb = 0      # blocked marks, at icp[w + 1 : w + 1 + nb]
    for r in range(i0, n):
        c = icp[r]
        ch = ich[r]
        cc = props[c] & CCC
        if not have:
            if cc != 0:
                icp[w] = c
                ich[w] = ch
                w += 1
            else:
                kc = c
                kch = ch
                have = True
            continue
        if (last < 0 or last < cc) and (props[c] & F_SECOND) != 0:
            x = compose_pair(kc, c, comp)
            if x >= 0:
                kc = x
                kch = kch + ch - 1
                continue
        if cc == 0:  # a starter: emit the composee and its blocked marks, start over from c
            icp[w] = kc
            ich[w] = kch
            w += 1 + nb
            nb = 0
            last = -1
            kc = c
            kch = ch
            continue
        icp[w + 1 + nb] = c
        ich[w + 1 + nb] = ch
        nb += 1
        last = cc
    if have:
        icp[w] = kc
        ich[w] = kch
        w += 1 + nb
    return w


@jitable
def decompose(compat, compose, data, a, b, props, maps, map_off, map_data, comp, icp, ich, i0):
    """Items of NF(K)D (or NF(K)C when `compose`) of data[a:b] written from icp/ich[i0]; returns the count."""
    k = COMPAT if compat else CANON
    n = i0
    p = a
    while p < b:
        c, L = decode(data, p)
        p += L
        j = maps[k, c]
        if j == 0:
            icp[n] = c
            ich[n] = 0
            n += 1
        else:
            for q in range(map_off[j], map_off[j + 1]):
                icp[n] = map_data[q]
                ich[n] = 0 if q == map_off[j] else 1
                n += 1
    _reorder(props, icp, ich, i0, n)
    if compose:
        n = _compose(props, comp, icp, ich, i0, n)
    return n - i0
