"""`numbatok preprocess`: a corpus -> token shards for training, one shard per job (a Slurm array task).

N jobs that never talk to each other each write one shard; reading shards 0..N-1 in order yields
every input document exactly once, in input order. A shard needs the sizes of the inputs, never
their whole contents. The rule that decides which shard a document belongs to:

* the inputs, in the order given (each glob expanded in sorted order), are laid end to end as one
  stretch of T bytes; shard i owns the positions [i*T//N, (i+1)*T//N);
* a document of a plain .txt or .jsonl file belongs to the shard owning its first byte, so a shard
  seeks into the middle of a file and starts at the first line that begins inside its range;
* a gzip file cannot be entered in the middle: it counts as one piece, as long as its compressed
  size, and the shard owning its first byte reads all of it;
* a parquet file is one piece per row group, each as long as its compressed size.

A .txt document is a line ("\\n" ends it; a "\\r" before the "\\n" is part of the line ending).
A .jsonl record is a line holding a JSON object whose `--field` is a string; blank lines are not
records. A parquet document is a row of the `--field` column.

Per shard: PREFIX_00003-of-00007.bin + .idx (Megatron-LM's indexed dataset), or .ids.npy + .offsets.npy,
then PREFIX_00003-of-00007.json, the manifest. Everything is written under a `.tmp` name and renamed,
the manifest last, so a shard is finished exactly when its manifest exists; `--resume` skips the
finished shards whose manifest matches the run and redoes the rest, so a run killed at any moment
and resumed ends byte-identical to one that never stopped.
"""
import glob
import gzip
import hashlib
import json
import os
import queue
import struct
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import batch as _batch
from .backends import cpu, to_host
from .kernels import jsonl
from .kernels import lines as _lines
from .errors import NumbatokError

FORMATS = ("megatron", "npy")
DEFAULT_CHUNK_MB = 16
_KINDS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_EOD_CANDIDATES = ("<|endoftext|>", "</s>")
_MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
_MEGATRON_DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}
_NPY_HEADER_BYTES = 128  # reserved before the ids, filled in once the token count is known
_BAD_SHOWN = 20  # bad records printed one per line; the rest are counted
_BAD_KEPT = 1000  # bad records listed in the manifest


# ---------------------------------------------------------------------------------------------
# Inputs and the sharding rule
# ---------------------------------------------------------------------------------------------

def input_kind(path):
    """('txt' | 'jsonl' | 'parquet', gzipped?) from the file name."""
    name = path.lower()
    gz = name.endswith(".gz")
    kind = _KINDS.get(os.path.splitext(name[:-3] if gz else name)[1])
    if kind is None or (gz and kind == "parquet"):
        raise NumbatokError(
            f"{path}: unknown input type; name inputs *.txt (a document per line), *.jsonl or "
            "*.parquet, optionally gzipped as *.txt.gz or *.jsonl.gz")
    return kind, gz


def expand_inputs(patterns):
    """Paths in the order given, each glob expanded in sorted order (so every job sees the same list)."""
    paths = []
    for pattern in patterns:
        if os.path.isfile(pattern):  # first, so that a name holding "[" is not taken for a glob
            paths.append(pattern)
        elif glob.has_magic(pattern):
            found = [p for p in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(p)]
            if not found:
                raise NumbatokError(f"--input {pattern!r} matches no file")
            paths.extend(found)
        else:
            raise NumbatokError(f"--input {pattern!r}: no such file")
    for p in paths:
        input_kind(p)
    return paths


@dataclass(frozen=True)
class Piece:
    """A part of the input that is laid out as one run of the concatenated stretch."""

    path: str
    kind: str
    gz: bool
    start: int  # first position in the concatenated inputs
    size: int  # positions it covers: file bytes, or compressed bytes of a gzip file / row group
    row_group: int = -1  # parquet only

    @property
    def splittable(self):
        return self.kind != "parquet" and not self.gz


def plan(paths):
    """The pieces of all inputs in order, and the length T of the concatenated stretch."""
    pieces = []
    pos = 0
    for path in paths:
        kind, gz = input_kind(path)
        if kind == "parquet":
            meta = _parquet_file(path).metadata
            for r in range(meta.num_row_groups):
                rg = meta.row_group(r)
                size = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
                pieces.append(Piece(path, kind, gz, pos, size, r))
                pos += size
        else:
            size = os.path.getsize(path)
            pieces.append(Piece(path, kind, gz, pos, size))
            pos += size
    return pieces, pos


