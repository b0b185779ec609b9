"""One normalizer pass over one piece, with alignments: the kernels' body (both backends).

A pass reads a piece of the input buffer (bytes plus, per byte, the original byte range
[ias, iae) it came from) and writes its normalized bytes with their own ranges. Its head decides
which characters come out and which input characters they align to; the pass's chain of
per-character ops (tabulated by `chars.chain_map`) then rewrites each of them, keeping that alignment.

Heads, and the alignment each gives (the reference's NormalizedString rules):
  IDENT          every character keeps its own
  NFD ... NFKC   replays the (code point, change) items of `unicode_nf` as `transform` does: a
                 change <= 0 item takes the next input character's range (and skips -change more),
                 an inserted one (change 1) the range of the input character before it, or the empty
                 range at the piece's original start when there is none
  STRIP          the kept characters keep theirs
  REPLACE        the replacement takes the range of the last character of the match
  PREPEND        the prepended text and the first character take the first character's range

Count and fill run the same function (write=False only counts bytes), one thread per piece.
"""
from .._numba import jitable
from ..kernels.hashing import same_bytes
from ..kernels.utf8 import decode, encode, encoded_len, seq_len, skip_backward, skip_forward
from . import unicode_nf
from .unicode_data import F_WS

IDENT, NFD, NFKD, NFC, NFKC, STRIP, REPLACE, PREPEND = range(8)
NAMES = {IDENT: "identity", NFD: "NFD", NFKD: "NFKD", NFC: "NFC", NFKC: "NFKC", STRIP: "Strip", REPLACE: "Replace",
         PREPEND: "Prepend"}


def is_nf(head):
    return NFD <= head <= NFKC


@jitable
def _put(c, s, e, write, out, oas, oae, o):
    if write:
        L = encode(out, o, c)
        for q in range(o, o + L):
            oas[q] = s
            oae[q] = e
        return o + L
    return o + encoded_len(c)


OWN, FIXED, ITEMS = 0, 1, 2  # where _emit's characters and their ranges come from


@jitable
def _emit(mode, src, p, q, fs, fe, ias, iae, icp, ich, data, a, porig, cmap, coff, cdata, write, out, oas, oae, o):
    """Writes a run of characters, each mapped by the pass's chain (`chars.chain_map`; a 1-entry cmap
    when there is none), with its original range; returns the new o. The run is
      OWN:   the characters of src[p:q] (the piece's own bytes), each with its own range
      FIXED: the characters of src[p:q] (a string of the normalizer), all with range (fs, fe)
      ITEMS: the items icp/ich[p:q] of an NF pass over piece data[a:...], replayed as the reference's
             transform (see the module docstring)
    One loop per run, not a call per character: a call passing this many arrays costs more than
    the work it does."""
    nxt = a  # ITEMS: the next input character to consume
    while p < q:
        if mode == ITEMS:
            c = icp[p]
            change = ich[p]
            p += 1
            if change > 0:
                s = ias[nxt - 1] if nxt > a else porig
                e = iae[nxt - 1] if nxt > a else porig
            else:
                s = ias[nxt]
                e = iae[nxt]
                nxt += seq_len(data[nxt])
                for _ in range(-change):
                    nxt += seq_len(data[nxt])
        else:
            c, L = decode(src, p)
            s = ias[p] if mode == OWN else fs
            e = iae[p] if mode == OWN else fe
            p += L
        j = cmap[c] if cmap.shape[0] > 1 else 0
        if j == 0:
            o = _put(c, s, e, write, out, oas, oae, o)
        else:
            for r in range(coff[j], coff[j + 1]):
                o = _put(cdata[r], s, e, write, out, oas, oae, o)
    return o


@jitable
def _find(data, p, b, sdata, q, n):
    """First position >= p where sdata[q:q + n] occurs in data[..b], or b."""
    while p + n <= b:
        if same_bytes(data, p, sdata, q, n):
            return p
        p += 1
    return b


