"""Ray Data integration: actors on a local Ray (CPU backend) give the ids of direct encoding."""
import os
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
tokenizers = pytest.importorskip("tokenizers")

from numbatok.integrations.ray import TokenizeBatch, tokenize_dataset  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GPT2 = str(REPO / "vocab" / "gpt2" / "tokenizer.json")


def texts():
    paragraphs = [p for p in (REPO / "vocab" / "sample.txt").read_text("utf-8").split("\n") if p]
    return (paragraphs + ["", "naïve café — 日本語 🎉", " leading space", "x"]) * 25


def reference(docs):
    tok = tokenizers.Tokenizer.from_file(GPT2)
    return [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]


def test_tokenize_batch_without_ray():
    docs = texts()[:40]
    batch = pa.table({"n": np.arange(len(docs)), "text": pa.array(docs, pa.large_string())})
    out = TokenizeBatch(GPT2, device="cpu")(batch)
    assert out.column_names == ["n", "text", "ids", "length"]
    assert out.schema.field("ids").type == pa.list_(pa.int32())
    assert out.column("ids").to_pylist() == reference(docs)
    assert out.column("length").to_pylist() == [len(x) for x in reference(docs)]
    only = TokenizeBatch(GPT2, "body", device="cpu", keep_columns=False)(pa.table({"body": docs}))
    assert only.column_names == ["ids", "length"]


def test_fractional_gpus_reach_map_batches():
    """The arguments that pack several actors on a GPU are passed through as Ray expects them."""
    ray_data = pytest.importorskip("ray.data")

    class Recorder:
        def map_batches(self, fn, **kwargs):
            self.fn, self.kwargs = fn, kwargs
            return self

    ds = tokenize_dataset(Recorder(), "gpt2", num_gpus=0.25, concurrency=8, batch_size=1024)
    assert ds.fn is TokenizeBatch
    assert ds.kwargs["num_gpus"] == 0.25 and ds.kwargs["batch_format"] == "pyarrow"
    assert isinstance(ds.kwargs["compute"], ray_data.ActorPoolStrategy)
    assert ds.kwargs["fn_constructor_args"] == ("gpt2", "text")


def test_ray_data_equals_direct_encoding():
    ray = pytest.importorskip("ray")
    docs = texts()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}})
    try:
        ds = ray.data.from_arrow(pa.table({"n": np.arange(len(docs)), "text": docs}))
        ds = tokenize_dataset(ds, GPT2, batch_size=64, concurrency=1, device="cpu")
        rows = sorted(ds.take_all(), key=lambda r: r["n"])
    finally:
        ray.shutdown()
    assert [list(r["ids"]) for r in rows] == reference(docs)
    assert [r["length"] for r in rows] == [len(x) for x in reference(docs)]
