"""Reading back what `numbatok preprocess` wrote: the documents of all shards, in order.

Shards written by separate jobs merge by reading them in order, nothing else; `open_tokens(prefix)`
does that over memory maps, so iterating a corpus larger than memory costs no more than its pages.
`read_idx` reads one Megatron-LM `.idx` file with nothing but `struct` and numpy, so that the format
can be checked independently of the code that writes it.
"""
import json
import os
import re
import struct
from dataclasses import dataclass

import numpy as np

from .errors import NumbatokError

_MAGIC = b"MMIDIDX\x00\x00"
_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
           8: np.uint16}


@dataclass
class MegatronIndex:
    """The contents of a Megatron-LM .idx file (version 1)."""

    dtype: np.dtype
    sequence_lengths: np.ndarray  # int32, one per sequence
    sequence_pointers: np.ndarray  # int64, byte offset of each sequence in the .bin
    document_indices: np.ndarray  # int64, sequence_count + 1 entries: document d is sequences [d[i], d[i+1])


def read_idx(path):
    """Parses a Megatron-LM .idx: magic, version 1 (uint64), dtype code (uint8), sequence count and
    document-index count (uint64), then int32 lengths, int64 pointers and int64 document indices."""
    with open(path, "rb") as f:
        head = f.read(34)
        if len(head) < 34 or head[:9] != _MAGIC:
            raise NumbatokError(f"{path} is not a Megatron-LM .idx file (bad magic)")
        version, code, n_seq, n_doc = struct.unpack("<QBQQ", head[9:])
        if version != 1 or code not in _DTYPES:
            raise NumbatokError(f"{path}: unsupported .idx version {version} or dtype code {code}")
        body = f.read()
    need = n_seq * 4 + n_seq * 8 + n_doc * 8
    if len(body) < need:
        raise NumbatokError(f"{path} is truncated: {len(body)} bytes after the header, {need} needed")
    lengths = np.frombuffer(body, "<i4", n_seq, 0)
    pointers = np.frombuffer(body, "<i8", n_seq, n_seq * 4)
    docs = np.frombuffer(body, "<i8", n_doc, n_seq * 12)
    return MegatronIndex(np.dtype(_DTYPES[code]), lengths, pointers, docs)


def shard_files(prefix):
    """[(index, path stem, format)] of the shards of `prefix`, in order; all N must be present and finished."""
    folder, base = os.path.split(os.path.abspath(prefix))
    pattern = re.compile(re.escape(base) + r"_(\d{5,})-of-(\d{5,})\.(idx|ids\.npy)$")
    found = {}
    counts = set()
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        m = pattern.match(name)
        if m:
            fmt = "megatron" if m.group(3) == "idx" else "npy"
            found[int(m.group(1))] = (os.path.join(folder, name[: m.start(3) - 1]), fmt)
            counts.add(int(m.group(2)))
    if not found:
        if os.path.isfile(prefix + ".idx"):  # a plain Megatron-LM dataset, not sharded
            return [(0, prefix, "megatron")]
        raise NumbatokError(f"no shards found for prefix {prefix!r} (expected {base}_00000-of-0000N.idx or .ids.npy)")
    if len(counts) != 1:
        raise NumbatokError(f"{prefix!r} mixes shard sets of different sizes {sorted(counts)}: remove the stale ones")
    n = counts.pop()
    missing = [i for i in range(n) if i not in found or not os.path.isfile(found[i][0] + ".json")]
    if missing:
        raise NumbatokError(
            f"{prefix!r}: shards {missing} of {n} are missing or unfinished (no manifest): run them again "
            "with `numbatok preprocess ... --resume`")
    return [(i, *found[i]) for i in range(n)]


class Tokens:
    """The documents of a sharded corpus as numpy arrays of ids, shard after shard."""

    def __init__(self, prefix):
        self.shards = shard_files(prefix)
        self._bounds = []  # per shard: (token array over the file, document bounds in tokens)
        for _, stem, fmt in self.shards:
            if fmt == "megatron":
                idx = read_idx(stem + ".idx")
                ids = np.memmap(stem + ".bin", dtype=idx.dtype.newbyteorder("<"), mode="r") \
                    if os.path.getsize(stem + ".bin") else np.zeros(0, idx.dtype)
                starts = np.zeros(idx.sequence_lengths.shape[0] + 1, dtype=np.int64)
                np.cumsum(idx.sequence_lengths, out=starts[1:])
                bounds = starts[idx.document_indices]
            else:
                ids = np.load(stem + ".ids.npy", mmap_mode="r")
                bounds = np.load(stem + ".offsets.npy")
            self._bounds.append((ids, bounds))

    def __len__(self):
        return sum(b.shape[0] - 1 for _, b in self._bounds)

    @property
    def num_tokens(self):
        return sum(int(b[-1] - b[0]) if b.shape[0] else 0 for _, b in self._bounds)

    def __iter__(self):
        for ids, bounds in self._bounds:
            for a, z in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                yield ids[a:z]

    def manifests(self):
        """The manifest of each shard (documents, tokens, inputs read with checksums, ...)."""
        out = []
        for _, stem, _ in self.shards:
            with open(stem + ".json", encoding="utf-8") as f:
                out.append(json.load(f))
        return out


def open_tokens(prefix):
    """The documents of every shard of `prefix` (Megatron .bin/.idx or .npy), in order.

        for ids in numbatok.datasets.open_tokens("data/owt"):   # numpy arrays of token ids
            ...
    """
    return Tokens(prefix)
