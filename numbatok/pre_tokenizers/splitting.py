"""Character-class splitting, the building block of WhitespaceSplit, BertPreTokenizer, Punctuation
and Whitespace: the reference's NormalizedString::split with a char predicate and one of its five
delimiter behaviours, as a streaming "next piece" function (no intermediate list of matches).

In the reference each matching character is its own match; behaviours then keep, drop or glue them:
  removed        "a, b" -> "a", "b"            (matches dropped)
  isolated       "a,,b" -> "a", ",", ",", "b"
  contiguous     "a,,b" -> "a", ",,", "b"      (runs of matches glued)
  merged_with_previous  "a,,b" -> "a,", ",", "b"
  merged_with_next      "a,,b" -> "a", ",", ",b"
"""
from .._numba import jitable
from ..kernels.utf8 import decode

REMOVED = 0
ISOLATED = 1
CONTIGUOUS = 2
MERGED_WITH_PREVIOUS = 3
MERGED_WITH_NEXT = 4
BEHAVIORS = {"Removed": REMOVED, "Isolated": ISOLATED, "Contiguous": CONTIGUOUS,
             "MergedWithPrevious": MERGED_WITH_PREVIOUS, "MergedWithNext": MERGED_WITH_NEXT}


@jitable
def _is(data, p, mask, classes):
    c, n = decode(data, p)
    return (classes[c] & mask) != 0, n


@jitable
def _run(data, p, b, mask, classes, want):
    # End of the run of characters whose match status is `want`.
    while p < b:
        m, n = _is(data, p, mask, classes)
        if m != want:
            break
        p += n
    return p


@jitable
def next_split(data, p, b, mask, behavior, classes):
    """(start, end) of the next piece at or after p inside [.., b); (b, b) when there is none."""
    if behavior == REMOVED:
        p = _run(data, p, b, mask, classes, True)
        if p >= b:
            return b, b
        return p, _run(data, p, b, mask, classes, False)
    if p >= b:
        return b, b
    m, n = _is(data, p, mask, classes)
    if behavior == CONTIGUOUS:
        return p, _run(data, p, b, mask, classes, m)
    if m:
        if behavior == MERGED_WITH_NEXT and p + n < b:
            m2, _ = _is(data, p + n, mask, classes)
            if not m2:
                return p, _run(data, p + n, b, mask, classes, False)
        return p, p + n
    q = _run(data, p, b, mask, classes, False)
    if behavior == MERGED_WITH_PREVIOUS and q < b:
        _, n2 = _is(data, q, mask, classes)
        q += n2
    return p, q
