"""The CUDA launch path without a GPU: under the CUDA simulator (small batches, tiny blocks so rows
and words cross block boundaries), and every kernel compiled to PTX for sm_90.

Both run in subprocesses: the simulator must be switched on before numba is imported, and PTX
compilation must run without it.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

pytest.importorskip("numba.cuda")

SIM_SCRIPT = textwrap.dedent(r'''
    import json, sys, warnings
    warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
    import numpy as np
    import numbatok
    from numbatok.backends import cuda as bc
    from tokenizers import Tokenizer
    bc.THREADS = 3
    bc.SEG = 5  # rows cut every few bytes: the segment -> row mapping runs on every document
    docs = json.loads(sys.argv[1])
    fields = ("ids", "tokens", "offsets", "type_ids", "special_tokens_mask", "word_ids")
    for name in ("gpt2", "roberta-base", "o200k_base"):
        tok = numbatok.Tokenizer.from_pretrained(name, device="cuda")
        ref = Tokenizer.from_file(f"vocab/{name}/tokenizer.json")
        for i, (a, b) in enumerate(zip(tok.encode_batch(docs), ref.encode_batch(docs))):
            for f in fields:
                if getattr(a, f) != getattr(b, f):
                    print(f"MISMATCH {name} doc {i} {f}: {getattr(a, f)} vs {getattr(b, f)}")
                    sys.exit(1)
        r = tok.encode_ragged(docs, add_special_tokens=False)
        cpu = numbatok.Tokenizer.from_pretrained(name, device="cpu").encode_ragged(docs, add_special_tokens=False)
        assert np.array_equal(r.ids, cpu.ids) and np.array_equal(r.row_offsets, cpu.row_offsets)
    # every word's hash equal: the byte check finds the "collisions" and no word shares tokens
    real_hash, bc.word_hash = bc.word_hash, lambda *a: np.uint64(7)
    r = numbatok.Tokenizer.from_pretrained("gpt2", device="cuda").encode_ragged(docs, add_special_tokens=False)
    cpu = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu").encode_ragged(docs, add_special_tokens=False)
    assert np.array_equal(r.ids, cpu.ids) and np.array_equal(r.row_offsets, cpu.row_offsets)
    # distinct hashes that all start at one slot of the word table: its probing, the same output, and
    # repeated words still share their model run (fewer words through the model than in the batch)
    bc.word_hash = lambda *a: real_hash(*a) >> np.uint64(44) << np.uint64(44)
    real_launch, launched = bc._launch, {}
    def launch(k, n, *a):
        launched[getattr(k, "py_func", k).__name__] = n
        real_launch(k, n, *a)
    bc._launch = launch
    r = numbatok.Tokenizer.from_pretrained("gpt2", device="cuda").encode_ragged(docs * 2, add_special_tokens=False)
    bc._launch, bc.word_hash = real_launch, real_hash
    assert launched["encode_words_kernel"] <= launched["claim_words_kernel"] // 2, launched
    cpu2 = numbatok.Tokenizer.from_pretrained("gpt2", device="cpu").encode_ragged(docs * 2, add_special_tokens=False)
    assert np.array_equal(r.ids, cpu2.ids) and np.array_equal(r.row_offsets, cpu2.row_offsets)
    # BERT: normalizer, WordPiece, pairs, truncation with overflow, padding, and __call__ arrays
    tok = numbatok.Tokenizer.from_pretrained("bert-base-uncased", device="cuda")
    ref = Tokenizer.from_file("vocab/bert-base-uncased/tokenizer.json")
    pairs = [(d, docs[-1 - i]) for i, d in enumerate(docs)]
    for t in (tok, ref):
        t.enable_truncation(9, stride=2, strategy="longest_first")
        t.enable_padding(pad_id=0, pad_token="[PAD]")
    def flat(e):
        return [getattr(e, f) for f in fields] + [[flat(o) for o in e.overflowing]]
    assert [flat(e) for e in tok.encode_batch(pairs)] == [flat(e) for e in ref.encode_batch(pairs)]
    tok.no_truncation(), tok.no_padding(), ref.no_truncation(), ref.no_padding()
    out = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, truncation="longest_first", max_length=12,
              return_offsets_mapping=True)
    ref.enable_truncation(12, strategy="longest_first")
    want = ref.encode_batch(pairs)
    width = max(len(e.ids) for e in want)
    assert out["input_ids"].tolist() == [e.ids + [0] * (width - len(e.ids)) for e in want]
    assert out["token_type_ids"].tolist() == [e.type_ids + [0] * (width - len(e.ids)) for e in want]
    # a tiny gpu_memory_budget: rows in groups of ~20 bytes, run one after another and joined, the same output
    from numbatok.batch import to_batch
    for name in ("gpt2", "bert-base-uncased"):
        whole = numbatok.Tokenizer.from_pretrained(name, device="cuda")
        parts = numbatok.Tokenizer.from_pretrained(name, device="cuda")
        parts.gpu_memory_budget = 20 * bc.work_per_byte(parts, True)
        assert len(parts._row_groups([to_batch(docs)], True)) > 3
        a, b = whole.encode_ragged(docs, return_offsets=True), parts.encode_ragged(docs, return_offsets=True)
        for f in ("ids", "row_offsets", "offsets", "type_ids", "special_tokens_mask", "word_ids"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (name, f)
        kw = dict(padding=True, truncation=True, max_length=7, return_offsets_mapping=True)
        a, b = whole(docs, docs[::-1], **kw), parts(docs, docs[::-1], **kw)
        assert all(np.array_equal(a[k], b[k]) for k in a), name
        a, b = whole.encode_batch(docs), parts.encode_batch(docs)
        assert [(e.ids, e.offsets) for e in a] == [(e.ids, e.offsets) for e in b]
    print("simulator ok", len(docs))
''')

SIM_DOCS = ["Hello world, it's me!  \t x", "", " ", "\u00e9\u4e00 x<|endoftext|>y", "  <mask> hi", " \tx",
            "a" * 70 + " " + "b" * 65, "\U0001F468\u200d\U0001F469 ok\r\n", "naïve café 123 ½",
            "すべての人間は生まれながらにして自由でありかつ尊厳と権利とについて平等である"]  # (a 115-byte word: cut pieces)


def test_cuda_launch_path_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT)
    import json
    p = subprocess.run([sys.executable, "-c", SIM_SCRIPT, json.dumps(SIM_DOCS)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "simulator ok" in p.stdout


def test_every_kernel_compiles_to_ptx_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ptx_check.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("PTX for sm_90") >= 5
