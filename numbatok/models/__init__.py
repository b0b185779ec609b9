"""Models: BPE (more to come: WordPiece, WordLevel, Unigram), each a per-word kernel over flat tables."""
