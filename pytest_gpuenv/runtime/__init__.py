"""The GPU runtime layer: one private runtime object per backend and device.

``cuda`` (the CUDA driver API through cuda-python) and ``hip`` (the HIP runtime through hip-python)
have the same shape: select a device, load a code object, look up a function, launch it on a
stream, record and time events, synchronise. ``Kernel`` (pytest_gpuenv.rtc) and the timer's driver
backend (pytest_gpuenv.perf) both use it. Errors are ``KernelLaunchError``; an error that leaves the
context unusable is recorded in ``_sticky`` (which test poisoned which backend) and queried with
``poisoned()``. ``nvml`` (nvidia-ml-py, imported lazily) gives detection the NVIDIA device facts and
the timer the clocks, throttle reasons and processes of a GPU.

Importing this package imports no binding and starts nothing.
"""

from __future__ import annotations

from pytest_gpuenv.runtime._errors import KernelLaunchError
from pytest_gpuenv.runtime._sticky import Poison, current_test, poisoned, running

__all__ = ["KernelLaunchError", "Poison", "current_test", "poisoned", "running"]
