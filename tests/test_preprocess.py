"""`numbatok preprocess`: shards read back by an independent .idx reader equal the reference's ids,
document by document, for any shard count; a killed run resumes byte-identical; bad records are
reported, never silently dropped."""
import argparse
import functools
import glob
import gzip
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
tokenizers = pytest.importorskip("tokenizers")

import conftest  # noqa: E402
from numbatok import datasets, preprocess  # noqa: E402
from numbatok.errors import NumbatokError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GPT2 = REPO / "vocab" / "gpt2" / "tokenizer.json"
CORPUS = Path(conftest.CORPUS)  # (NUMBATOK_CORPUS, as every other test reads it)
EOD = 50256


# ---- helpers -----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _load_gpt2_once(monkeypatch):
    """Every in-process run would load the same tokenizer again: load it once."""
    monkeypatch.setattr(preprocess, "load_tokenizer", _cached_load)


@functools.lru_cache(maxsize=None)
def _cached_load(spec, device):
    return _real_load(spec, device)


_real_load = preprocess.load_tokenizer


def cli(*argv):
    """Runs `numbatok preprocess ARGV` in this process, through its argument parser."""
    parser = argparse.ArgumentParser(prog="numbatok")
    preprocess.add_parser(parser.add_subparsers())
    args = parser.parse_args(["preprocess", "--tokenizer", str(GPT2), "--no-progress", *map(str, argv)])
    return args.func(args)


