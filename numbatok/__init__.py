"""numbatok: Hugging Face tokenizer.json files, encoded exactly, as Numba kernels on the CPU and NVIDIA GPUs.

    import numbatok
    tok = numbatok.Tokenizer.from_pretrained("gpt2")
    tok.encode("Hello world").ids                 # like tokenizers
    r = tok.encode_ragged(["a", "b c"])            # the fast path: r.ids, r.row_offsets
"""
from .encoding import Encoding, RaggedEncoding
from .errors import InvalidInputError, NumbatokError, UnsupportedComponentError
from .tokenizer import Tokenizer, shipped_names

__version__ = "0.1.0"
__all__ = ["Tokenizer", "Encoding", "RaggedEncoding", "NumbatokError", "UnsupportedComponentError",
           "InvalidInputError", "shipped_names", "__version__"]
