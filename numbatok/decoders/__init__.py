"""Decoders, as a per-id byte table: decoding is then one gather and one UTF-8 decode.

ByteLevel maps each token's characters back to bytes (a token with any character outside the map
keeps its own UTF-8 bytes, as the reference does); no decoder joins tokens with spaces.
"""
from ..errors import UnsupportedComponentError
from ..pre_tokenizers.byte_level import token_to_bytes

BYTE_LEVEL = "ByteLevel"


def parse(d, path="decoder"):
    if d is None:
        return None
    t = d.get("type")
    if t == "ByteLevel":
        return BYTE_LEVEL
    raise UnsupportedComponentError(
        f"{path}: type {t!r} is not supported yet (supported decoder types: ByteLevel, or none)")


def token_bytes(kind, token):
    """Bytes that `token` contributes to decoded text under decoder `kind`."""
    if kind == BYTE_LEVEL:
        b = token_to_bytes(token)
        return b if b is not None else token.encode("utf-8")
    return token.encode("utf-8")