def assign(pieces, total, num_shards, shard_index):
    """[(piece, a, b)]: what shard `shard_index` reads; documents starting in [a, b) of a plain file."""
    lo = shard_index * total // num_shards
    hi = (shard_index + 1) * total // num_shards
    last = shard_index == num_shards - 1
    out = []
    for p in pieces:
        if p.splittable:
            a, b = max(lo, p.start) - p.start, min(hi, p.start + p.size) - p.start
            if a < b:
                out.append((p, a, b))
        elif lo <= p.start < hi or (last and p.start >= hi):  # an empty piece at T goes to the last shard
            out.append((p, 0, p.size))
    return out


def shards_from_env(num_shards, shard_index, environ=os.environ):
    """(num_shards, shard_index or None for all): flags win, else the Slurm array variables."""
    task_id = environ.get("SLURM_ARRAY_TASK_ID")
    if num_shards is None:
        num_shards = int(environ["SLURM_ARRAY_TASK_COUNT"]) if task_id is not None else 1
    if shard_index is None and task_id is not None:
        # Arrays may start anywhere (--array=1-8) and step (--array=0-14:2): index from the position.
        first = int(environ.get("SLURM_ARRAY_TASK_MIN", 0))
        step = int(environ.get("SLURM_ARRAY_TASK_STEP", 1) or 1)
        shard_index = (int(task_id) - first) // step
    if num_shards < 1:
        raise NumbatokError(f"--num-shards must be at least 1, got {num_shards}")
    if shard_index is not None and not 0 <= shard_index < num_shards:
        raise NumbatokError(
            f"shard index {shard_index} is outside 0..{num_shards - 1}: with a Slurm array, use a "
            "contiguous range (--array=0-N) or pass --num-shards and --shard-index explicitly")
    return num_shards, shard_index


def shard_stem(prefix, shard_index, num_shards):
    """PREFIX_00003-of-00007: zero-padded so that names sort in shard order."""
    width = max(5, len(str(num_shards)))
    return f"{prefix}_{shard_index:0{width}d}-of-{num_shards:0{width}d}"


# ---------------------------------------------------------------------------------------------
# Readers: each yields (texts as a pyarrow large_string array, input bytes consumed)
# ---------------------------------------------------------------------------------------------

class BadRecords:
    """Counts records that cannot be documents; fails on the first one unless told to skip."""

    def __init__(self, skip, stream=None):
        self.skip = skip
        self.count = 0
        self.kept = []
        self._stream = stream or sys.stderr

    def report(self, path, where, reason):
        """`where` is a callable giving "line 12" or "row 3": line numbers can cost a read, so lazily."""
        if not self.skip:
            raise NumbatokError(
                f"{path}: {where()}: {reason}; fix the record, or pass --on-bad-record skip to skip "
                "(and count) such records")
        self.count += 1
        if self.count <= _BAD_KEPT:
            self.kept.append({"path": path, "where": where(), "reason": reason})
        if self.count <= _BAD_SHOWN:
            print(f"numbatok preprocess: skipped {path}: {where()}: {reason}", file=self._stream)
        elif self.count == _BAD_SHOWN + 1:
            print("numbatok preprocess: more bad records skipped; the count is in the summary "
                  "and the first ones are listed in the manifest", file=self._stream)


class _LineNumbers:
    """Line numbers inside a file read from byte `start`: counting the lines before it happens only
    if a bad record needs a number, so a shard never reads the file before its range otherwise."""

    def __init__(self, path, start, chunk):
        self._path, self._start, self._chunk = path, start, chunk
        self._base = 1 if start == 0 else None

    def line(self, lines_after_start):
        if self._base is None:
            newlines, left = 0, self._start
            with open(self._path, "rb") as f:
                while left:
                    buf = f.read(min(left, self._chunk))
                    newlines += buf.count(b"\n")
                    left -= len(buf)
            self._base = newlines + 1
        return self._base + lines_after_start


