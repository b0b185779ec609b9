"""The `numbatok` command: encode text files to token ids, decode them back, inspect a tokenizer.

    numbatok encode --tokenizer gpt2 docs.txt more.jsonl --output ids.npz
    numbatok decode --tokenizer gpt2 ids.npz --output docs.txt
    numbatok info roberta-base
    numbatok list

Inputs of `encode`, all read as UTF-8 and concatenated in the order given:

* `*.txt` (and `-`, standard input): one document per line. A line ends at "\\n"; one "\\r" right
  before it (a Windows line ending) is not part of the document. A final "\\n" does not start
  another, empty document, but a blank line inside the file is an empty document.
* `*.jsonl` / `*.ndjson`: one JSON object per line, the document being its `--field` (default
  `text`), which must be a string. Blank lines are skipped.

These are the rules `numbatok preprocess` follows too, so both read a file into the same documents.
The output .npz holds `ids` (int32, every document's ids back to back) and `row_offsets` (int64,
documents + 1 entries; document i is ids[row_offsets[i]:row_offsets[i + 1]]).

Errors (a bad file, a bad record, a tokenizer numbatok cannot run) print one line
`numbatok: error: ...` on stderr and exit with status 2; Ctrl-C exits with 130.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile

import numpy as np

from . import __version__
from . import batch as _batch
from .backends import to_host
from .errors import NumbatokError, UnsupportedComponentError
from .kernels import jsonl

PROGRESS_MIN_BYTES = 4 << 20  # a progress bar only for inputs larger than this
DECODE_CHUNK_TOKENS = 1 << 22
_TXT, _JSONL = "txt", "jsonl"
_KINDS = {".txt": _TXT, ".jsonl": _JSONL, ".ndjson": _JSONL}


class _Abort(Exception):
    """An error already reported (e.g. `info` printed its own findings); only the exit code is left."""

    def __init__(self, code):
        self.code = code


def _err(msg):
    print(f"numbatok: error: {' '.join(str(msg).split())}", file=sys.stderr)


def _os_error_text(e):
    what = e.strerror or str(e)
    return f"{e.filename}: {what}" if e.filename is not None else what


# ---------------------------------------------------------------------------------------------
# Loading a tokenizer
# ---------------------------------------------------------------------------------------------

_LOADED = {}  # (file, mtime, size, device) -> Tokenizer: repeated main() calls in one process load once


def _load(name_or_path, device="auto"):
    from .tokenizer import Tokenizer, resolve_path

    path = os.path.realpath(resolve_path(name_or_path))
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size, device)
    tok = _LOADED.get(key)
    if tok is None:
        tok = Tokenizer.from_pretrained(path, device=device)
        if len(_LOADED) >= 4:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = tok
    return tok


# ---------------------------------------------------------------------------------------------
# encode: readers
# ---------------------------------------------------------------------------------------------

def _input_kind(path):
    if path == "-":
        return _TXT
    kind = _KINDS.get(os.path.splitext(path.lower())[1])
    if kind is None:
        raise NumbatokError(f"{path}: unknown input type; name inputs *.txt (a document per line) or *.jsonl "
                            "(a JSON object per line), or pass - to read lines from standard input")
    return kind


def _line_blocks(f, block_bytes):
    """(number of the block's first line, bytes, bytes read since the last block): runs of whole
    lines, about block_bytes each (longer when one line is)."""
    line = 1
    parts = []  # read, not yet yielded; no newline in any but possibly none
    unreported = 0
    while True:
        data = f.read(block_bytes)
        if not data:
            if parts:
                yield line, b"".join(parts), unreported
            return
        unreported += len(data)
        k = data.rfind(b"\n")
        if k < 0:  # one line longer than a block: read on
            parts.append(data)
            continue
        parts.append(data[:k + 1])
        block = b"".join(parts)
        parts = [data[k + 1:]] if k + 1 < len(data) else []
        yield line, block, unreported
        unreported = 0
        line += block.count(b"\n")


def _txt_batch(block, path, first_line):
    """Whole lines -> one Batch, vectorized: the "\\n"s (and a "\\r" before each) are masked out."""
    b = _batch.from_lines(block)
    try:
        return _batch.validated(b)
    except NumbatokError:
        for i, line in enumerate(block.split(b"\n")):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise NumbatokError(
                    f"{path}:{first_line + i}: invalid UTF-8 (byte {e.start} of the line); convert the file "
                    "to UTF-8 first (e.g. iconv -f latin1 -t utf-8)") from None
        raise


def _jsonl_batch(block, path, first_line, field):
    """JSON lines -> one Batch (the kernel parser of `preprocess`); the first bad record stops the run."""
    def fail(i, problem):
        raise NumbatokError(f"{path}:{first_line + i}: {problem}")

    return _batch.Batch(*jsonl.documents(block, field, fail))


def _documents(paths, field, block_bytes, progress):
    """Batches of documents from every input in order, about block_bytes of text each."""
    for path in paths:
        kind = _input_kind(path)
        if path == "-":
            f, close = sys.stdin.buffer, False
        else:
            f, close = open(path, "rb"), True
        try:
            for first_line, block, nread in _line_blocks(f, block_bytes):
                if kind == _TXT:
                    yield _txt_batch(block, "<stdin>" if path == "-" else path, first_line), len(block)
                else:
                    yield _jsonl_batch(block, path, first_line, field), len(block)
                progress(nread)
        finally:
            if close:
                f.close()


def _merge(batches):
    if len(batches) == 1:
        return batches[0]
    data = np.concatenate([b.data for b in batches])
    offsets = [np.zeros(1, np.int64)]
    base = 0
    for b in batches:
        offsets.append(b.offsets[1:] + base)
        base += int(b.offsets[-1])
    return _batch.Batch(data, np.concatenate(offsets))


def _chunks(paths, field, block_bytes, progress):
    """Batches merged up to about block_bytes of text, so small files share one encode call."""
    pending, size = [], 0
    for b, nbytes in _documents(paths, field, block_bytes, progress):
        pending.append(b)
        size += nbytes
        if size >= block_bytes:
            yield _merge(pending), size
            pending, size = [], 0
    if pending:
        yield _merge(pending), size


def _host(a):
    return np.asarray(to_host(a))


def _write_npz(path, ids_file, n_ids, row_offsets):
    """`ids` streamed from a spill file into an uncompressed .npz (what np.savez writes), atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open("ids.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<i4")), "fortran_order": False,
                        "shape": (n_ids,)})
                ids_file.seek(0)
                shutil.copyfileobj(ids_file, f, 16 << 20)
            with zf.open("row_offsets.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(row_offsets, dtype="<i8"))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_output(path):
    """The folder `path` will be written in; fails before any work when it cannot be."""
    out_dir = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(out_dir):
        raise NumbatokError(f"{path}: the folder {out_dir} does not exist")
    if os.path.isdir(path):
        raise NumbatokError(f"{path}: is a folder; name the file to write")
    return out_dir


def cmd_encode(args):
    if args.batch_mb <= 0:
        raise NumbatokError(f"--batch-mb must be positive, got {args.batch_mb}")
    if args.inputs.count("-") > 1:
        raise NumbatokError("standard input (-) can be named only once")
    for p in args.inputs:  # fail before loading the tokenizer or reading anything
        _input_kind(p)
        if p != "-" and not os.path.isfile(p):
            raise NumbatokError(f"{p}: no such file" if not os.path.exists(p) else f"{p}: not a file")
    out_dir = _check_output(args.output)
    tok = _load(args.tokenizer, args.device)
    block_bytes = max(1, int(args.batch_mb * (1 << 20)))
    known = [os.path.getsize(p) for p in args.inputs if p != "-"]
    total = sum(known) if "-" not in args.inputs else None
    bar = None
    if not args.quiet and total is not None and total > PROGRESS_MIN_BYTES:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc="numbatok encode", file=sys.stderr,
                   dynamic_ncols=True)
    t0 = time.perf_counter()
    lengths = []
    n_tokens = 0
    text_bytes = 0
    with tempfile.TemporaryFile(dir=out_dir, prefix=".numbatok-ids-") as spill:
        try:
            for b, nbytes in _chunks(args.inputs, args.field, block_bytes,
                                     bar.update if bar is not None else (lambda n: None)):
                r = tok.encode_ragged(b, add_special_tokens=not args.no_special_tokens)
                ids = np.ascontiguousarray(_host(r.ids), dtype="<i4")
                spill.write(ids.tobytes())
                lengths.append(np.diff(_host(r.row_offsets)))
                n_tokens += int(ids.shape[0])
                text_bytes += nbytes
        finally:
            if bar is not None:
                bar.close()
        row_offsets = np.zeros(sum(len(x) for x in lengths) + 1, dtype=np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=row_offsets[1:])
        _write_npz(args.output, spill, n_tokens, row_offsets)
    secs = max(time.perf_counter() - t0, 1e-9)
    if not args.quiet:
        mb = text_bytes / 1e6
        print(f"numbatok encode: {len(row_offsets) - 1:,} documents, {n_tokens:,} tokens, {mb:,.2f} MB in "
              f"{secs:,.2f} s ({mb / secs:,.1f} MB/s) on {tok.device} -> {args.output}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------

def _read_npz(path):
    if not os.path.exists(path):
        raise NumbatokError(f"{path}: no such file")
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise NumbatokError(f"{path}: not an .npz file (a zip of .npy arrays, as numbatok encode writes)")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("ids", "row_offsets") if k not in z.files]
            if missing:
                raise NumbatokError(f"{path}: no {' or '.join(repr(k) for k in missing)} array (found: "
                                    f"{', '.join(z.files) or 'none'}); expected the .npz numbatok encode writes")
            ids, row_offsets = z["ids"], z["row_offsets"]
    except (ValueError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, NumbatokError):
            raise
        raise NumbatokError(f"{path}: not an .npz file of arrays ({e})") from None
    for name, a in (("ids", ids), ("row_offsets", row_offsets)):
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise NumbatokError(f"{path}: {name!r} must be a 1-D integer array, not {a.dtype} of shape {a.shape}")
    if (row_offsets.shape[0] < 1 or row_offsets[0] != 0 or row_offsets[-1] != ids.shape[0]
            or (np.diff(row_offsets) < 0).any()):
        raise NumbatokError(f"{path}: 'row_offsets' must start at 0, never decrease and end at len(ids) "
                            f"= {ids.shape[0]}")
    return ids, row_offsets.astype(np.int64, copy=False)


