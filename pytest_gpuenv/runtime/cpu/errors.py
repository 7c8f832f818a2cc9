"""Errors of the CPU executor: each a ``KernelLaunchError`` (exported from ``pytest_gpuenv.rtc``).

Every message names the kernel, the source file and line, the block and thread, and (for memory
errors) the argument or variable and the element index. None of them is sticky: the next launch works.
"""

from __future__ import annotations

from typing import Any, Optional

from pytest_gpuenv.runtime.errors import KernelLaunchError

__all__ = [
    "KernelAssertError", "KernelBarrierError", "KernelBarrierWarning", "KernelBoundsError", "KernelExitError", "KernelFaultError",
    "KernelProcessError", "KernelRaceError",
    "KernelStackOverflowError", "KernelUninitializedError", "KernelWarning", "KernelWarpError",
    "KernelWarpSyncError", "KernelWatchdogError",
]


class _CpuLaunchError(KernelLaunchError):
    __module__ = "pytest_gpuenv.rtc"

    def __init__(self, message: str, *, code: Optional[str] = None, file: Optional[str] = None,
                 line: Optional[int] = None, block: tuple[Any, ...] = (), thread: tuple[Any, ...] = ()) -> None:
        super().__init__(message, code=code, sticky=False)
        self.file = file
        self.line = line
        self.block = block
        self.thread = thread


class KernelRaceError(_CpuLaunchError):
    """Two threads of a block touched the same shared memory within one barrier interval, one writing."""


class KernelWarpSyncError(KernelRaceError):
    """Two lanes of one wavefront touched the same shared memory with no barrier or warp operation between.

    Correct only where a wavefront runs in lockstep (AMD GPUs); NVIDIA GPUs since Volta schedule threads
    independently. ``lockstep=True`` runs the kernel as AMD hardware does."""


class KernelBarrierError(_CpuLaunchError):
    """A ``__syncthreads`` that not every thread of the block reaches at the same call site."""


class KernelBoundsError(_CpuLaunchError):
    """A read or write outside every argument buffer and shared variable, or a write through ``const``."""


class KernelUninitializedError(_CpuLaunchError):
    """A read of shared memory that no thread of this block has written."""


class KernelAssertError(_CpuLaunchError):
    """A device ``assert`` failed, or ``__trap()`` was called."""


class KernelStackOverflowError(_CpuLaunchError):
    """A thread overflowed its stack (unbounded recursion, a huge local array)."""


class KernelWatchdogError(_CpuLaunchError):
    """The launch ran past the watchdog: blocks run one after another, so inter-block waits never end."""


class KernelWarpError(_CpuLaunchError):
    """A warp operation read a lane that is not active at that operation."""


class KernelFaultError(_CpuLaunchError):
    """The kernel faulted (a wild pointer in the fast mode, an integer division by zero)."""


class KernelExitError(_CpuLaunchError):
    """The kernel ended its process (``exit``, ``_exit``, ``quick_exit``): on a GPU the launch fails."""


class KernelProcessError(_CpuLaunchError):
    """The kernel called ``fork()`` or started a thread that outlived the launch."""


class KernelWarning(UserWarning):
    """Something that is legal but probably a portability bug (a shuffle offset >= warpSize)."""

    __module__ = "pytest_gpuenv.rtc"


class KernelBarrierWarning(KernelWarning):
    """Threads of a block returned before a ``__syncthreads`` that the others wait at (checked mode).

    The executor releases the barrier without them, as GPUs do: AMD hardware does not wait for wavefronts
    that have ended, and NVIDIA GPUs since Volta count exited threads as arrived. The HIP and CUDA
    programming guides leave it undefined; ``-W error::pytest_gpuenv.rtc.KernelBarrierWarning`` makes it a
    failure."""

    __module__ = "pytest_gpuenv.rtc"


for _cls in (KernelRaceError, KernelBarrierError, KernelBoundsError, KernelUninitializedError, KernelAssertError,
             KernelStackOverflowError, KernelWatchdogError, KernelWarpError, KernelWarpSyncError, KernelFaultError,
             KernelExitError, KernelProcessError):
    _cls.__module__ = "pytest_gpuenv.rtc"  # shown as pytest_gpuenv.rtc.KernelBoundsError, where it is exported