class _HashingReader:
    """A raw file wrapper that hashes and counts the compressed bytes gzip pulls through it."""

    def __init__(self, f):
        self._f = f
        self.sha = hashlib.sha256()
        self.pos = 0

    def read(self, n=-1):
        buf = self._f.read(n)
        self.sha.update(buf)
        self.pos += len(buf)
        return buf

    def readable(self):
        return True


def _fill(f, store, n):
    """Reads into store[n:] until it is full or the file ends: (bytes held, whether the file ended)."""
    with memoryview(store) as m:
        while n < len(store):
            got = f.readinto(m[n:])
            if not got:
                return n, True
            n += got
    return n, False


def _line_blocks(f, a, b, chunk):
    """(offset, block) runs of whole lines of `f`: the lines that begin in [a, b), in order, about
    `chunk` bytes each (longer when one line is). A line begins at 0 or right after a "\\n"; the last
    line may run past b and is read to its end. Every block is a view of one buffer that the next
    block reuses (no fresh 16 MB allocation and copy per block): done with it before the next."""
    store = bytearray(max(min(chunk, b - a + (1 << 16)), 1))  # (a small file: a small buffer)
    view = memoryview(store)
    pos = n = 0  # store[:n] holds the file's bytes from offset pos
    eof = False
    if a > 0:
        f.seek(a - 1)
        pos = a - 1
        while True:  # skip the line that began before a (or ends exactly at a - 1)
            n, eof = _fill(f, store, 0)
            k = store.find(b"\n", 0, n)
            if k >= 0:
                break
            if eof:
                return
            pos += n
        store[:n - k - 1] = bytes(view[k + 1:n])
        pos += k + 1
        n -= k + 1
    scanned = 0  # store[:scanned] is known to hold no newline we are looking for
    while pos < b:
        if not eof and n < len(store):
            n, eof = _fill(f, store, n)
        limit = b - pos  # lines beginning at store indices < limit are ours
        if limit <= n:
            k = store.find(b"\n", max(limit - 1, scanned), n)
            if k >= 0 or eof:
                end = k + 1 if k >= 0 else n
                if end:
                    yield pos, view[:end]
                return
        else:
            k = store.rfind(b"\n", scanned, n)
            if k >= 0:
                yield pos, view[:k + 1]
                store[:n - k - 1] = bytes(view[k + 1:n])  # the next line's start, to the front
                pos += k + 1
                n -= k + 1
                scanned = 0
                continue
            if eof:
                if n:
                    yield pos, view[:n]
                return
        scanned = n  # one line longer than the buffer: a larger buffer, read on
        view.release()
        store = store + bytearray(len(store))
        view = memoryview(store)


def _string_array(data, offsets):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _drop_invalid_utf8(texts, where, path, bad):
    """Arrow checks UTF-8 in one pass; only when that fails are rows decoded one by one to name them."""
    import pyarrow as pa

    try:
        texts.validate(full=True)
        return texts
    except pa.ArrowInvalid:
        pass
    binary = texts.cast(pa.large_binary())
    keep = np.ones(len(binary), dtype=bool)
    for i, value in enumerate(binary.to_pylist()):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as e:
            bad.report(path, lambda i=i: where(i), f"invalid UTF-8 (byte {e.start} of the document)")
            keep[i] = False
    return _string_array(*_batch.arrow_buffers(binary.filter(pa.array(keep))))


def _txt_texts(block, where, path, bad):
    """Whole lines -> documents, vectorized: newlines (and a CR before one) are cut out in one mask."""
    lines = _batch.from_lines(block)
    return _drop_invalid_utf8(_string_array(lines.data, lines.offsets), where, path, bad)


def _jsonl_texts(block, where, path, field, bad):
    """JSON lines -> documents (see `kernels.jsonl.documents`), bad records to `bad` by line."""
    data, offsets = jsonl.documents(block, field, lambda i, problem: bad.report(path, lambda: where(i), problem))
    return _string_array(data, offsets)


def _read_lines(piece, a, b, field, chunk, bad, log):
    """Documents of a .txt / .jsonl piece (plain or gzip), block by block."""
    try:
        yield from _read_lines_unchecked(piece, a, b, field, chunk, bad, log)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:  # truncated or corrupt gzip data
        raise NumbatokError(f"{piece.path}: not a readable gzip file ({e})") from None