def cmd_decode(args):
    ids, row_offsets = _read_npz(args.input)
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        _check_output(args.output)
    tok = _load(args.tokenizer, "cpu")
    n_ids = max(tok.get_vocab().values(), default=-1) + 1
    bad = np.flatnonzero((ids < 0) | (ids >= n_ids))
    if bad.shape[0]:
        p = int(bad[0])
        raise NumbatokError(f"{args.input}: id {int(ids[p])} at position {p} is not one of this tokenizer's ids "
                            f"(0..{n_ids - 1}); were the ids made with another tokenizer?")
    if to_stdout:
        out = getattr(sys.stdout, "buffer", None)
        if out is None:  # a text stream without a byte layer (e.g. replaced in tests)
            out = _TextToBytes(sys.stdout)
        tmp = None
    else:
        tmp = f"{args.output}.tmp{os.getpid()}"
        out = open(tmp, "wb")
    n_docs = row_offsets.shape[0] - 1
    multiline = 0
    try:
        start = 0
        while start < n_docs:
            # as many rows as make about DECODE_CHUNK_TOKENS tokens (at least one)
            stop = int(np.searchsorted(row_offsets, row_offsets[start] + DECODE_CHUNK_TOKENS, side="right")) - 1
            stop = min(max(stop, start + 1), n_docs)
            offs = row_offsets[start:stop + 1]
            texts = tok.decode_ragged(ids[offs[0]:offs[-1]], offs - offs[0],
                                      skip_special_tokens=not args.keep_special_tokens)
            if args.jsonl:
                lines = [json.dumps({"text": t}, ensure_ascii=False) for t in texts]
            else:
                multiline += sum(1 for t in texts if "\n" in t or t.endswith("\r"))
                lines = texts
            out.write(("\n".join(lines) + "\n").encode("utf-8"))
            start = stop
        out.flush()
        if tmp is not None:
            out.close()
            os.replace(tmp, args.output)
            tmp = None
    finally:
        if tmp is not None:
            out.close()
            if os.path.exists(tmp):
                os.unlink(tmp)
    if multiline and not args.quiet:
        print(f"numbatok decode: warning: {multiline:,} of {n_docs:,} documents contain a line break, so the "
              "output has more lines than documents; pass --jsonl to write one JSON object per document",
              file=sys.stderr)
    return 0


