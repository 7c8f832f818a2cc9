"""Compiled HIP kernels: one ``.hip`` source built with hiprtc/hipcc (AMD) or NVRTC/nvcc (NVIDIA).

Importing this package imports no GPU binding, torch or numpy, and starts no runtime.
"""

from __future__ import annotations

from pytest_gpuenv.rtc._cli import compile_command
from pytest_gpuenv.rtc.compilers import DEFAULT_ARCHS
from pytest_gpuenv.rtc.errors import CacheDirError, KernelCompileError, KernelLaunchError
from pytest_gpuenv.rtc.kernel import Kernel, compile_kernel
from pytest_gpuenv.rtc.module import Module, compile_module
from pytest_gpuenv.rtc.source import Param
from pytest_gpuenv.runtime.cpu.errors import (
    KernelAssertError,
    KernelBarrierError,
    KernelBarrierWarning,
    KernelBoundsError,
    KernelExitError,
    KernelFaultError,
    KernelProcessError,
    KernelRaceError,
    KernelStackOverflowError,
    KernelUninitializedError,
    KernelWarning,
    KernelWarpError,
    KernelWarpSyncError,
    KernelWatchdogError,
)

__all__ = [
    "DEFAULT_ARCHS",
    "CacheDirError",
    "Kernel",
    "KernelCompileError",
    "KernelLaunchError",
    "KernelAssertError",
    "KernelBarrierError",
    "KernelBarrierWarning",
    "KernelBoundsError",
    "KernelExitError",
    "KernelFaultError",
    "KernelProcessError",
    "KernelRaceError",
    "KernelStackOverflowError",
    "KernelUninitializedError",
    "KernelWarning",
    "KernelWarpError",
    "KernelWarpSyncError",
    "KernelWatchdogError",
    "Module",
    "Param",
    "compile_command",
    "compile_kernel",
    "compile_module",
]