def _read_lines_unchecked(piece, a, b, field, chunk, bad, log):
    if piece.gz:  # read whole: the range stood for compressed bytes
        a, b = 0, sys.maxsize
    raw = open(piece.path, "rb")
    with raw, ThreadPoolExecutor(1, thread_name_prefix="numbatok-preprocess-sha256") as hasher:
        hashing = _HashingReader(raw) if piece.gz else None
        f = gzip.GzipFile(fileobj=hashing, mode="rb") if piece.gz else raw
        sha = hashing.sha if piece.gz else hashlib.sha256()
        first = last = None
        lines_seen = 0
        numbers = None
        consumed = 0
        for offset, block in _line_blocks(f, a, b, chunk):
            if first is None:
                first = offset
                numbers = _LineNumbers(piece.path, offset, chunk)
            last = offset + len(block)
            # the checksum (hashlib lets go of the GIL) runs beside the parse; both only read the block
            hashed = None if piece.gz else hasher.submit(sha.update, block)

            def where(i, base=lines_seen):
                return f"line {numbers.line(base + i)}"

            if piece.kind == "txt":
                texts = _txt_texts(block, where, piece.path, bad)
            else:
                texts = _jsonl_texts(block, where, piece.path, field, bad)
            lines_seen += _lines.count(np.frombuffer(block, np.uint8))
            if hashed is not None:
                hashed.result()  # before the next block reuses the buffer
            now = hashing.pos if piece.gz else last - a
            yield texts, now - consumed
            consumed = now
        if piece.gz:
            while hashing.read(chunk):  # the gzip trailer, so the checksum covers the whole file
                pass
            log.append({"path": piece.path, "bytes": [0, hashing.pos], "sha256": sha.hexdigest()})
        elif first is not None:
            log.append({"path": piece.path, "bytes": [first, last], "sha256": sha.hexdigest()})


