"""Loading code objects and launching them: the CUDA driver (cuda.bindings) and HIP (hip-python).

The two paths are the same shape: load the module on the device, get the function, launch with the
``void*[]`` of packed arguments on a stream, map every error code to KernelLaunchError with the
runtime's name and message. A sticky error (an illegal address, a trap) poisons the process's GPU
context; ``POISON`` records which test did it, so later tests say so instead of failing cryptically.

The bindings are imported inside the functions: importing this module starts nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

from pytest_gpuenv.rtc._args import PackedArgs
from pytest_gpuenv.rtc._errors import KernelLaunchError

#: errors after which the CUDA context (or HIP device) cannot be used again in this process
STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_TMA_FAILURE",
    "hipErrorIllegalAddress",
    "hipErrorLaunchFailure",
    "hipErrorAssert",
    "hipErrorIllegalState",
}


@dataclass
class Poison:
    """Who poisoned the GPU context of this process, and with what."""

    by: Optional[str] = None  # a test nodeid, or "<outside pytest>"
    code: Optional[str] = None
    backend: Optional[str] = None
    #: True when the fault was caught waiting for a hip_kernel launch (the culprit is known); False when
    #: a later call found the context already broken (by earlier GPU work, e.g. torch, in ``by`` or before)
    culprit: bool = True

    def reason(self) -> str:
        api = "CUDA context" if self.backend == "cuda" else "HIP device"
        who = f"poisoned by {self.by}" if self.culprit else f"found poisoned in {self.by} (by GPU work in or before it)"
        return (
            f"{api} {who} ({self.code}); every later GPU call in this process fails. "
            "Run kernels that may fault in a subprocess (pytester.runpytest_subprocess, or pytest-xdist "
            "with --max-worker-restart), or fix the fault first"
        )


POISON = Poison()
#: the nodeid of the test now running (set by the hip_kernel fixture)
CURRENT_TEST: list[Optional[str]] = [None]


def _fail(code: str, message: str, what: str) -> KernelLaunchError:
    sticky = code in STICKY
    if sticky and POISON.by is None:
        POISON.by = CURRENT_TEST[0] or "<outside pytest>"
        POISON.code = code
        POISON.backend = "rocm" if code.startswith("hip") else "cuda"
        POISON.culprit = what.startswith("kernel execution")
    return KernelLaunchError(f"{what}: {code}: {message}", code=code, sticky=sticky)


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


# ---------------------------------------------------------------------- NVIDIA: CUDA driver API
class CudaModule:
    backend = "cuda"

    def __init__(self, binary: bytes, name: str, device: int) -> None:
        from cuda.bindings import driver

        self.driver = driver
        self.device = device
        self._check(driver.cuInit(0), "cuInit")
        dev = self._check(driver.cuDeviceGet(device), f"cuDeviceGet({device})")
        self.ctx = self._check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        self._check(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.module = self._check(driver.cuModuleLoadData(binary), "cuModuleLoadData")
        self.func = self._check(driver.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name!r})")
        self._max_shared = 0

    def _check(self, result: Any, what: str) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            d = self.driver
            _, ename = d.cuGetErrorName(err)
            _, emsg = d.cuGetErrorString(err)
            raise _fail(_text(ename) or str(err), _text(emsg) or "", what)
        if isinstance(result, tuple):
            return result[1] if len(result) == 2 else result[1:]
        return None

    def launch(self, grid: tuple, block: tuple, args: PackedArgs, shared_mem: int, stream: Any) -> int:
        d = self.driver
        self._check(d.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        if shared_mem > 48 * 1024 and shared_mem > self._max_shared:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(d.cuFuncSetAttribute(self.func, attr, shared_mem), "cuFuncSetAttribute")
            self._max_shared = shared_mem
        h = stream_handle(stream, self.device)
        self._check(
            d.cuLaunchKernel(self.func, *grid, *block, shared_mem, d.CUstream(h), args.address, 0),
            "cuLaunchKernel",
        )
        return h

    def synchronize(self, stream: int) -> None:
        d = self.driver
        self._check(d.cuStreamSynchronize(d.CUstream(stream)), "kernel execution (cuStreamSynchronize)")

    def context_error(self) -> Optional[str]:
        """A sticky error already in the context (from any earlier work), or None."""
        d = self.driver
        err = d.cuCtxSynchronize()[0]
        if int(err) == 0:
            return None
        return _text(d.cuGetErrorName(err)[1])


# ---------------------------------------------------------------------- AMD: HIP module API
class HipModule:
    backend = "rocm"

    def __init__(self, binary: bytes, name: str, device: int) -> None:
        from hip import hip

        self.hip = hip
        self.device = device
        self._check(hip.hipSetDevice(device), f"hipSetDevice({device})")
        self.module = self.load_code(binary)
        self.func = self._check(hip.hipModuleGetFunction(self.module, name.encode()), f"hipModuleGetFunction({name!r})")

    def load_code(self, binary: bytes) -> Any:
        """hipModuleLoadData on a code object (an ELF from hiprtc or an offload bundle from hipcc)."""
        return self._check(self.hip.hipModuleLoadData(binary), "hipModuleLoadData")

    def _check(self, result: Any, what: str) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            code = getattr(err, "name", None) or str(err)
            msg = self.hip.hipGetErrorString(err)
            if isinstance(msg, tuple):
                msg = msg[-1]
            raise _fail(code, _text(msg) if _text(msg) != code else _HIP_MESSAGES.get(code, ""), what)
        if isinstance(result, tuple):
            return result[1] if len(result) == 2 else result[1:]
        return None

    def launch(self, grid: tuple, block: tuple, args: PackedArgs, shared_mem: int, stream: Any) -> int:
        h = stream_handle(stream, self.device)
        self._check(self.hip.hipSetDevice(self.device), "hipSetDevice")
        self._check(
            self.hip.hipModuleLaunchKernel(self.func, *grid, *block, shared_mem, h or None, args.address, None),
            "hipModuleLaunchKernel",
        )
        return h

    def synchronize(self, stream: int) -> None:
        self._check(self.hip.hipStreamSynchronize(stream or None), "kernel execution (hipStreamSynchronize)")

    def context_error(self) -> Optional[str]:
        err = self.hip.hipDeviceSynchronize()[0]
        return None if int(err) == 0 else getattr(err, "name", str(err))


_HIP_MESSAGES = {
    "hipErrorNoDevice": "no ROCm-capable device is detected",
    "hipErrorInvalidDevice": "invalid device ordinal",
    "hipErrorIllegalAddress": "an illegal memory access was encountered",
}


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return "" if v is None else str(v)


def load(backend: str, binary: bytes, name: str, device: int) -> Any:
    try:
        if backend == "cuda":
            return CudaModule(binary, name, device)
        return HipModule(binary, name, device)
    except KernelLaunchError:
        raise
    except ImportError as exc:
        pkg = "cuda-python (pip install cuda-python)" if backend == "cuda" else "hip-python (pip install hip-python)"
        raise KernelLaunchError(f"launching on {backend} requires {pkg}: {exc}") from None
    except Exception as exc:  # e.g. cuda.pathfinder's DynamicLibNotFoundError when libcuda.so is absent
        api = "CUDA driver (libcuda.so)" if backend == "cuda" else "HIP runtime (libamdhip64.so)"
        raise KernelLaunchError(f"launching on {backend}: the {api} could not be used: {exc}") from None
