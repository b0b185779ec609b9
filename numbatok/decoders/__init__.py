"""Decoders, as two per-id byte tables: what a token contributes as the first token of the text and
what it contributes after another one. Every supported decoder is that simple, so decoding a whole
batch is one gather and one UTF-8 decode per row (a Sequence adds a pass and a step, below).

  none        tokens joined with spaces
  ByteLevel   each token's characters mapped back to bytes (a token with a character outside the map
              keeps its own UTF-8 bytes, as the reference does); lossy UTF-8 decode at the end
  WordPiece   later tokens lose the continuing prefix, or get a leading space; cleanup (per token,
              as the reference applies it) undoes tokenization spaces before punctuation
  Sequence    Replace, ByteFallback, Fuse and Strip (Llama-2, Mistral, Phi-3): tokens joined with
              nothing. The steps before ByteFallback and Fuse act on each token alone, so they are
              folded into the table; a ByteFallback token is its byte, and a run of them that is not
              UTF-8 reads one U+FFFD per byte instead (`invalid_byte_runs`); the steps after Fuse act
              on each row's text (`finish`).
"""
import re
from dataclasses import dataclass

import numpy as np

from .._numba import cpu_kernel
from ..errors import UnsupportedComponentError
from ..pre_tokenizers.byte_level import token_to_bytes


@dataclass(frozen=True)
class DecoderSpec:
    kind: str = "none"
    prefix: str = "##"
    cleanup: bool = True
    # Sequence: ("Replace", pattern, content) and ("Strip", char, start, stop) steps on each token
    # (before ByteFallback and Fuse) and on each row's text (after Fuse)
    token_steps: tuple = ()
    byte_fallback: bool = False
    row_steps: tuple = ()


FFFD = "\ufffd".encode()
_SEQUENCE = "Replace, ByteFallback, Fuse, Strip"
# Rust's u8::from_str_radix(s, 16) on the two characters of "<0x..>": hex digits, or "+" and one digit
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2}|\+[0-9A-Fa-f])>")


