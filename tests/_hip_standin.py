"""A stand-in for hip-python's ``hip.hip`` module, at the binding boundary only.

It answers with hip-python's own enums (``hip.hip.hipError_t``, ``hipFunction_attribute``) where
hip-python is installed, so ``runtime/hip.py`` sees exactly the values the real binding gives; the
calls a test needs to steer are plain attributes (``launch``, ``func_attr``, ``sync``). ``abort_on_launch``
makes the launch call ``os.abort()``, as ROCr's ``VMFaultHandler`` does on a GPU memory fault
(ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp: ``std::abort()`` unless a system event
handler returns HSA_STATUS_SUCCESS).

``stored`` is clr's process-wide GPU error of HIP 7 (``amd::Device::gpu_error_``, set by ``callbackQueue``
after a queue error): while it is set every call that starts with ``HIP_INIT_API`` answers it
(hipamd/src/hip_internal.hpp), ``hipRuntimeGetVersion`` (``HIP_INIT_API_NO_RETURN``, hip_context.cpp) does
not. ``fault`` is the code the stream's next synchronize stores and answers (a kernel that faulted).
"""

from __future__ import annotations

import os
from typing import Any

from hip import hip as _real


class HipStandin:
    hipError_t = _real.hipError_t
    hipFunction_attribute = _real.hipFunction_attribute

    def __init__(self, launch: str = "hipSuccess", func_attr: tuple[str, int] = ("hipSuccess", 1024),
                 sync: str = "hipSuccess", abort_on_launch: bool = False, version: int = 70051831,
                 stored: str = "", fault: str = "") -> None:
        self.launch, self.func_attr, self.sync, self.abort_on_launch = launch, func_attr, sync, abort_on_launch
        self.version, self.stored, self.fault = version, stored, fault
        self.calls: list[str] = []

    def _err(self, name: str) -> Any:
        return getattr(_real.hipError_t, self.stored or name)

    def hipSetDevice(self, device: int) -> tuple:
        return (self._err("hipSuccess"),)

    def hipGetDevice(self) -> tuple:
        self.calls.append("hipGetDevice")
        return (self._err("hipSuccess"), 0)

    def hipRuntimeGetVersion(self) -> tuple:
        return (_real.hipError_t.hipSuccess, self.version)

    def hipMalloc(self, nbytes: int) -> tuple:
        return (self._err("hipErrorInvalidValue" if nbytes < 0 else "hipSuccess"), 0x1000)

    def hipGetErrorString(self, err: Any) -> tuple:
        return (_real.hipError_t.hipSuccess, err.name.encode())

    def hipModuleLaunchKernel(self, *args: Any) -> tuple:
        self.calls.append("hipModuleLaunchKernel")
        if self.abort_on_launch:
            os.abort()
        return (self._err(self.launch),)

    def hipFuncGetAttribute(self, attrib: Any, func: Any) -> tuple:
        self.calls.append(f"hipFuncGetAttribute({attrib.name})")
        return (self._err(self.func_attr[0]), self.func_attr[1])

    def hipStreamSynchronize(self, stream: Any) -> tuple:
        if self.fault:
            self.stored, self.fault = self.fault, ""
        return (self._err(self.sync),)
