"""Models: BPE, WordPiece and WordLevel, each a per-word kernel over the same flat tables
(`tables.ModelTables`); `build_tables` turns a parsed model section into them."""
import operator

import numpy as np

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
    # the ids by `map` over whole columns (a loop over o200k's 446k merges took 1.9 s of its load)
    lefts, rights = zip(*m.merges) if m.merges else ((), ())
    news = list(map(operator.add, lefts, [b[len(pfx):] for b in rights] if pfx else rights))
    cols = [list(map(m.vocab.get, c)) for c in (lefts, rights, news)]
    if any(None in c for c in cols):
        j, k = next((j, k) for j in range(len(news)) for k in range(3) if cols[k][j] is None)
        raise NumbatokError(f"model.merges[{j}]: token {(lefts, rights, news)[k][j]!r} of merge {lefts[j]!r} + "
                            f"{rights[j]!r} is not in the vocab")
    merges = np.array(cols, dtype=np.int64).T.reshape(-1, 3)
    t = ModelTables(model_bytes, merges, kind=BPE, unk_id=unk_id, fuse_unk=m.fuse_unk, byte_fallback=m.byte_fallback,
                    continuing_subword_prefix=conv(pfx) or b"", end_of_word_suffix=conv(m.end_of_word_suffix) or b"",
                    ignore_merges=m.ignore_merges, byte_level=byte_level, n_ids=n_ids)
    if m.byte_fallback:
        t.set_byte_fallback(m.vocab)
    return t
