"""Drivers that run the pipeline steps over a whole batch: `cpu` (njit, prange) and `cuda` (kernels)."""
import os
import sys

import numpy as np


def simulator_enabled():
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def gpu_available():
    """True when a real CUDA GPU can be used. Never true under the simulator: device='auto' must not
    route real work to it (ask for device='cuda' explicitly to test the simulated path)."""
    if simulator_enabled():
        return False
    if sys.platform.startswith("linux") and not any(
            os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg", "/proc/driver/nvidia")):
        return False  # no NVIDIA driver (native, container or WSL2): skip importing numba.cuda (~0.4 s)
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:  # no numba-cuda, no driver, broken toolkit: all mean "no GPU" here
        return False


def to_host(a):
    """Any array as numpy: a device array copied to the host (see `cuda.to_host`), the rest as it is."""
    if a is None or isinstance(a, np.ndarray) or not hasattr(a, "get"):
        return a
    from . import cuda
    return cuda.to_host(a)
