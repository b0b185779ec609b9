"""Bridges to other tokenizer libraries (used by the tests and benchmarks, and handy for users)."""
from .errors import UnsupportedComponentError
from .pre_tokenizers import CL100K, GPT2, O200K
from .pre_tokenizers.byte_level import token_to_bytes
from .pre_tokenizers.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, QWEN2_PATTERN


def to_tiktoken(tok, name="numbatok"):
    """A `tiktoken.Encoding` for a byte-level BPE tokenizer with the GPT-2, cl100k or o200k pattern,
    built offline (tiktoken.get_encoding would download its files). Special tokens are the added
    special tokens."""
    import tiktoken

    pt = tok.spec.pre_tokenizer
    stage = pt.stages[0] if len(pt.stages) == 1 else None
    patterns = {(GPT2, 0): GPT2_PATTERN, (CL100K, 3): CL100K_PATTERN, (CL100K, 1): QWEN2_PATTERN,
                (O200K, 0): O200K_PATTERN}
    if stage not in patterns or pt.add_prefix_space or not pt.byte_level:
        raise UnsupportedComponentError("to_tiktoken needs a byte-level pre-tokenizer with the GPT-2, cl100k or "
                                        "o200k pattern and add_prefix_space=false")
    special = {a.content: a.id for a in tok.spec.added_tokens if a.special}
    ranks = {}
    for t, i in tok.spec.model.vocab.items():
        b = token_to_bytes(t)
        if b is not None and i not in special.values():
            ranks[b] = i
    return tiktoken.Encoding(name, pat_str=patterns[stage], mergeable_ranks=ranks, special_tokens=special)