def read_megatron(prefix):
    """The documents of all shards, read with nothing but the format's description."""
    docs = []
    for idx_path in sorted(glob.glob(f"{prefix}_*-of-*.idx")):
        raw = Path(idx_path).read_bytes()
        assert raw[:9] == b"MMIDIDX\x00\x00"
        version, code, n_seq, n_doc = struct.unpack("<QBQQ", raw[9:34])
        assert (version, code, n_doc) == (1, 8, n_seq + 1)  # gpt2 has < 65,500 ids: uint16
        lengths = np.frombuffer(raw, "<i4", n_seq, 34)
        pointers = np.frombuffer(raw, "<i8", n_seq, 34 + 4 * n_seq)
        doc_idx = np.frombuffer(raw, "<i8", n_doc, 34 + 12 * n_seq)
        assert len(raw) == 34 + 20 * n_seq + 8
        assert doc_idx.tolist() == list(range(n_seq + 1))
        tokens = np.frombuffer(Path(idx_path[:-4] + ".bin").read_bytes(), "<u2")
        assert tokens.shape[0] == lengths.sum()
        for p, n in zip(pointers.tolist(), lengths.tolist()):
            docs.append(tokens[p // 2: p // 2 + n].tolist())
    return docs


def read_npy(prefix):
    docs = []
    for ids_path in sorted(glob.glob(f"{prefix}_*-of-*.ids.npy")):
        ids = np.load(ids_path)
        offsets = np.load(ids_path[: -len(".ids.npy")] + ".offsets.npy")
        assert offsets[0] == 0 and offsets[-1] == ids.shape[0]
        docs.extend(ids[a:z].tolist() for a, z in zip(offsets[:-1], offsets[1:]))
    return docs


def documents_of(path, field="text"):
    """The documents of one input, read the simple way (the rule of the module docstring)."""
    path = str(path)
    if path.endswith(".parquet"):
        return pq.read_table(path, columns=[field]).column(0).to_pylist()
    raw = Path(path).read_bytes()
    text = (gzip.decompress(raw) if path.endswith(".gz") else raw).decode("utf-8")
    lines = text.split("\n")
    if path.endswith((".jsonl", ".jsonl.gz")):
        return [json.loads(line)[field] for line in lines if line.strip()]
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


@pytest.fixture(scope="module")
def reference():
    tok = tokenizers.Tokenizer.from_file(str(GPT2))
    return lambda docs: [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Inputs of every kind: empty documents, a document far longer than a read chunk, non-ASCII."""
    d = tmp_path_factory.mktemp("inputs")
    paragraphs = [p for p in (REPO / "vocab" / "sample.txt").read_text("utf-8").split("\n") if p]
    extra = ["naïve café — 日本語のテキスト 🎉🎉", "tabs\tand  double  spaces ", "ünïcödé’s end.", "x"]
    lines = []
    for i, p in enumerate(paragraphs * 3 + extra):
        lines.append(p)
        if i % 5 == 0:
            lines.append("")
    (d / "a.txt").write_bytes(("\n".join(lines[:40]) + "\r\nwindows line\r\n\n" + "\n".join(lines[40:])).encode())
    huge = " ".join(paragraphs * 12)  # one ~100 KB document, many read chunks long
    (d / "b_huge.txt").write_text("first\n" + huge + "\nlast\n", "utf-8")
    records = [{"text": t, "id": i} for i, t in enumerate(lines[:50] + ["", "\u00e9\u0301", 'quote " \\ slash'])]
    (d / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "\n", "utf-8")
    (d / "d.txt.gz").write_bytes(gzip.compress("\n".join(lines[10:60]).encode(), mtime=0))
    (d / "e.jsonl.gz").write_bytes(gzip.compress(
        "".join(json.dumps({"body": t}, ensure_ascii=False) + "\n" for t in lines[5:30]).encode(), mtime=0))
    table = pa.table({"text": lines[:70], "n": list(range(70))})
    pq.write_table(table, d / "f.parquet", row_group_size=16)
    (d / "g_empty.txt").write_bytes(b"")
    return d


def mixed_inputs(d):
    """(argv for --input, expected documents). e.jsonl.gz uses another field, so it runs on its own."""
    names = ["a.txt", "b_huge.txt", "c.jsonl", "d.txt.gz", "f.parquet", "g_empty.txt"]
    docs = [doc for name in names for doc in documents_of(d / name)]
    return [d / n for n in names], docs


# ---- parity, for any number of shards ----------------------------------------------------------

@pytest.mark.parametrize("num_shards", [1, 3, 7])
def test_shards_equal_reference(mixed, reference, tmp_path, num_shards):
    inputs, docs = mixed_inputs(mixed)
    prefix = tmp_path / "out" / "corpus"
    assert cli("--input", *inputs, "--output-prefix", prefix, "--num-shards", num_shards,
               "--chunk-mb", 0.01) == 0
    assert len(glob.glob(f"{prefix}_*-of-{num_shards:05d}.idx")) == num_shards
    expected = reference(docs)
    assert read_megatron(prefix) == expected
    assert [a.tolist() for a in datasets.open_tokens(prefix)] == expected
    manifests = datasets.open_tokens(prefix).manifests()
    assert sum(m["documents"] for m in manifests) == len(docs)
    assert sum(m["tokens"] for m in manifests) == sum(map(len, expected))


def test_each_shard_alone_and_npy(mixed, reference, tmp_path):
    """Shards run as separate jobs (--shard-index) make the same set; the npy format holds the same ids."""
    inputs, docs = mixed_inputs(mixed)
    for i in (2, 0, 1):
        cli("--input", *inputs, "--output-prefix", tmp_path / "npy", "--format", "npy",
            "--num-shards", 3, "--shard-index", i, "--chunk-mb", 0.01)
    expected = reference(docs)
    assert read_npy(tmp_path / "npy") == expected
    assert [a.tolist() for a in datasets.open_tokens(tmp_path / "npy")] == expected
    ids = np.load(tmp_path / "npy_00001-of-00003.ids.npy", mmap_mode="r")
    assert ids.dtype == np.uint16


def test_gzip_jsonl_field_and_eod(mixed, reference, tmp_path):
    cli("--input", mixed / "e.jsonl.gz", "--field", "body", "--append-eod", "--output-prefix", tmp_path / "e",
        "--num-shards", 2)
    expected = [ids + [EOD] for ids in reference(documents_of(mixed / "e.jsonl.gz", "body"))]
    assert read_megatron(tmp_path / "e") == expected
    manifests = datasets.open_tokens(tmp_path / "e").manifests()
    assert [m["documents"] for m in manifests] == [len(expected), 0]  # gzip: read whole by one shard


def test_multilingual_corpus(reference, tmp_path):
    files = [CORPUS / "udhr_multilingual.jsonl", CORPUS / "code_and_markup.jsonl"]
    if not all(f.exists() for f in files):
        pytest.skip("shared corpus not present")
    small = tmp_path / "udhr.jsonl"  # a slice keeps the test fast
    small.write_text("".join(files[0].read_text("utf-8").splitlines(True)[:25]), "utf-8")
    code = tmp_path / "code.jsonl"
    code.write_text("".join(files[1].read_text("utf-8").splitlines(True)[:25]), "utf-8")
    cli("--input", small, code, "--output-prefix", tmp_path / "m", "--num-shards", 5, "--chunk-mb", 0.05)
    assert read_megatron(tmp_path / "m") == reference(documents_of(small) + documents_of(code))


# ---- the sharding rule, without a tokenizer ------------------------------------------------------

def _read_all(paths, num_shards, chunk):
    pieces, total = preprocess.plan(paths)
    bad = preprocess.BadRecords(skip=False)
    out = []
    for i in range(num_shards):
        assigned = preprocess.assign(pieces, total, num_shards, i)
        for texts, _ in preprocess.read_documents(assigned, "text", chunk, bad, []):
            out.extend(texts.to_pylist())
    return out


def test_every_document_once_for_any_split(tmp_path):
    lines = ["", "a", "", "", "longer line " * 9, "é", "\r", "z" * 40, ""]
    (tmp_path / "x.txt").write_bytes("\n".join(lines).encode())
    (tmp_path / "y.txt").write_bytes(("\n".join(lines) + "\n").encode())
    (tmp_path / "z.txt").write_bytes(b"\n")
    (tmp_path / "w.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    paths = [str(tmp_path / n) for n in ("x.txt", "y.txt", "z.txt", "w.jsonl")]
    expected = [doc for p in paths for doc in documents_of(p)]
    for chunk in (1, 3, 7, 64, 1 << 20):
        for n in range(1, 40, 3):
            assert _read_all(paths, n, chunk) == expected, (chunk, n)


def test_a_shard_reads_only_near_its_range(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"".join(b"document %d\n" % i for i in range(20000)))
    pieces, total = preprocess.plan([str(tmp_path / "big.txt")])
    log = []
    assigned = preprocess.assign(pieces, total, 4, 2)
    list(preprocess.read_documents(assigned, "text", 4096, preprocess.BadRecords(skip=False), log))
    start, end = log[0]["bytes"]
    assert total // 2 <= start < total // 2 + 20 and 3 * total // 4 <= end < 3 * total // 4 + 20


def test_slurm_environment():
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert preprocess.shards_from_env(None, None, env) == (4, 2)
    assert preprocess.shards_from_env(8, 7, env) == (8, 7)  # flags win
    assert preprocess.shards_from_env(None, None, {}) == (1, None)  # every shard, in turn
    stepped = {"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
               "SLURM_ARRAY_TASK_COUNT": "4"}
    assert preprocess.shards_from_env(None, None, stepped) == (4, 3)
    with pytest.raises(NumbatokError, match="outside"):
        preprocess.shards_from_env(None, None, dict(env, SLURM_ARRAY_TASK_ID="9"))
    assert preprocess.shard_stem("p", 3, 7) == "p_00003-of-00007"


# ---- bad records -------------------------------------------------------------------------------------

def test_bad_records_fail_with_file_and_line(tmp_path):
    good = "".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(5000))
    (tmp_path / "bad.jsonl").write_text(good + '{"text": oops}\n' + good)
    with pytest.raises(NumbatokError, match=r"bad\.jsonl: line 5001: invalid JSON"):
        cli("--input", tmp_path / "bad.jsonl", "--output-prefix", tmp_path / "o", "--num-shards", 3,
            "--shard-index", 1, "--chunk-mb", 0.01)
    assert not glob.glob(f"{tmp_path}/o_*")  # nothing left behind, not even temporary files


def test_bad_records_skipped_and_counted(tmp_path, reference, capsys):
    (tmp_path / "r.jsonl").write_bytes(b"\n".join([
        b'{"text": "fine"}', b'{"text": broken', b'{"body": "no text field"}', b'{"text": null}',
        b'{"text": "caf\xe9 latin-1"}', b'{"text": "lone \\ud800 surrogate"}', b'["not", "an object"]',
        b'{"text": "also fine"}', b""]))
    (tmp_path / "s.txt").write_bytes(b"ok line\nbad \xff byte\n\nlast")
    pq.write_table(pa.table({"text": ["p1", None, "p3"]}), tmp_path / "t.parquet")
    args = ["--input", tmp_path / "r.jsonl", tmp_path / "s.txt", tmp_path / "t.parquet",
            "--output-prefix", tmp_path / "o"]
    with pytest.raises(NumbatokError, match=r"r\.jsonl: line 2: invalid JSON"):
        cli(*args)
    assert cli(*args, "--on-bad-record", "skip") == 0
    out, err = capsys.readouterr()
    assert "8 bad records skipped" in out
    for where in ("r.jsonl: line 2: invalid JSON", "r.jsonl: line 3: no field 'text'",
                  "r.jsonl: line 4: field 'text' is NoneType", "r.jsonl: line 5: invalid UTF-8",
                  "r.jsonl: line 6: invalid UTF-8", "r.jsonl: line 7: expected a JSON object, got list",
                  "s.txt: line 2: invalid UTF-8",
                  "t.parquet: row 1: column 'text' is null"):
        assert where in err
    assert read_megatron(tmp_path / "o") == reference(["fine", "also fine", "ok line", "", "last", "p1", "p3"])
    manifest = json.loads((tmp_path / "o_00000-of-00001.json").read_text())
    assert manifest["bad_records"]["count"] == 8
    assert manifest["bad_records"]["first"][0] == {"path": str(tmp_path / "r.jsonl"), "where": "line 2",
                                                   "reason": "invalid JSON: Expecting value at column 10"}


def test_timings_say_where_each_shard_went(mixed, tmp_path, capsys):
    """--timings: a line per shard naming every stage; the stages fit inside the shard's own time."""
    inputs, _ = mixed_inputs(mixed)
    assert cli("--input", *inputs, "--output-prefix", tmp_path / "t", "--num-shards", 2, "--chunk-mb", 0.01,
               "--timings") == 0
    stages = ["waiting for input", "encoding", "writing", "commit", "manifest"]
    lines = [line for line in capsys.readouterr().out.splitlines() if "waiting for input" in line]
    pattern = ", ".join(f"{k} [0-9]+[.][0-9]{{3}} s" for k in stages)
    assert len(lines) == 2 and all(re.search(f": {pattern}$", line) for line in lines)
    tok, sha = preprocess.load_tokenizer(str(GPT2), "cpu")
    opts = preprocess.Options(inputs=[str(p) for p in inputs], output_prefix=str(tmp_path / "u"), num_shards=2,
                              chunk_bytes=10_000, progress=False)
    with open(os.devnull, "w") as quiet:
        summaries = preprocess.preprocess(tok, sha, opts, out=quiet)
    for summary in summaries:
        seconds = summary["stage_seconds"]
        assert list(seconds) == stages and min(seconds.values()) >= 0
        assert sum(seconds.values()) <= summary["seconds"]


def test_unknown_inputs_are_errors(tmp_path):
    with pytest.raises(NumbatokError, match="matches no file"):
        cli("--input", tmp_path / "*.jsonl", "--output-prefix", tmp_path / "o")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(NumbatokError, match="unknown input type"):
        cli("--input", tmp_path / "x.csv", "--output-prefix", tmp_path / "o")
    (tmp_path / "x.txt").write_text("a\n")
    with pytest.raises(NumbatokError, match="--eod-token"):
        cli("--input", tmp_path / "x.txt", "--output-prefix", tmp_path / "o", "--append-eod", "--eod-token", "<eos>")
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b'{"text": "a"}\n' * 1000)[:-20])
    with pytest.raises(NumbatokError, match="cut.jsonl.gz: not a readable gzip file"):
        cli("--input", tmp_path / "cut.jsonl.gz", "--output-prefix", tmp_path / "o")
    (tmp_path / "fake.parquet").write_bytes(b"not parquet")
    with pytest.raises(NumbatokError, match="fake.parquet: not a readable parquet file"):
        cli("--input", tmp_path / "fake.parquet", "--output-prefix", tmp_path / "o")
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "other.parquet")
    with pytest.raises(NumbatokError, match="has no column 'text'"):
        cli("--input", tmp_path / "other.parquet", "--output-prefix", tmp_path / "o")