@jitable
def run_piece(head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, a, b, porig, icp, ich, i0, i1,
              write, out, oas, oae, o):
    """Normalizes text piece data[a:b] (original start porig) into out[o:]; returns the new end.
    NF heads read their items icp/ich[i0:i1] (from `unicode_nf.decompose`)."""
    if head == STRIP:  # arg0: left, arg1: right
        lo = a
        hi = b
        if arg0:
            lo, _ = skip_forward(data, lo, hi, props, F_WS)
        if arg1:
            hi, _ = skip_backward(data, hi, lo, props, F_WS)
        a, b = lo, hi
    elif head == REPLACE:  # arg0: pattern, arg1: content (string indices); leftmost, non-overlapping
        pn = soff[arg0 + 1] - soff[arg0]
        while a < b:
            m = _find(data, a, b, sdata, soff[arg0], pn)
            o = _emit(OWN, data, a, m, 0, 0, ias, iae, icp, ich, data, a, porig, cmap, coff, cdata, write, out, oas,
                      oae, o)
            if m < b:
                o = _emit(FIXED, sdata, soff[arg1], soff[arg1 + 1], ias[m + pn - 1], iae[m + pn - 1], ias, iae, icp,
                          ich, data, a, porig, cmap, coff, cdata, write, out, oas, oae, o)
            a = m + pn if m < b else b
        return o
    elif head == PREPEND:  # arg0: the prepended string; items (p0, 0), (p1, 1), ..., (first char, 1)
        if a < b:
            o = _emit(FIXED, sdata, soff[arg0], soff[arg0 + 1], ias[a], iae[a], ias, iae, icp, ich, data, a, porig,
                      cmap, coff, cdata, write, out, oas, oae, o)
    elif head != IDENT:  # NF heads
        return _emit(ITEMS, data, i0, i1, 0, 0, ias, iae, icp, ich, data, a, porig, cmap, coff, cdata, write, out,
                     oas, oae, o)
    return _emit(OWN, data, a, b, 0, 0, ias, iae, icp, ich, data, a, porig, cmap, coff, cdata, write, out, oas, oae, o)


@jitable
def normalize_piece(i, head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, ps, pe, pk, porig,
                    icp, ich, item_off, n_items, write, out_off, out, oas, oae):
    """Piece i of a pass: an added token's piece is copied as is, a text piece normalized. Returns
    its output length (written at out_off[i] when `write`)."""
    a = ps[i]
    b = pe[i]
    o0 = out_off[i] if write else 0
    if pk[i] >= 0:
        if write:
            for p in range(a, b):
                out[o0 + p - a] = data[p]
                oas[o0 + p - a] = ias[p]
                oae[o0 + p - a] = iae[p]
        return b - a
    i0 = item_off[i]
    o = run_piece(head, arg0, arg1, cmap, coff, cdata, sdata, soff, props, data, ias, iae, a, b, porig[i], icp, ich,
                  i0, i0 + n_items[i], write, out, oas, oae, o0)
    return o - o0


@jitable
def nf_piece(i, head, fill, data, ps, pe, pk, props, maps, map_off, map_data, comp, item_off, icp, ich):
    """For an NF head: the item capacity of piece i (fill=False), or its items, written at
    item_off[i] (fill=True); returns the count. Added tokens' pieces have none."""
    if pk[i] >= 0:
        return 0
    compat = head == NFKD or head == NFKC
    if not fill:
        return unicode_nf.capacity(compat, data, ps[i], pe[i], maps, map_off)
    return unicode_nf.decompose(compat, head == NFC or head == NFKC, data, ps[i], pe[i], props, maps, map_off,
                                map_data, comp, icp, ich, item_off[i])


@jitable
def identity_alignment(data, p, ias, iae):
    """Byte p of an unnormalized buffer comes from its own character."""
    s = p
    while s > 0 and (data[s] & 0xC0) == 0x80:
        s -= 1
    ias[p] = s
    iae[p] = s + seq_len(data[s])