def _parquet_file(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except pa.ArrowException as e:
        raise NumbatokError(f"{path}: not a readable parquet file ({e})") from None


def _read_parquet(piece, field, chunk, bad, log):
    """Documents of one parquet row group, in record batches of about `chunk` bytes of text."""
    import pyarrow as pa

    pf = _parquet_file(piece.path)
    names = pf.schema_arrow.names
    if field not in names:
        raise NumbatokError(f"{piece.path} has no column {field!r} (it has {names}); pick one with --field")
    col_type = pf.schema_arrow.field(field).type
    if not (pa.types.is_string(col_type) or pa.types.is_large_string(col_type)
            or pa.types.is_binary(col_type) or pa.types.is_large_binary(col_type)):
        raise NumbatokError(f"{piece.path}: column {field!r} is {col_type}, not text; pick one with --field")
    meta = pf.metadata
    rg = meta.row_group(piece.row_group)
    first_row = sum(meta.row_group(r).num_rows for r in range(piece.row_group))
    rows_per_batch = max(1, chunk * rg.num_rows // max(1, rg.total_byte_size))
    row = first_row
    consumed = 0
    for rb in pf.iter_batches(batch_size=rows_per_batch, row_groups=[piece.row_group], columns=[field],
                              use_threads=False):
        col = rb.column(0)
        rows = np.arange(len(rb))
        if col.null_count:
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(~valid):
                bad.report(piece.path, lambda i=i, base=row: f"row {base + int(i)}", f"column {field!r} is null")
            col = col.filter(col.is_valid())
            rows = rows[valid]

        def where(i, base=row, rows=rows):
            return f"row {base + int(rows[i])}"

        texts = _string_array(*_batch.arrow_buffers(col.cast(pa.large_binary())))
        texts = _drop_invalid_utf8(texts, where, piece.path, bad)
        row += len(rb)
        now = piece.size * (row - first_row) // max(1, rg.num_rows)
        yield texts, now - consumed
        consumed = now
    log.append({"path": piece.path, "row_group": piece.row_group,
                "sha256": _column_chunk_sha256(piece.path, rg, names.index(field))})


def _column_chunk_sha256(path, rg, column):
    """Checksum of the stored bytes of the column chunk that was read (not the whole file)."""
    cc = rg.column(column)
    start = cc.dictionary_page_offset if cc.has_dictionary_page and cc.dictionary_page_offset else cc.data_page_offset
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        sha.update(f.read(cc.total_compressed_size))
    return sha.hexdigest()


def read_documents(assigned, field, chunk, bad, log):
    """(texts, input bytes) blocks of every document a shard owns, in input order."""
    for piece, a, b in assigned:
        if piece.kind == "parquet":
            yield from _read_parquet(piece, field, chunk, bad, log)
        else:
            yield from _read_lines(piece, a, b, field, chunk, bad, log)


def _rebatch(blocks, chunk):
    """Joins small blocks (many small files) so that each encode call gets about `chunk` bytes of text."""
    import pyarrow as pa

    pending, text_bytes, in_bytes = [], 0, 0
    for texts, nbytes in blocks:
        pending.append(texts)
        in_bytes += nbytes
        text_bytes += _text_bytes(texts)
        if text_bytes >= chunk:
            yield pa.concat_arrays(pending) if len(pending) > 1 else pending[0], text_bytes, in_bytes
            pending, text_bytes, in_bytes = [], 0, 0
    if pending:
        yield pa.concat_arrays(pending) if len(pending) > 1 else pending[0], text_bytes, in_bytes


def _text_bytes(texts):
    if not len(texts):
        return 0
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)
    return int(offsets[texts.offset + len(texts)] - offsets[texts.offset])


def _prefetch(iterable, depth=2):
    """Runs `iterable` in a thread `depth` items ahead, so reading and parsing overlap encoding."""
    q = queue.Queue(depth)
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work():
        try:
            for item in iterable:
                if not put(("item", item)):
                    return
            put(("done", None))
        except BaseException as e:  # handed to the consumer, which re-raises it
            put(("error", e))

    thread = threading.Thread(target=work, name="numbatok-preprocess-reader", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------

def token_dtype(vocab_size):
    """Megatron-LM's rule: uint16 below 65,500 ids, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def megatron_index(lengths, dtype):
    """The .idx bytes of Megatron-LM's indexed dataset, one sequence per document."""
    n = lengths.shape[0]
    if n and int(lengths.max()) > np.iinfo(np.int32).max:
        raise NumbatokError("a document has more than 2**31 tokens, which the .idx format cannot hold")
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    header = _MEGATRON_MAGIC + struct.pack("<QBQQ", 1, _MEGATRON_DTYPE_CODES[dtype], n, n + 1)
    return b"".join([header, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     np.arange(n + 1, dtype="<i8").tobytes()])


def _npy_header(dtype, n):
    body = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({n},), }}"
    body = body.ljust(_NPY_HEADER_BYTES - 11) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1")


def _fsync_dir(path):
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:  # platforms without directory handles
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path)


class ShardWriter:
    """Streams token ids of one shard to `*.tmp`, then writes the index and renames both into place."""

    def __init__(self, stem, fmt, dtype):
        self.fmt = fmt
        self.dtype = dtype
        self.paths = [stem + ".bin", stem + ".idx"] if fmt == "megatron" else [stem + ".ids.npy", stem + ".offsets.npy"]
        self._ids = open(self.paths[0] + ".tmp", "wb")
        if fmt == "npy":
            self._ids.write(b"\0" * _NPY_HEADER_BYTES)
        self._lengths = []
        self.documents = 0
        self.tokens = 0

    def add(self, ids, lengths):
        self._ids.write(np.ascontiguousarray(ids, dtype=self.dtype.newbyteorder("<")).data)
        self._lengths.append(lengths)
        self.documents += lengths.shape[0]
        self.tokens += ids.shape[0]

    def commit(self):
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        if self.fmt == "megatron":
            index = megatron_index(lengths, self.dtype)
        else:
            self._ids.seek(0)
            self._ids.write(_npy_header(self.dtype.newbyteorder("<"), self.tokens))
            offsets = np.zeros(lengths.shape[0] + 1, dtype="<i8")
            np.cumsum(lengths, out=offsets[1:])
            index = _npy_header(offsets.dtype, offsets.shape[0]) + offsets.tobytes()
        self._ids.flush()
        os.fsync(self._ids.fileno())
        self._ids.close()
        with open(self.paths[1] + ".tmp", "wb") as f:
            f.write(index)
            f.flush()
            os.fsync(f.fileno())
        for path in self.paths:
            os.replace(path + ".tmp", path)
        _fsync_dir(self.paths[0])

    def abort(self):
        self._ids.close()
        for path in self.paths:
            try:
                os.remove(path + ".tmp")
            except FileNotFoundError:
                pass