# ---- crash safety ----------------------------------------------------------------------------------

def _preprocess_cmd(*argv):
    return [sys.executable, "-m", "numbatok", "preprocess", "--tokenizer", str(GPT2), *map(str, argv)]


def test_kill_and_resume_is_byte_identical(mixed, tmp_path):
    inputs, _ = mixed_inputs(mixed)
    args = ["--input", *inputs, "--num-shards", 7, "--chunk-mb", 0.002, "--no-progress"]
    cli(*args[:-1], "--output-prefix", tmp_path / "clean" / "c")

    prefix = tmp_path / "killed" / "c"
    proc = subprocess.Popen(_preprocess_cmd(*args, "--output-prefix", prefix), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not glob.glob(f"{prefix}_*.json") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)  # mid-run: the first shard is done, the next is being written
    proc.wait()
    assert glob.glob(f"{prefix}_*.json"), proc.stderr.read().decode()

    done = subprocess.run(_preprocess_cmd(*args, "--output-prefix", prefix, "--resume"), cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "already finished; skipped" in done.stdout
    clean = sorted(os.listdir(tmp_path / "clean"))
    assert sorted(os.listdir(tmp_path / "killed")) == clean  # no temporary files left over
    for name in clean:
        assert (tmp_path / "killed" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


def test_resume_redoes_what_does_not_match(mixed, tmp_path, capsys):
    args = ["--input", mixed / "a.txt", mixed / "c.jsonl", "--num-shards", 3, "--output-prefix", tmp_path / "o"]
    cli(*args)
    first = {p: Path(p).read_bytes() for p in glob.glob(f"{tmp_path}/o_*")}
    capsys.readouterr()
    cli(*args, "--resume")
    assert capsys.readouterr().out.count("already finished") == 3
    Path(f"{tmp_path}/o_00001-of-00003.bin").write_bytes(b"truncated")
    cli(*args, "--resume")
    out = capsys.readouterr().out
    assert out.count("already finished") == 2 and "o_00001-of-00003: " in out
    assert {p: Path(p).read_bytes() for p in glob.glob(f"{tmp_path}/o_*")} == first
    cli(*args, "--resume", "--append-eod")  # another run: nothing of the old one is reused
    assert "already finished" not in capsys.readouterr().out


def test_open_tokens_refuses_incomplete_sets(mixed, tmp_path):
    cli("--input", mixed / "a.txt", "--num-shards", 3, "--output-prefix", tmp_path / "o")
    os.remove(tmp_path / "o_00001-of-00003.json")
    with pytest.raises(NumbatokError, match=r"shards \[1\] of 3 are missing or unfinished"):
        datasets.open_tokens(tmp_path / "o")


def test_read_idx_matches_the_writer(tmp_path):
    lengths = np.array([3, 0, 5], dtype=np.int64)
    raw = preprocess.megatron_index(lengths, np.dtype(np.uint16))
    assert raw[:34] == b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 3, 4)
    (tmp_path / "x.idx").write_bytes(raw)
    idx = datasets.read_idx(tmp_path / "x.idx")
    assert idx.dtype == np.uint16
    assert idx.sequence_lengths.tolist() == [3, 0, 5]
    assert idx.sequence_pointers.tolist() == [0, 6, 6]
    assert idx.document_indices.tolist() == [0, 1, 2, 3]


def test_cuda_device_path_under_the_simulator(tmp_path, reference):
    """--device cuda reaches the GPU pipeline (simulated here) and its ids come back to the writer."""
    docs = ["Hello world", "", "naïve café 🎉"]
    (tmp_path / "a.txt").write_text("\n".join(docs) + "\n", "utf-8")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run(_preprocess_cmd("--input", tmp_path / "a.txt", "--output-prefix", tmp_path / "o",
                                          "--device", "cuda", "--no-progress"),
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert read_megatron(tmp_path / "o") == reference(docs)
