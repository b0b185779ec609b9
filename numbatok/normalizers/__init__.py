"""Normalizers: the tokenizer.json "normalizer" section, compiled into passes the backends run per piece.

Supported: BertNormalizer, Lowercase, StripAccents, NFD, NFKD, NFC, NFKC, Strip, Replace (String
patterns), Prepend, Nmt, and Sequences of them. Each carries alignments exactly as the reference's
NormalizedString does (see `passes`), so offsets point into the original text.
Left out (UnsupportedComponentError): Replace with a Regex pattern or an empty String, Prepend of an
empty string, Precompiled (SentencePiece's charsmap), ByteLevel.

A normalizer is compiled to a list of passes; a pass is a head (identity, an NF form, Strip,
Replace, Prepend) plus a chain of per-character ops (`chars`) applied to every character the head
emits. Per-character normalizers fuse into the pass before them, so BertNormalizer(lowercase=True)
runs as two passes: [identity; clean_text, CJK] then [NFD; strip accents, lowercase].
"""
import numpy as np

from ..errors import NumbatokError, UnsupportedComponentError
from . import chars, passes, unicode_data
from .passes import NFC, NFD, NFKC, NFKD, PREPEND, REPLACE, STRIP


class Normalizer:
    """A compiled normalizer. `passes` is a list of (head, arg0, arg1, cmap, coff, cdata): the head
    with its arguments (Replace and Prepend refer to their strings by index into sdata/soff) and
    the pass's chain of per-character ops as a code point map (`chars.chain_map`; a 1-entry cmap
    when the pass has none)."""

    NO_CHAIN = (np.zeros(1, np.int32), np.zeros(2, np.int64), np.zeros(1, np.int32))

    def __init__(self, steps):
        self.tables = unicode_data.load()
        strings = []

        def index(text):
            strings.append(text.encode("utf-8"))
            return len(strings) - 1

        plan = []  # [head, arg0, arg1, [ops]]: per-character ops join the pass before them
        for step in steps:
            if step[0] == "op":
                if not plan:
                    plan.append([passes.IDENT, 0, 0, []])
                plan[-1][3].append(step[1])
                continue
            head, a0, a1 = step[1:]
            if head == REPLACE:
                a0, a1 = index(a0), index(a1)
            elif head == PREPEND:
                a0 = index(a0)
            plan.append([head, int(a0), int(a1), []])
        self.plan = plan
        self.passes = [(h, a0, a1, *(chars.chain_map(ops, self.tables) if ops else self.NO_CHAIN))
                       for h, a0, a1, ops in plan]
        self.soff = np.zeros(len(strings) + 1, np.int64)
        np.cumsum([len(s) for s in strings], out=self.soff[1:])
        self.sdata = np.frombuffer(b"".join(strings) + b"\0", np.uint8).copy()

    def normalize_strs(self, texts):
        """The normalized form of each text (each one piece, as the reference normalizes an added
        token's content), on the CPU."""
        from .. import batch as _batch, unicode_tables
        from ..added_tokens import AddedTable
        from ..backends import cpu

        b = _batch.to_batch(list(texts))
        text, pb, _, row_piece, _, _ = cpu.normalize_rows(self, b.data, b.offsets, AddedTable([]).arrays(),
                                                          unicode_tables.load())
        raw = text.tobytes()
        ends = pb[row_piece].tolist()
        return [raw[ends[r]:ends[r + 1]].decode("utf-8") for r in range(len(ends) - 1)]

    def ascii_map(self):
        """(offsets[129], bytes, one): what each ASCII character normalizes to, when every all-ASCII
        text normalizes character by character (heads identity or NF only, which leave ASCII unchanged,
        and every ASCII character normalizes to ASCII); None otherwise. `one`: when every character
        maps to one byte or none (BERT's normalizer), the byte each maps to (read-only), else empty:
        then a byte is one lookup. The ids-only fast path maps all-ASCII rows with it in one pass,
        without the alignments."""
        if not hasattr(self, "_ascii"):
            self._ascii = None
            if all(h in (passes.IDENT, NFD, NFKD, NFC, NFKC) for h, _, _, _ in self.plan):
                outs = [o.encode("utf-8") for o in self.normalize_strs([chr(c) for c in range(128)])]
                if all(o.isascii() for o in outs):
                    off = np.zeros(129, np.int64)
                    np.cumsum([len(o) for o in outs], out=off[1:])
                    data = np.frombuffer(b"".join(outs) + b"\0", np.uint8).copy()
                    lens = np.diff(off)
                    one = np.zeros(128 if lens.max() <= 1 else 0, np.uint8)
                    if one.shape[0]:
                        one[lens == 1] = data[off[:-1][lens == 1]]
                    one.flags.writeable = False  # (the array type every call compiles for)
                    self._ascii = (off, data, one)
        return self._ascii

    def __getstate__(self):
        # The ASCII and character maps are made again when first asked for after unpickling: pickle
        # would hand the ASCII map back writable (a second specialization of the kernels), and the
        # character map, which refers back to this normalizer, would be rebuilt before the
        # normalizer's own state is restored (unpickling failed on its missing tables).
        state = self.__dict__.copy()
        state.pop("_ascii", None)
        state.pop("_chars", None)
        return state

    def char_map(self):
        """The `char_map.CharMap` of this normalizer when every pass maps a text character by
        character but for canonical reordering (heads identity, NFD, NFKD; the per-character ops are
        all such), else None. The ids-only path maps the rows that are not all ASCII with it."""
        if not hasattr(self, "_chars"):
            from .char_map import CharMap
            self._chars = CharMap(self) if all(h in (passes.IDENT, NFD, NFKD) for h, _, _, _ in self.plan) else None
        return self._chars

    def char_map_made(self):
        """`char_map()` if some call has made it, else None (without making it)."""
        return getattr(self, "_chars", None)

    def __repr__(self):
        return "Normalizer(" + ", ".join(
            passes.NAMES[h] + "".join("+" + chars.NAMES[op] for op in ops) for h, _, _, ops in self.plan) + ")"


