"""Numba set-up shared by every kernel module: where the JIT cache lives, and toolchain shims.

Nothing here touches a GPU. CUDA is imported only by `numbatok.backends.cuda`, on first use.
"""
import os
import tempfile

import numpy as np


def _ensure_cache_dir():
    # `cache=True` fails at import when the package directory is read-only (system installs,
    # containers) and no NUMBA_CACHE_DIR is set; fall back to a per-user temp directory.
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    probe = os.path.join(here, "__pycache__")
    try:
        os.makedirs(probe, exist_ok=True)
        if os.access(probe, os.W_OK):
            return
    except OSError:
        pass
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"numbatok-numba-cache-{os.getuid() if hasattr(os, 'getuid') else 'user'}")


def _numpy_shims():
    # numba-cuda 0.30.x registers an overload for np.row_stack, which numpy 2.5 removed: its first
    # CUDA compile then dies with AttributeError. np.vstack is what row_stack always was.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


_ensure_cache_dir()
_numpy_shims()

from numba import njit, prange  # noqa: E402
from numba.extending import register_jitable  # noqa: E402

# Helpers shared by the CPU drivers and the CUDA kernels are plain functions marked jitable.
jitable = register_jitable


def cpu_kernel(fn=None, *, parallel=False):
    """njit with the project's defaults (cached, no Python fallback)."""
    def wrap(f):
        return njit(cache=True, nogil=True, parallel=parallel, boundscheck=False)(f)
    return wrap(fn) if fn is not None else wrap


__all__ = ["jitable", "cpu_kernel", "prange", "njit"]
