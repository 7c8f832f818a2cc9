"""The GPU runtime layer: one private runtime object per backend and device.

``cuda`` (the CUDA driver API through cuda-python) and ``hip`` (the HIP runtime through hip-python)
have the same shape: select a device, load a code object, look up a function, launch it on a
stream, allocate and fill memory, record and time events, synchronise, describe the device.
``get(backend, device)`` gives the one object per backend ("cuda" or "rocm") and device of this
process; ``Kernel`` (pytest_gpuenv.rtc) and the timer's driver backend (pytest_gpuenv.perf) both
use it. Errors are ``KernelLaunchError`` (``_common.launch_error`` maps a runtime's error code); an
error that leaves the context unusable is recorded in ``runtime.sticky`` (which test poisoned which backend)
and queried with ``poisoned()``. ``nvml`` (nvidia-ml-py, imported lazily) gives detection the NVIDIA
device facts and the timer the clocks, throttle reasons and processes of a GPU.

Importing this package imports no binding and starts nothing.
"""

from __future__ import annotations

from typing import Any

from pytest_gpuenv.runtime.errors import KernelLaunchError
from pytest_gpuenv.runtime.sticky import Poison, current_test, poisoned, running

__all__ = ["KernelLaunchError", "Poison", "current_test", "get", "poisoned", "running"]

_RUNTIMES: dict[tuple[str, int], Any] = {}


def get(backend: str, device: int) -> Any:
    """The ``CudaRuntime`` ("cuda") or ``HipRuntime`` ("rocm") of ``device``, made on first use.

    KernelLaunchError when the binding is not installed, its library cannot be loaded, or the runtime
    refuses the device (nothing is cached then: a later call tries again).
    """
    key = (backend, device)
    rt = _RUNTIMES.get(key)
    if rt is not None:
        return rt
    from pytest_gpuenv.runtime._common import binding_error

    try:
        if backend == "cuda":
            from pytest_gpuenv.runtime.cuda import CudaRuntime

            rt = CudaRuntime(device)
        elif backend == "rocm":
            from pytest_gpuenv.runtime.hip import HipRuntime

            rt = HipRuntime(device)
        else:
            raise ValueError(f"unknown GPU backend {backend!r}: expected 'cuda' or 'rocm'")
    except (KernelLaunchError, ValueError):
        raise
    except Exception as exc:  # ImportError, or e.g. cuda.pathfinder's DynamicLibNotFoundError
        raise binding_error(backend, exc) from None
    _RUNTIMES[key] = rt
    return rt
