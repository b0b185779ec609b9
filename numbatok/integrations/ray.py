"""Ray Data: tokenize a dataset's text column with a pool of actors, several per GPU.

    import ray
    from numbatok.integrations.ray import tokenize_dataset

    ds = ray.data.read_parquet("s3://bucket/corpus/")
    ds = tokenize_dataset(ds, "gpt2", num_gpus=0.25, concurrency=8)   # 4 actors per GPU, 2 GPUs
    ds.write_parquet("s3://bucket/tokens/")

Why actors: loading a tokenizer (and compiling its kernels) costs seconds, so each actor loads it
once and then encodes batch after batch. Why fractional GPUs: one encode leaves a GPU idle while
the actor reads and writes Arrow data, so a few actors share one GPU to keep it busy. Batches are
Arrow tables: the text column goes to the tokenizer without a copy (a single-chunk column), and the
ids come back as a list<int32> column whose values are the tokenizer's own output buffer.
Ray itself is imported only by `tokenize_dataset`; `TokenizeBatch` needs nothing but pyarrow.
"""
import os

import numpy as np

from ..errors import NumbatokError
from ..preprocess import host_array


class TokenizeBatch:
    """The callable class for `ds.map_batches(TokenizeBatch, batch_format="pyarrow", ...)`.

    Adds `ids_column` (list<int32>: the token ids of each row) and `length_column` (int32) to each
    batch; `keep_columns=False` returns only those two.
    """

    def __init__(self, tokenizer, column="text", *, device="auto", add_special_tokens=False,
                 ids_column="ids", length_column="length", keep_columns=True):
        import numbatok

        if isinstance(tokenizer, (str, os.PathLike)):  # loaded here, in the actor: it picks its own device
            tokenizer = numbatok.Tokenizer.from_pretrained(tokenizer, device=device)
        self.tokenizer = tokenizer
        self.column = column
        self.add_special_tokens = add_special_tokens
        self.ids_column = ids_column
        self.length_column = length_column
        self.keep_columns = keep_columns

    def __call__(self, batch):
        import pyarrow as pa

        if not isinstance(batch, pa.Table):
            raise NumbatokError(f"TokenizeBatch takes pyarrow tables, not {type(batch).__name__}: "
                                "call map_batches(..., batch_format='pyarrow')")
        if self.column not in batch.column_names:
            raise NumbatokError(f"batch has no column {self.column!r} (it has {batch.column_names}); "
                                "pass column=... to name the text column")
        texts = batch.column(self.column)
        r = self.tokenizer.encode_ragged(texts, add_special_tokens=self.add_special_tokens)
        ids = pa.array(host_array(r.ids).astype(np.int32, copy=False))
        offsets = host_array(r.row_offsets)
        if offsets[-1] < 2 ** 31:
            lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), ids)
        else:
            lists = pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64, copy=False)), ids)
        lengths = pa.array(np.diff(offsets).astype(np.int32))
        if not self.keep_columns:
            return pa.table({self.ids_column: lists, self.length_column: lengths})
        return batch.append_column(self.ids_column, lists).append_column(self.length_column, lengths)


def tokenize_dataset(ds, tokenizer, *, column="text", batch_size=4096, num_gpus=None, concurrency=None,
                     device="auto", add_special_tokens=False, ids_column="ids", length_column="length",
                     keep_columns=True, **map_batches_kwargs):
    """`ds` with token ids added, computed by a pool of `TokenizeBatch` actors.

    `tokenizer` is a shipped name or a path every worker can read (each actor loads its own copy).
    `num_gpus=0.25` packs four actors on each GPU; `concurrency` is the pool size (an int, or a
    (min, max) pair for an autoscaling pool). Other keyword arguments go to `ds.map_batches`.
    """
    try:
        import ray.data
    except ImportError:
        raise ImportError("numbatok.integrations.ray needs Ray Data: pip install 'numbatok[ray]' "
                          "(or pip install 'ray[data]')") from None
    if concurrency is not None:
        size = (dict(min_size=concurrency[0], max_size=concurrency[1]) if isinstance(concurrency, tuple)
                else dict(size=concurrency))
        map_batches_kwargs.setdefault("compute", ray.data.ActorPoolStrategy(**size))
    if num_gpus is not None:
        map_batches_kwargs["num_gpus"] = num_gpus
    return ds.map_batches(
        TokenizeBatch,
        fn_constructor_args=(tokenizer, column),
        fn_constructor_kwargs=dict(device=device, add_special_tokens=add_special_tokens, ids_column=ids_column,
                                   length_column=length_column, keep_columns=keep_columns),
        batch_size=batch_size, batch_format="pyarrow", zero_copy_batch=True, **map_batches_kwargs)