# ---- tokenizer.json -> steps: ("op", char op) or ("head", head, arg0, arg1) ----

def _bert(d, path, out):
    lowercase = bool(d.get("lowercase", True))
    strip = d.get("strip_accents")
    if d.get("clean_text", True):
        out.append(("op", chars.CLEAN))
    if d.get("handle_chinese_chars", True):
        out.append(("op", chars.CJK))
    if lowercase if strip is None else bool(strip):  # null follows lowercase, as the reference
        out += [("head", NFD, 0, 0), ("op", chars.STRIP_MN)]
    if lowercase:
        out.append(("op", chars.LOWERCASE))


def _op(code):
    return lambda d, path, out: out.append(("op", code))


def _head(code):
    return lambda d, path, out: out.append(("head", code, 0, 0))


def _strip(d, path, out):
    left, right = bool(d.get("strip_left", True)), bool(d.get("strip_right", True))
    if left or right:
        out.append(("head", STRIP, left, right))


def _replace(d, path, out):
    pattern = d.get("pattern")
    content = d.get("content")
    if not isinstance(content, str):
        raise NumbatokError(f"{path}.content: expected a string, got {content!r}")
    if isinstance(pattern, dict) and "Regex" in pattern:
        raise UnsupportedComponentError(
            f"{path}.pattern: Replace with a Regex pattern ({pattern['Regex']!r}) is not supported yet; "
            "supported: a String pattern")
    if not (isinstance(pattern, dict) and isinstance(pattern.get("String"), str)):
        raise NumbatokError(f"{path}.pattern: expected {{\"String\": ...}} or {{\"Regex\": ...}}, got {pattern!r}")
    if pattern["String"] == "":
        raise UnsupportedComponentError(f"{path}.pattern: Replace with an empty String pattern is not supported")
    out.append(("head", REPLACE, pattern["String"], content))


def _prepend(d, path, out):
    prepend = d.get("prepend")
    if not isinstance(prepend, str):
        raise NumbatokError(f"{path}.prepend: expected a string, got {prepend!r}")
    if prepend == "":
        raise UnsupportedComponentError(
            f"{path}.prepend: Prepend of an empty string is not supported (the reference mis-aligns and can "
            "panic on it); remove the normalizer, it is meant to change nothing")
    out.append(("head", PREPEND, prepend, 0))


def _sequence(d, path, out):
    items = d.get("normalizers")
    if not isinstance(items, list):
        raise NumbatokError(f"{path}.normalizers: expected a list, got {items!r}")
    for j, sub in enumerate(items):
        _steps(sub, f"{path}.normalizers[{j}]", out)


NORMALIZERS = {
    "BertNormalizer": _bert, "Lowercase": _op(chars.LOWERCASE), "StripAccents": _op(chars.STRIP_MARK),
    "NFD": _head(NFD), "NFKD": _head(NFKD), "NFC": _head(NFC), "NFKC": _head(NFKC), "Strip": _strip,
    "Replace": _replace, "Prepend": _prepend, "Nmt": _op(chars.NMT), "Sequence": _sequence,
}


def _steps(d, path, out):
    if not isinstance(d, dict):
        raise NumbatokError(f"{path}: expected an object, got {d!r}")
    t = d.get("type")
    fn = NORMALIZERS.get(t)
    if fn is None:
        raise UnsupportedComponentError(
            f"{path}: type {t!r} is not supported yet (supported: {', '.join(NORMALIZERS)}, none)")
    fn(d, path, out)


def parse(d, path="normalizer"):
    """The "normalizer" object of a tokenizer.json -> Normalizer, or None when it changes nothing."""
    if d is None:
        return None
    steps = []
    _steps(d, path, steps)
    return Normalizer(steps) if steps else None
