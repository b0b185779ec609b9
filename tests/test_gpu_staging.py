"""The GPU's pinned staging buffer (`backends.cuda.to_device`) without a GPU: CuPy is replaced by a
stand-in whose copies from host memory, like CuPy 14's `ndarray.set` from pinned memory, only
happen when the stream is synchronized."""
import sys
import types

import numpy as np
import pytest

pytest.importorskip("numba.cuda")


class FakeStream:
    def __init__(self):
        self.pending = []

    def synchronize(self):
        for dst, src in self.pending:
            dst[...] = src  # the copy reads the host buffer now, not when it was asked for
        self.pending.clear()


class FakeArray:
    def __init__(self, shape, dtype, stream):
        self.a = np.zeros(shape, dtype)
        self.stream = stream

    def set(self, host):
        assert host.shape == self.a.shape and host.dtype == self.a.dtype
        self.stream.pending.append((self.a, host))


@pytest.fixture
def fake_cupy(monkeypatch):
    stream = FakeStream()
    cupy = types.ModuleType("cupy")
    cupy.empty = lambda shape, dtype: FakeArray(shape, dtype, stream)
    cupy.asarray = lambda a: types.SimpleNamespace(a=np.array(a), flags=types.SimpleNamespace(writeable=True))
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: stream,
                                      runtime=types.SimpleNamespace(CUDARuntimeError=RuntimeError))
    cupyx = types.ModuleType("cupyx")
    cupyx.blocks = []
    cupyx.refuse = False

    def empty_pinned(n, dtype):
        if cupyx.refuse:
            raise RuntimeError("cudaErrorMemoryAllocation")
        cupyx.blocks.append(n)
        return np.empty(n, dtype)
    cupyx.empty_pinned = empty_pinned
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    from numbatok.backends import cuda as bc
    monkeypatch.setattr(bc, "SIMULATOR", False)
    monkeypatch.setattr(bc, "_STAGING", bc._Staging())
    return bc, stream, cupyx


def test_staged_copies_one_after_another(fake_cupy):
    bc, stream, cupyx = fake_cupy
    rng = np.random.default_rng(0)
    text = rng.integers(0, 256, 3_000_001, dtype=np.uint8)
    offsets = np.sort(rng.integers(0, text.shape[0], 200_001)).astype(np.int64)  # 1.6 MB: staged too
    small = np.arange(1000, dtype=np.int64)
    d_text, d_off, d_small = bc.to_device(text), bc.to_device(offsets), bc.to_device(small)
    stream.synchronize()
    assert np.array_equal(d_text.a, text) and np.array_equal(d_off.a, offsets)
    assert np.array_equal(d_small.a, small)
    assert cupyx.blocks == [1 << 22]  # one buffer, the next power of two, reused for the offsets


def test_read_only_input_and_refused_pinned_memory_take_cupys_copy(fake_cupy):
    bc, stream, cupyx = fake_cupy
    text = np.frombuffer(bytes(range(256)) * 8192, np.uint8)  # read-only, 2 MB
    assert np.array_equal(bc.to_device(text).a, text) and cupyx.blocks == []
    cupyx.refuse = True
    writable = text.copy()
    assert np.array_equal(bc.to_device(writable).a, writable) and not stream.pending
