"""`numbatok` command line: encode gives the reference's ids, decode round-trips, info describes the
components, and every user error is one `numbatok: error: ...` line with exit status 2."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import numbatok
import pytest

tokenizers = pytest.importorskip("tokenizers")

from numbatok import cli  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VOCAB = REPO / "vocab"

DOCS_TXT = ["Hello world", "", "  leading spaces and trailing  ", "naïve café 日本語 🎉", "tabs\tand \rinner CR",
            "last line, no final newline"]
DOCS_JSONL = ["json document one", "two\nlines", "<s> looks special", "x" * 300]


@pytest.fixture(scope="module")
def ref():
    return {name: tokenizers.Tokenizer.from_file(str(VOCAB / name / "tokenizer.json"))
            for name in ("gpt2", "roberta-base")}


@pytest.fixture
def files(tmp_path):
    txt = tmp_path / "docs.txt"
    # CRLF endings on some lines (the "\r" before "\n" is not part of the document), no final newline
    txt.write_bytes("\r\n".join(DOCS_TXT[:3]).encode() + b"\n" + "\n".join(DOCS_TXT[3:]).encode())
    jsonl = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": t, "id": i}) for i, t in enumerate(DOCS_JSONL)]
    lines.insert(2, "")  # blank lines are not records
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return txt, jsonl


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def load(path):
    with np.load(path) as z:
        assert z["ids"].dtype == np.int32 and z["row_offsets"].dtype == np.int64
        return z["ids"], z["row_offsets"]


def rows(ids, row_offsets):
    return [ids[a:b].tolist() for a, b in zip(row_offsets[:-1], row_offsets[1:])]


def assert_one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numbatok: error: "), err
    assert "Traceback" not in err


# ---- encode -------------------------------------------------------------------------------------

def test_encode_txt_and_jsonl_gpt2_matches_reference(capsys, tmp_path, files, ref):
    txt, jsonl = files
    out = tmp_path / "out.npz"
    code, stdout, err = run(capsys, "encode", "--tokenizer", "gpt2", txt, jsonl, "--output", out)
    assert code == 0, err
    assert stdout == ""
    assert "numbatok encode: 10 documents" in err and "MB/s" in err
    ids, row_offsets = load(out)
    want = [e.ids for e in ref["gpt2"].encode_batch(DOCS_TXT + DOCS_JSONL, add_special_tokens=False)]
    assert rows(ids, row_offsets) == want

    # tiny batches: many encode calls, concatenated into the same file
    small = tmp_path / "small.npz"
    code, _, err = run(capsys, "encode", "-t", "gpt2", txt, jsonl, "-o", small, "--batch-mb", "0.00005", "-q")
    assert code == 0 and err == ""
    ids2, row_offsets2 = load(small)
    assert np.array_equal(ids, ids2) and np.array_equal(row_offsets, row_offsets2)


def test_encode_roberta_adds_special_tokens_by_default(capsys, tmp_path, files, ref, monkeypatch):
    txt, jsonl = files
    out = tmp_path / "out.npz"
    monkeypatch.setattr(cli, "PROGRESS_MIN_BYTES", 0)  # show the bar even for this small input
    code, _, err = run(capsys, "encode", "-t", VOCAB / "roberta-base", jsonl, txt, "-o", out)
    assert code == 0, err
    assert "%|" in err  # tqdm's bar
    ids, row_offsets = load(out)
    want = [e.ids for e in ref["roberta-base"].encode_batch(DOCS_JSONL + DOCS_TXT)]
    assert rows(ids, row_offsets) == want
    assert ids[0] == 0 and ids[row_offsets[1] - 1] == 2  # <s> ... </s>

    rec = tmp_path / "other_field.jsonl"
    rec.write_text("".join(json.dumps({"body": t}) + "\n" for t in DOCS_TXT), encoding="utf-8")
    code, _, err = run(capsys, "encode", "-t", "roberta-base", rec, "--field", "body", "--no-special-tokens",
                       "-o", out, "-q")
    assert code == 0, err
    ids, row_offsets = load(out)
    assert rows(ids, row_offsets) == [
        e.ids for e in ref["roberta-base"].encode_batch(DOCS_TXT, add_special_tokens=False)]


def test_empty_and_blank_inputs(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n\r\n")  # two empty documents
    out = tmp_path / "out.npz"
    code, _, err = run(capsys, "encode", "-t", "gpt2", empty, blank, "-o", out, "-q")
    assert code == 0, err
    ids, row_offsets = load(out)
    assert ids.shape == (0,) and row_offsets.tolist() == [0, 0, 0]


# ---- decode -------------------------------------------------------------------------------------

def test_decode_round_trip(capsys, tmp_path, files, ref):
    txt, jsonl = files
    enc = tmp_path / "rt.npz"
    assert run(capsys, "encode", "-t", "roberta-base", txt, jsonl, "-o", enc, "-q")[0] == 0

    # what the reference decodes (it drops the special token "<s>" that DOCS_JSONL[2] spells out)
    docs = DOCS_TXT + DOCS_JSONL
    want = ref["roberta-base"].decode_batch([e.ids for e in ref["roberta-base"].encode_batch(docs)])
    assert want == [d.replace("<s>", "") for d in docs]

    code, stdout, err = run(capsys, "decode", "-t", "roberta-base", enc, "--jsonl")
    assert code == 0, err
    assert [json.loads(line)["text"] for line in stdout.splitlines()] == want

    plain = tmp_path / "plain.txt"
    code, stdout, err = run(capsys, "decode", "-t", "roberta-base", enc, "--output", plain)
    assert code == 0 and stdout == ""
    assert "1 of 10 documents contain a line break" in err  # "two\nlines"
    assert plain.read_bytes().decode("utf-8") == "\n".join(want) + "\n"

    code, stdout, _ = run(capsys, "decode", "-t", "roberta-base", enc, "-o", "-", "--keep-special-tokens")
    assert code == 0
    assert stdout.splitlines()[0] == "<s>Hello world</s>"


# ---- info, list ---------------------------------------------------------------------------------

def test_info_and_list(capsys, tmp_path):
    code, out, err = run(capsys, "info", "roberta-base")
    assert code == 0, err
    fields = dict(line.split(":", 1) for line in out.splitlines())
    assert fields["model"].strip() == "BPE"
    assert fields["merges"].strip() == "50,000"
    assert fields["vocab size"].strip().startswith("50,265")
    assert fields["post_processor"].strip().startswith("RobertaProcessing: <s> $A </s>")
    assert fields["decoder"].strip().startswith("ByteLevel")
    assert "<mask>=50264" in fields["added tokens"]
    assert fields["supported"].strip() == "yes"

    code, out, _ = run(capsys, "list")
    assert code == 0 and out.split() == numbatok.shipped_names() and "gpt2" in out.split()

    d = json.loads((VOCAB / "gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    d["pre_tokenizer"] = {"type": "UnicodeScripts"}
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps(d), encoding="utf-8")
    code, out, err = run(capsys, "info", tmp_path)
    assert code == 2
    assert "pre_tokenizer:  UnicodeScripts" in out and "supported:      no:" in out
    assert_one_error_line(err)
    assert "UnicodeScripts" in err


# ---- errors -------------------------------------------------------------------------------------

def test_errors_are_one_line_with_exit_2(capsys, tmp_path, files):
    txt, _ = files
    out = tmp_path / "out.npz"
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "fine"}\n\n{"text": "broken"\n', encoding="utf-8")
    no_field = tmp_path / "nofield.jsonl"
    no_field.write_text('{"body": "x"}\n', encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    not_npz = tmp_path / "ids.npz"
    not_npz.write_text("not a zip")
    cases = [
        (["encode", "-t", "gpt2", tmp_path / "missing.txt", "-o", out], "missing.txt: no such file"),
        (["encode", "-t", "gpt2", bad_json, "-o", out], "bad.jsonl:3: invalid JSON"),
        (["encode", "-t", "gpt2", no_field, "-o", out], "nofield.jsonl:1: no field 'text'"),
        (["encode", "-t", "gpt2", latin1, "-o", out], "latin1.txt:2: invalid UTF-8"),
        (["encode", "-t", "no-such-tokenizer", txt, "-o", out], "'no-such-tokenizer' is neither a shipped"),
        (["encode", "-t", "gpt2", tmp_path / "docs.csv", "-o", out], "unknown input type"),
        (["encode", "-t", "gpt2", txt, "-o", tmp_path / "nodir" / "out.npz"], "does not exist"),
        (["decode", "-t", "gpt2", tmp_path / "missing.npz"], "missing.npz: no such file"),
        (["decode", "-t", "gpt2", not_npz], "not an .npz file"),
        (["info", "no-such-tokenizer"], "'no-such-tokenizer' is neither a shipped"),
    ]
    for argv, message in cases:
        code, _, err = run(capsys, *argv)
        assert code == 2, (argv, err)
        assert_one_error_line(err)
        assert message in err, (argv, err)
    assert not out.exists()


def test_decode_rejects_foreign_ids(capsys, tmp_path):
    path = tmp_path / "ids.npz"
    np.savez(path, ids=np.array([31414, 99999], np.int32), row_offsets=np.array([0, 2], np.int64))
    code, _, err = run(capsys, "decode", "-t", "gpt2", path)
    assert code == 2
    assert_one_error_line(err)
    assert "id 99999 at position 1" in err


def test_usage_errors_and_interrupt(capsys, tmp_path, files, monkeypatch):
    assert run(capsys, "encode", "-t", "gpt2", files[0])[0] == 2  # no --output: argparse's usage error
    assert run(capsys, "--help")[0] == 0
    assert run(capsys)[0] == 2  # no command

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_load", interrupted)
    code, _, err = run(capsys, "encode", "-t", "gpt2", files[0], "-o", tmp_path / "o.npz")
    assert code == 130 and "Traceback" not in err


# ---- as a program -------------------------------------------------------------------------------

def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_python_m_numbatok_reads_stdin(tmp_path, ref):
    out = tmp_path / "stdin.npz"
    text = "first line\r\nsecond line\n\nfourth, after a blank one\n"
    p = subprocess.run([sys.executable, "-m", "numbatok", "encode", "--tokenizer", "gpt2", "-", "--output", str(out)],
                       input=text.encode(), capture_output=True, env=_env(), cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert b"numbatok encode: 4 documents" in p.stderr
    docs = ["first line", "second line", "", "fourth, after a blank one"]
    ids, row_offsets = load(out)
    assert rows(ids, row_offsets) == [e.ids for e in ref["gpt2"].encode_batch(docs, add_special_tokens=False)]

    p = subprocess.run([sys.executable, "-m", "numbatok", "decode", "-t", "gpt2", str(tmp_path / "nope.npz")],
                       capture_output=True, env=_env(), cwd=tmp_path, timeout=300)
    assert p.returncode == 2
    assert p.stderr.decode().strip().splitlines() == [f"numbatok: error: {tmp_path / 'nope.npz'}: no such file"]