class _TextToBytes:
    def __init__(self, stream):
        self._s = stream

    def write(self, b):
        self._s.write(b.decode("utf-8"))

    def flush(self):
        self._s.flush()


# ---------------------------------------------------------------------------------------------
# info, list
# ---------------------------------------------------------------------------------------------

def _describe(d):
    """A component's JSON as Type(option=value, ...); Sequences as Sequence[A(...), B(...)]."""
    if d is None:
        return "none"
    if not isinstance(d, dict):
        return repr(d)
    t = d.get("type", "?")
    for key in ("pretokenizers", "processors", "normalizers", "decoders"):
        if isinstance(d.get(key), list):
            return f"{t}[{', '.join(_describe(x) for x in d[key])}]"
    opts = []
    for k, v in d.items():
        if k == "type" or (isinstance(v, (dict, list)) and len(json.dumps(v)) > 60):
            continue
        opts.append(f"{k}={json.dumps(v, ensure_ascii=False)}")
    return f"{t}({', '.join(opts)})" if opts else t


def _n(count, noun):
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _template(items, tok):
    parts = []
    for it in items:
        if it[0] == "special":
            parts.extend(tok.id_to_token(i) or str(i) for i in it[1])
        else:
            parts.append("$A" if it[1] == 0 else "$B")
    return " ".join(parts)