def _cleanup(s):
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
                 (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


def parse(d, path="decoder"):
    if d is None:
        return DecoderSpec()
    t = d.get("type")
    if t == "Sequence":
        subs = d.get("decoders", [])
        if len(subs) == 1 and subs[0].get("type") in ("ByteLevel", "WordPiece"):
            return parse(subs[0], f"{path}.decoders[0]")
        return _sequence(_flatten(d, path))
    if t in ("Replace", "ByteFallback", "Fuse", "Strip"):
        return _sequence([(d, path)])
    if t == "ByteLevel":
        return DecoderSpec("ByteLevel")
    if t == "WordPiece":
        return DecoderSpec("WordPiece", prefix=d.get("prefix", "##"), cleanup=bool(d.get("cleanup", True)))
    raise UnsupportedComponentError(
        f"{path}: type {t!r} is not supported yet (supported decoder types: ByteLevel, WordPiece, "
        f"{_SEQUENCE}, a Sequence of the last four or of one ByteLevel or WordPiece, or none)")


def _flatten(d, path):
    """[(decoder, path)] of a Sequence, nested Sequences opened (the reference chains them the same)."""
    out = []
    for i, sub in enumerate(d.get("decoders", [])):
        p = f"{path}.decoders[{i}]"
        out += _flatten(sub, p) if sub.get("type") == "Sequence" else [(sub, p)]
    return out


def _sequence(items):
    token_steps, row_steps = [], []
    fallback = fused = False
    for d, path in items:
        t = d.get("type")
        if t == "Fuse":
            fused = True
            continue
        if t == "ByteFallback":
            if fallback or fused:
                raise UnsupportedComponentError(
                    f"{path}: ByteFallback after Fuse or after another ByteFallback is not supported yet")
            fallback = True
            continue
        if t == "Replace":
            step = ("Replace", *_replace(d, path))
        elif t == "Strip":
            step = ("Strip", *_strip_options(d, path))
        else:
            alone = " (it is supported alone)" if t in ("ByteLevel", "WordPiece") else ""
            raise UnsupportedComponentError(
                f"{path}: type {t!r} in a decoder Sequence is not supported yet{alone} (supported in a "
                f"Sequence: {_SEQUENCE})")
        if fallback and not fused:
            # (it would act on each byte run's text, which the per-id tables do not hold)
            raise UnsupportedComponentError(
                f"{path}: {t} between ByteFallback and Fuse is not supported yet (before ByteFallback or "
                "after Fuse it is)")
        (row_steps if fused else token_steps).append(step)
    return DecoderSpec("Sequence", token_steps=tuple(token_steps), byte_fallback=fallback,
                       row_steps=tuple(row_steps))


def _replace(d, path):
    pattern = d.get("pattern")
    if not (isinstance(pattern, dict) and "String" in pattern):
        raise UnsupportedComponentError(
            f"{path}.pattern: a Replace decoder with pattern {pattern!r} is not supported yet (String patterns are)")
    if not pattern["String"]:
        raise UnsupportedComponentError(f"{path}.pattern: a Replace decoder with an empty pattern is not supported")
    return pattern["String"], d.get("content", "")


def _strip_options(d, path):
    content, start, stop = d.get("content"), d.get("start", 0), d.get("stop", 0)
    if not (isinstance(content, str) and len(content) == 1):
        raise UnsupportedComponentError(f"{path}.content: a Strip decoder strips one character, not {content!r}")
    return content, int(start), int(stop)


def _apply(steps, s):
    for step in steps:
        if step[0] == "Replace":
            s = s.replace(step[1], step[2])
        else:
            s = _strip(s, *step[1:])
    return s


def _strip(s, c, start, stop):
    """Up to `start` leading and `stop` trailing `c` off `s`. (Where the reference panics, on some texts of
    nothing but `c` when stop > 0, this gives "".)"""
    a = min(start, len(s) - len(s.lstrip(c)))
    b = len(s) - min(stop, len(s) - len(s.rstrip(c)))
    return s[a:max(a, b)]


def byte_value(dec, token):
    """The byte a token stands for under ByteFallback, else -1."""
    if not dec.byte_fallback:
        return -1
    token = _apply(dec.token_steps, token)
    m = _BYTE_TOKEN.fullmatch(token)
    return int(m.group(1), 16) if m else -1


def token_bytes(dec, token, first):
    """Bytes that `token` contributes to decoded text under decoder `dec`."""
    if dec.kind == "ByteLevel":
        b = token_to_bytes(token)
        return b if b is not None else token.encode("utf-8")
    if dec.kind == "WordPiece":
        if not first:
            token = token[len(dec.prefix):] if token.startswith(dec.prefix) else " " + token
        return (_cleanup(token) if dec.cleanup else token).encode("utf-8")
    if dec.kind == "Sequence":
        b = byte_value(dec, token)
        return bytes([b]) if b >= 0 else _apply(dec.token_steps, token).encode("utf-8")
    return token.encode("utf-8") if first else b" " + token.encode("utf-8")


def byte_run(run):
    """The text of a run of ByteFallback bytes: itself if UTF-8, else one U+FFFD per byte."""
    b = bytes(run)
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return FFFD * len(b)
    return b


def finish(dec, text):
    """A row's text after the steps that follow Fuse."""
    return _apply(dec.row_steps, text)


@cpu_kernel
def invalid_byte_runs(byte_of, ids, keep, row_offsets):
    """True at the kept byte tokens (byte_of[id] >= 0) of each run, kept byte tokens one after another
    within a row, whose bytes are not UTF-8 (Rust's String::from_utf8: no overlong forms, surrogates,
    or code points past U+10FFFF)."""
    bad = np.zeros(ids.shape[0], np.bool_)
    for r in range(row_offsets.shape[0] - 1):
        start = -1  # the run's first position
        need = 0  # continuation bytes still to come
        lo, hi = 0x80, 0xBF  # the next one's range
        ok = True
        end = row_offsets[r + 1]
        for i in range(row_offsets[r], end + 1):
            b = -1
            if i < end:
                if not keep[i]:
                    continue
                b = byte_of[ids[i]]
            if b >= 0:
                if start < 0:
                    start, need, ok = i, 0, True
                if not ok:
                    continue
                if need > 0:
                    ok = lo <= b <= hi
                    need -= 1
                    lo, hi = 0x80, 0xBF
                elif b >= 0x80:
                    ok = 0xC2 <= b <= 0xF4
                    need = 1 if b < 0xE0 else 2 if b < 0xF0 else 3
                    lo = 0xA0 if b == 0xE0 else 0x90 if b == 0xF0 else 0x80
                    hi = 0x9F if b == 0xED else 0x8F if b == 0xF4 else 0xBF
                continue
            if start >= 0:
                if not ok or need > 0:
                    for j in range(start, i):
                        bad[j] = keep[j]
                start = -1
    return bad