def _file_record(path):
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for buf in iter(lambda: f.read(1 << 24), b""):
            sha.update(buf)
    return {"name": os.path.basename(path), "bytes": os.path.getsize(path), "sha256": sha.hexdigest()}


def is_finished(manifest_path, config):
    """A shard is finished when its manifest was written for this very run and its files are whole."""
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    if manifest.get("config") != config:
        return False
    folder = os.path.dirname(manifest_path)
    return all(os.path.isfile(os.path.join(folder, rec["name"]))
               and os.path.getsize(os.path.join(folder, rec["name"])) == rec["bytes"]
               for rec in manifest.get("files", ()))


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

def load_tokenizer(spec, device="auto"):
    """(tokenizer, sha256 of its tokenizer.json): the hash ties every shard to the exact vocabulary."""
    import numbatok

    tok = numbatok.Tokenizer.from_pretrained(spec, device=device)
    return tok, tok.sha256


def eod_id(tok, token):
    """The id appended after each document: --eod-token, else <|endoftext|> or </s>, whichever exists."""
    for candidate in (token,) if token else _EOD_CANDIDATES:
        i = tok.token_to_id(candidate)
        if i is not None:
            return int(i)
    if token:
        raise NumbatokError(f"--eod-token {token!r} is not in the tokenizer's vocabulary")
    raise NumbatokError(
        f"--append-eod: the tokenizer has none of {list(_EOD_CANDIDATES)}; name its end-of-document "
        "token with --eod-token")