def cmd_info(args):
    from .tokenizer import resolve_path

    path = resolve_path(args.tokenizer)
    with open(path, "rb") as f:
        text = f.read()
    try:
        raw = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NumbatokError(f"{path}: not a tokenizer.json: invalid JSON ({e})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise NumbatokError(f"{path}: not a tokenizer.json: expected an object with a 'model' key")
    error = None
    tok = None
    try:
        tok = _load(path, "cpu")
    except UnsupportedComponentError as e:
        error = e
    model = raw["model"]
    mtype = model.get("type") or ("BPE" if "merges" in model else "?")
    vocab = model.get("vocab")
    added = raw.get("added_tokens") or []
    special = [a for a in added if isinstance(a, dict) and a.get("special")]
    rows = [("tokenizer", args.tokenizer if os.path.abspath(args.tokenizer) == os.path.abspath(path)
             else f"{args.tokenizer} ({path})"),
            ("model", mtype)]
    if tok is not None:
        rows.append(("vocab size", f"{tok.vocab_size:,} ({tok.get_vocab_size(False):,} in the model, "
                                   f"{_n(len(added), 'added token')})"))
    elif vocab is not None:
        rows.append(("vocab size", f"{len(vocab):,} in the model, {_n(len(added), 'added token')}"))
    if "merges" in model:
        rows.append(("merges", f"{len(model['merges']):,}"))
    model_opts = {k: v for k, v in model.items() if k not in ("vocab", "merges", "type") and v not in (None, False, "")}
    if model_opts:
        rows.append(("model options", ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in model_opts.items())))
    rows.append(("normalizer", _describe(raw.get("normalizer"))))
    rows.append(("pre_tokenizer", _describe(raw.get("pre_tokenizer"))))
    pp = _describe(raw.get("post_processor"))
    if tok is not None:
        kinds = tok.spec.post_processor.kinds
        pp = f"{', '.join(kinds) or 'none'}: {_template(tok.spec.post_processor.single, tok)}   [{pp}]"
    rows.append(("post_processor", pp))
    rows.append(("decoder", _describe(raw.get("decoder"))))
    shown = ", ".join(f"{a.get('content')}={a.get('id')}" for a in special[:20])
    if len(special) > 20:
        shown += f", ... ({len(special) - 20:,} more)"
    rows.append(("added tokens", f"{len(added):,} ({len(special):,} special{': ' + shown if shown else ''})"))
    for key in ("truncation", "padding"):
        if raw.get(key) is not None:
            rows.append((key, _describe(raw[key])))
    if tok is not None:
        rows.append(("sha256", tok.sha256))
    rows.append(("supported", "yes" if error is None else f"no: {error}"))
    width = max(len(k) for k, _ in rows) + 1
    for k, v in rows:
        print(f"{k + ':':<{width}} {v}")
    sys.stdout.flush()
    if error is not None:
        _err(error)
        raise _Abort(2)
    return 0


