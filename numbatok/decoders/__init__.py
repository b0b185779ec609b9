"""Decoders, as two per-id byte tables: what a token contributes as the first token of the text and
what it contributes after another one. Every supported decoder is that simple, so decoding a whole
batch is one gather and one UTF-8 decode per row.

  none        tokens joined with spaces
  ByteLevel   each token's characters mapped back to bytes (a token with a character outside the map
              keeps its own UTF-8 bytes, as the reference does); lossy UTF-8 decode at the end
  WordPiece   later tokens lose the continuing prefix, or get a leading space; cleanup (per token,
              as the reference applies it) undoes tokenization spaces before punctuation
"""
from dataclasses import dataclass

from ..errors import UnsupportedComponentError
from ..pre_tokenizers.byte_level import token_to_bytes


@dataclass(frozen=True)
class DecoderSpec:
    kind: str = "none"
    prefix: str = "##"
    cleanup: bool = True


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
        if len(subs) == 1:
            return parse(subs[0], f"{path}.decoders[0]")
        raise UnsupportedComponentError(f"{path}: a Sequence of {len(subs)} decoders is not supported yet "
                                        "(a Sequence holding one supported decoder is)")
    if t == "ByteLevel":
        return DecoderSpec("ByteLevel")
    if t == "WordPiece":
        return DecoderSpec("WordPiece", prefix=d.get("prefix", "##"), cleanup=bool(d.get("cleanup", True)))
    raise UnsupportedComponentError(
        f"{path}: type {t!r} is not supported yet (supported decoder types: ByteLevel, WordPiece, "
        "Sequence of one, or none)")


def token_bytes(dec, token, first):
    """Bytes that `token` contributes to decoded text under decoder `dec`."""
    if dec.kind == "ByteLevel":
        b = token_to_bytes(token)
        return b if b is not None else token.encode("utf-8")
    if dec.kind == "WordPiece":
        if not first:
            token = token[len(dec.prefix):] if token.startswith(dec.prefix) else " " + token
        return (_cleanup(token) if dec.cleanup else token).encode("utf-8")
    return token.encode("utf-8") if first else b" " + token.encode("utf-8")
