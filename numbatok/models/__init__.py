"""Models: BPE, WordPiece and WordLevel, each a per-word kernel over the same flat tables
(`tables.ModelTables`); `build_tables` turns a parsed model section into them."""
from ..errors import NumbatokError
from ..pre_tokenizers.byte_level import token_to_bytes
from .tables import BPE, WORDLEVEL, WORDPIECE, ModelTables


def build_tables(m, byte_level, n_ids):
    """Parsed model spec -> ModelTables. Byte-level vocabularies are keyed by the raw bytes they stand for."""
    conv = token_to_bytes if byte_level else (lambda t: t.encode("utf-8"))
    model_bytes = [None] * n_ids
    for tok, i in m.vocab.items():
        model_bytes[i] = conv(tok)
    unk_id = m.vocab.get(m.unk_token, -1) if m.unk_token is not None else -1
    kind = type(m).__name__
    if kind == "WordPieceSpec":
        return ModelTables(model_bytes, kind=WORDPIECE, unk_id=unk_id, byte_level=False, n_ids=n_ids,
                           continuing_subword_prefix=m.continuing_subword_prefix.encode(),
                           max_input_chars_per_word=m.max_input_chars_per_word)
    if kind == "WordLevelSpec":
        return ModelTables(model_bytes, kind=WORDLEVEL, unk_id=unk_id, byte_level=False, n_ids=n_ids)
    pfx = m.continuing_subword_prefix
    merges = []
    for j, (a, b) in enumerate(m.merges):
        ia, ib = m.vocab.get(a), m.vocab.get(b)
        new = a + b[len(pfx):] if pfx else a + b
        inew = m.vocab.get(new)
        if ia is None or ib is None or inew is None:
            missing = a if ia is None else (b if ib is None else new)
            raise NumbatokError(f"model.merges[{j}]: token {missing!r} of merge {a!r} + {b!r} is not in the vocab")
        merges.append((ia, ib, inew))
    t = ModelTables(model_bytes, merges, kind=BPE, unk_id=unk_id, fuse_unk=m.fuse_unk, byte_fallback=m.byte_fallback,
                    continuing_subword_prefix=conv(pfx) or b"", end_of_word_suffix=conv(m.end_of_word_suffix) or b"",
                    ignore_merges=m.ignore_merges, byte_level=byte_level, n_ids=n_ids)
    if m.byte_fallback:
        t.set_byte_fallback(m.vocab)
    return t