def cmd_list(args):
    from .tokenizer import shipped_names

    for name in shipped_names():
        print(name)
    return 0


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="numbatok", description="Exact Hugging Face tokenizers as Numba kernels: encode, decode, inspect.",
        epilog="Run `numbatok COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"numbatok {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    tok_help = "a shipped name (see `numbatok list`), a tokenizer.json, or a folder holding one"
    p = sub.add_parser("encode", help="text files -> token ids in an .npz",
                       description="Encode documents to token ids: every INPUT in order, one row per document, "
                                   "written as ids (int32) and row_offsets (int64) in an .npz.",
                       epilog="*.txt and - (standard input): a document per line (a trailing \\r is dropped; a "
                              "blank line is an empty document). *.jsonl: a JSON object per line, the document "
                              "in --field (blank lines skipped).")
    p.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="*.txt, *.jsonl or - for standard input")
    p.add_argument("--output", "-o", required=True, metavar="OUT.npz", help="the .npz to write")
    p.add_argument("--field", default="text", help="the text field of .jsonl records (default: %(default)s)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: a CUDA GPU when usable, else the CPU (default)")
    p.add_argument("--no-special-tokens", action="store_true",
                   help="do not add the post-processor's special tokens (e.g. <s> ... </s>)")
    p.add_argument("--batch-mb", type=float, default=16.0,
                   help="MB of text per encode call; bounds memory (default: %(default)g)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary line")
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser("decode", help="token ids in an .npz -> text, a line per document",
                       description="Decode every row of an .npz written by `numbatok encode` to one line of text.")
    p.add_argument("--tokenizer", "-t", required=True, help=tok_help)
    p.add_argument("input", metavar="IN.npz", help="an .npz with ids and row_offsets")
    p.add_argument("--output", "-o", metavar="OUT", help="where to write (default: - for standard output)")
    p.add_argument("--keep-special-tokens", action="store_true", help="keep special tokens such as <s> in the text")
    p.add_argument("--jsonl", action="store_true",
                   help='write {"text": ...} per document, so documents with line breaks stay one line each')
    p.add_argument("--quiet", "-q", action="store_true", help="no warnings")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("info", help="a tokenizer's components, and whether numbatok runs it",
                       description="Print a tokenizer's components and whether numbatok supports it "
                                   "(exit status 2 when it does not).")
    p.add_argument("tokenizer", metavar="NAME_OR_PATH", help=tok_help)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("list", help="the tokenizers shipped with numbatok")
    p.set_defaults(func=cmd_list)

    try:
        from . import preprocess
    except ImportError:
        preprocess = None
    if preprocess is not None and hasattr(preprocess, "add_parser"):
        preprocess.add_parser(sub)
    return parser


def main(argv=None):
    """Runs the command line; returns the exit status (0 ok, 2 error, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors: argparse has printed its message
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except _Abort as e:
        return e.code
    except KeyboardInterrupt:
        print("numbatok: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `numbatok decode ... | head`: the reader left; stop quietly
        try:  # so that the interpreter's final flush of stdout does not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except NumbatokError as e:
        _err(e)
        return 2
    except OSError as e:
        _err(_os_error_text(e))
        return 2
