"""Bridges to other tokenizer libraries (used by the tests and benchmarks, and handy for users)."""
from .errors import UnsupportedComponentError
from .pre_tokenizers import GPT2
from .pre_tokenizers.byte_level import token_to_bytes

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def to_tiktoken(tok, name="numbatok"):
    """A `tiktoken.Encoding` for a byte-level BPE tokenizer with the GPT-2 pattern, built offline
    (tiktoken.get_encoding would download its files). Special tokens are the added special tokens."""
    import tiktoken

    pt = tok.spec.pre_tokenizer
    if pt.kind != GPT2 or pt.add_prefix_space:
        raise UnsupportedComponentError("to_tiktoken needs a ByteLevel pre-tokenizer with the GPT-2 pattern "
                                        "and add_prefix_space=false")
    special = {a.content: a.id for a in tok.spec.added_tokens if a.special}
    ranks = {}
    for t, i in tok.spec.model.vocab.items():
        b = token_to_bytes(t)
        if b is not None and i not in special.values():
            ranks[b] = i
    return tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special)
