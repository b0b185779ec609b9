"""numbatok: Hugging Face tokenizer.json files, encoded exactly, as Numba kernels on the CPU and NVIDIA GPUs.

    import numbatok
    tok = numbatok.Tokenizer.from_pretrained("gpt2")
    tok.encode("Hello world").ids                 # like tokenizers
    r = tok.encode_ragged(["a", "b c"])            # the fast path: r.ids, r.row_offsets
"""
from .encoding import Encoding, RaggedEncoding
from .errors import InvalidInputError, NumbatokError, UnsupportedComponentError

__version__ = "0.1.0"
__all__ = ["Tokenizer", "Encoding", "RaggedEncoding", "NumbatokError", "UnsupportedComponentError",
           "InvalidInputError", "shipped_names", "__version__"]


def __getattr__(name):
    # Numba takes longer to import than everything else together: it is loaded with the tokenizer,
    # on first use, so that `import numbatok` (a CLI's --help, a worker's start) stays fast.
    import importlib
    if name in ("Tokenizer", "shipped_names"):
        return getattr(importlib.import_module(".tokenizer", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'numbatok' has no attribute {name!r}")


_SUBMODULES = {"tokenizer", "batch", "backends", "compat", "datasets", "decoders", "encoding", "integrations",
               "kernels", "models", "normalizers", "pipeline", "pre_tokenizers", "processors", "spec",
               "unicode_tables", "postprocess", "preprocess", "added_tokens", "cli", "errors"}