def host_array(a):
    """Ids may come back on the GPU (CuPy / Numba device arrays): the writers need them on the host."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get"):
        return to_host(a)
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return np.asarray(a)


def _timed(iterable, seconds, stage):
    """`iterable`, with the time spent getting each item added to seconds[stage]."""
    it = iter(iterable)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            return
        finally:
            seconds[stage] += time.perf_counter() - t0
        yield item


def encode_blocks(tok, batches, add_special_tokens, eod):
    """(ids, lengths, text bytes, input bytes) per batch; EOD inserted after every document if asked."""
    for texts, text_bytes, in_bytes in batches:
        if len(texts) == 0:
            yield np.zeros(0, np.int32), np.zeros(0, np.int64), text_bytes, in_bytes
            continue
        r = tok.encode_ragged(texts, add_special_tokens=add_special_tokens)
        ids = host_array(r.ids)
        offsets = host_array(r.row_offsets).astype(np.int64, copy=False)
        lengths = np.diff(offsets)
        if eod is not None:  # (a parallel copy: np.insert was 20 ms per 6M ids on one thread)
            ids, _ = cpu.wrap_rows(ids.astype(np.int32, copy=False), offsets - offsets[0],
                                   np.zeros(0, np.int32), np.array([eod], np.int32))
            lengths = lengths + 1
        yield ids, lengths, text_bytes, in_bytes


@dataclass
class Options:
    """What `numbatok preprocess` was asked to do, for callers that skip the command line."""

    inputs: list
    output_prefix: str
    fmt: str = "megatron"
    num_shards: int = 1
    shard_index: object = None  # None: every shard, one after the other
    field: str = "text"
    append_eod: bool = False
    eod_token: object = None
    add_special_tokens: bool = False
    resume: bool = False
    skip_bad_records: bool = False
    chunk_bytes: int = DEFAULT_CHUNK_MB << 20
    progress: bool = True
    timings: bool = False


def preprocess(tok, tokenizer_sha256, opts, out=None, err=None):
    """Writes the shard(s) `opts` asks for; returns one summary dict per shard."""
    import numbatok

    out = out or sys.stdout
    err = err or sys.stderr
    if opts.fmt not in FORMATS:
        raise NumbatokError(f"unknown --format {opts.fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        import pyarrow  # noqa: F401 - documents travel as Arrow arrays, whatever the input format
    except ImportError:
        raise NumbatokError("numbatok preprocess needs pyarrow: pip install 'numbatok[arrow]'") from None
    paths = expand_inputs(opts.inputs)
    pieces, total = plan(paths)
    eod = eod_id(tok, opts.eod_token) if opts.append_eod else None
    dtype = token_dtype(max(int(tok.vocab_size), max(tok.get_vocab().values(), default=-1) + 1))
    config = {
        "numbatok_version": numbatok.__version__,
        "tokenizer_sha256": tokenizer_sha256,
        "format": opts.fmt,
        "dtype": dtype.name,
        "field": opts.field,
        "add_special_tokens": opts.add_special_tokens,
        "eod_id": eod,
        "num_shards": opts.num_shards,
        "inputs": [{"path": p, "bytes": os.path.getsize(p)} for p in paths],
    }
    folder = os.path.dirname(os.path.abspath(opts.output_prefix))
    os.makedirs(folder, exist_ok=True)
    indices = range(opts.num_shards) if opts.shard_index is None else [opts.shard_index]
    summaries = []
    for i in indices:
        stem = shard_stem(opts.output_prefix, i, opts.num_shards)
        shard_config = dict(config, shard_index=i)
        if opts.resume and is_finished(stem + ".json", shard_config):
            print(f"numbatok preprocess: {os.path.basename(stem)} is already finished; skipped", file=out)
            continue
        assigned = assign(pieces, total, opts.num_shards, i)
        summaries.append(_write_shard(tok, stem, shard_config, assigned, eod, dtype, opts, out, err))
    return summaries


def _write_shard(tok, stem, config, assigned, eod, dtype, opts, out, err):
    from tqdm import tqdm

    try:
        os.remove(stem + ".json")  # from here on the shard is unfinished, whatever happens
    except FileNotFoundError:
        pass
    bad = BadRecords(opts.skip_bad_records, err)
    log = []
    writer = ShardWriter(stem, opts.fmt, dtype)
    name = os.path.basename(stem)
    bar = tqdm(total=sum(b - a for _, a, b in assigned), unit="B", unit_scale=True, unit_divisor=1000,
               desc=name, file=err, disable=not opts.progress, leave=False,
               mininterval=0.5 if err.isatty() else 30.0)
    started = time.perf_counter()
    text_total = 0
    # where the shard's time went, for --timings: the reader runs ahead on its own thread, so its
    # stage is the time the encoder waited for it
    seconds = dict.fromkeys(("waiting for input", "encoding", "writing", "commit", "manifest"), 0.0)
    try:
        blocks = _timed(_prefetch(_rebatch(read_documents(assigned, opts.field, opts.chunk_bytes, bad, log),
                                           opts.chunk_bytes)), seconds, "waiting for input")
        for ids, lengths, text_bytes, in_bytes in _timed(encode_blocks(tok, blocks, opts.add_special_tokens, eod),
                                                         seconds, "encoding"):
            t0 = time.perf_counter()
            writer.add(ids, lengths)
            seconds["writing"] += time.perf_counter() - t0
            text_total += text_bytes
            bar.update(in_bytes)
            secs = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix_str(f"{writer.documents:,} docs, {writer.tokens / secs:,.0f} tok/s", refresh=False)
        t0 = time.perf_counter()
        writer.commit()
        seconds["commit"] = time.perf_counter() - t0
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    seconds["encoding"] -= seconds["waiting for input"]  # (the encoder's wait is inside its own step)
    t0 = time.perf_counter()
    manifest = {
        "config": config,
        "documents": writer.documents,
        "tokens": writer.tokens,
        "text_bytes": text_total,
        "read": log,
        "bad_records": {"count": bad.count, "first": bad.kept},
        "files": [_file_record(p) for p in writer.paths],
    }
    _write_atomically(stem + ".json", (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    seconds["manifest"] = time.perf_counter() - t0
    secs = max(time.perf_counter() - started, 1e-9)
    mb = text_total / 1e6
    print(f"numbatok preprocess: {name}: {writer.documents:,} documents, {writer.tokens:,} tokens, "
          f"{mb:,.1f} MB of text in {secs:,.1f} s ({mb / secs:,.1f} MB/s, {writer.tokens / secs:,.0f} tokens/s), "
          f"{bad.count:,} bad records skipped -> {', '.join(os.path.basename(p) for p in writer.paths)}",
          file=out)
    if opts.timings:
        print(f"numbatok preprocess: {name}: " + ", ".join(f"{k} {v:.3f} s" for k, v in seconds.items()), file=out)
    return {"shard": name, "documents": writer.documents, "tokens": writer.tokens,
            "text_bytes": text_total, "seconds": secs, "bad_records": bad.count, "stage_seconds": seconds}


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def add_parser(subparsers):
    """Registers `numbatok preprocess`."""
    p = subparsers.add_parser(
        "preprocess", help="tokenize a corpus into training shards (Megatron-LM .bin/.idx or .npy)",
        description="Tokenize a corpus into N shards that N independent jobs write (one per Slurm array task); "
                    "reading shards 0..N-1 in order gives every document once, in input order. A shard reads "
                    "only its own part of the inputs: the documents whose first byte falls in its 1/N of "
                    "the concatenated inputs (a gzip file or a parquet row group goes whole to one shard).")
    p.add_argument("--tokenizer", required=True, help="shipped name (gpt2), tokenizer.json, or a folder holding one")
    p.add_argument("--input", required=True, nargs="+", action="extend", metavar="FILE_OR_GLOB",
                   help="*.txt (a document per line), *.jsonl, *.parquet, *.txt.gz, *.jsonl.gz; "
                        "quoted globs are expanded here, sorted")
    p.add_argument("--output-prefix", required=True, help="shards are PREFIX_00003-of-00007.*")
    p.add_argument("--format", choices=FORMATS, default="megatron",
                   help="megatron: .bin + .idx as Megatron-LM reads them; npy: .ids.npy + .offsets.npy")
    p.add_argument("--num-shards", type=int, help="default: $SLURM_ARRAY_TASK_COUNT, else 1")
    p.add_argument("--shard-index", type=int,
                   help="default: from $SLURM_ARRAY_TASK_ID (minus $SLURM_ARRAY_TASK_MIN), else every shard in turn")
    p.add_argument("--field", default="text", help="the text field of .jsonl records / column of .parquet files")
    p.add_argument("--append-eod", action="store_true", help="append an end-of-document token to every document")
    p.add_argument("--eod-token", help="the token --append-eod appends (default: <|endoftext|> or </s>)")
    p.add_argument("--add-special-tokens", action="store_true",
                   help="run the tokenizer's post-processor (e.g. [CLS] ... [SEP]); off, as for LM pretraining")
    p.add_argument("--resume", action="store_true", help="skip shards already finished by an identical run")
    p.add_argument("--on-bad-record", choices=("fail", "skip"), default="fail",
                   help="invalid JSON, a missing field or invalid UTF-8: stop (default) or skip and count")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--chunk-mb", type=float, default=DEFAULT_CHUNK_MB,
                   help="text per encode call; bounds memory (default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--timings", action="store_true",
                   help="after each shard, where its time went: waiting for input, encoding, writing, commit, manifest")
    p.set_defaults(func=run)
    return p


def run(args):
    """`numbatok preprocess` itself; returns the exit code."""
    num_shards, shard_index = shards_from_env(args.num_shards, args.shard_index)
    if args.chunk_mb <= 0:
        raise NumbatokError(f"--chunk-mb must be positive, got {args.chunk_mb}")
    inputs = expand_inputs(args.input)  # a typo should not wait for the tokenizer to load
    tok, sha = load_tokenizer(args.tokenizer, args.device)
    opts = Options(
        inputs=inputs, output_prefix=args.output_prefix, fmt=args.format, num_shards=num_shards,
        shard_index=shard_index, field=args.field, append_eod=args.append_eod, eod_token=args.eod_token,
        add_special_tokens=args.add_special_tokens, resume=args.resume,
        skip_bad_records=args.on_bad_record == "skip", chunk_bytes=max(1, int(args.chunk_mb * (1 << 20))),
        progress=not args.no_progress, timings=args.timings)
    preprocess(tok, sha, opts)
    return 0
