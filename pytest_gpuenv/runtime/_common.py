"""What the CUDA and HIP runtimes share: the error mapping, stream handles, the loaded-function record.

``launch_error`` turns a runtime's error code into the one ``KernelLaunchError`` (and records a sticky
one in ``runtime.sticky``); ``binding_error`` says what is missing when the binding or its library cannot be
used at all. ``stream_handle`` accepts what a caller may pass as a stream (None: torch's current
stream when torch is imported and initialised, else the default stream). Nothing here imports torch
or a binding.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime.errors import KernelLaunchError


@dataclass
class Function:
    """A kernel looked up in a loaded code object (the module is kept so it stays loaded)."""

    handle: Any
    module: Any
    name: str
    #: the dynamic shared memory the function was last allowed (CUDA asks for an opt-in above 48 KiB)
    max_shared: int = 0


def launch_error(backend: str, code: str, message: str, what: str, sticky: Optional[bool] = None) -> KernelLaunchError:
    """The error for ``what`` (the call that failed) answered with ``code``; a sticky code is recorded.

    A sticky code seen while waiting for a kernel (``what`` starts with "kernel execution") names the
    running test as the culprit; seen by any other call it only says where the broken context was found.
    ``sticky`` overrides the code's class where the caller knows better (a launch clr refused before it
    ran answers hipErrorLaunchFailure, which is sticky when a kernel fails).
    """
    sticky = _sticky.is_sticky(code) if sticky is None else sticky
    if sticky:
        _sticky.record(backend, code, culprit=what.startswith("kernel execution"))
    return KernelLaunchError(f"{what}: {code}: {message}", code=code, sticky=sticky)


def cooperative_too_large(backend: str, code: str, what: str, device: int, func: Function, grid: tuple[int, int, int],
                          block: tuple[int, int, int], shared_mem: int, limit: str, still: str) -> KernelLaunchError:
    """The error for a cooperative launch the runtime refused because the grid does not fit on the device at
    once (nothing ran): ``limit``, the blocks the device holds, explained; ``still``, what stays usable."""
    blocks, threads = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
    why = (f"grid {grid[0]}x{grid[1]}x{grid[2]} has {blocks} blocks of {threads} threads, more than device {device} "
           f"holds at once for a cooperative launch of kernel {func.name!r} with {shared_mem} bytes of dynamic shared "
           f"memory: the limit is {limit} blocks; nothing ran, the {still} is still usable")
    return launch_error(backend, code, why, what, sticky=False)


def binding_error(backend: str, exc: BaseException) -> KernelLaunchError:
    """The error when the binding (cuda-python, hip-python) or the library under it is unusable."""
    if isinstance(exc, ImportError):
        pkg = "cuda-python (pip install cuda-python)" if backend == "cuda" else "hip-python (pip install hip-python)"
        return KernelLaunchError(f"launching on {backend} requires {pkg}: {exc}")
    # e.g. cuda.pathfinder's DynamicLibNotFoundError when libcuda.so is absent
    api = "CUDA driver (libcuda.so)" if backend == "cuda" else "HIP runtime (libamdhip64.so)"
    return KernelLaunchError(f"launching on {backend}: the {api} could not be used: {exc}")


def text(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace")
    return "" if v is None else str(v)


def unpack(result: Any) -> Any:
    """The values after the error code of a binding's ``(err, *values)``: None, one value, or a tuple."""
    if not isinstance(result, tuple) or len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def torch_stream(device: int) -> Optional[int]:
    """torch's current stream on ``device`` when torch is already imported and initialised there."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        return int(torch.cuda.current_stream(device).cuda_stream)
    except Exception:
        return None


def stream_handle(stream: Any, device: int) -> int:
    """The raw handle of ``stream``: None, an int, a torch.cuda.Stream, a cuda.core Stream or ``__cuda_stream__``."""
    if stream is None:
        s = torch_stream(device)
        return 0 if s is None else s
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "handle"):  # torch.cuda.Stream, cuda.core Stream
        h = getattr(stream, attr, None)
        if h is not None:
            return int(h)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(f"stream must be an int handle, a torch.cuda.Stream or None, got {stream!r}") from None
