"""A stand-in for hip-python's ``hip.hip`` module, at the binding boundary only.

It answers with hip-python's own enums (``hip.hip.hipError_t``, ``hipFunction_attribute``) where
hip-python is installed, so ``runtime/hip.py`` sees exactly the values the real binding gives; the
calls a test needs to steer are plain attributes (``launch``, ``func_attr``, ``sync``). ``abort_on_launch``
makes the launch call ``os.abort()``, as ROCr's ``VMFaultHandler`` does on a GPU memory fault
(ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp: ``std::abort()`` unless a system event
handler returns HSA_STATUS_SUCCESS).
"""

from __future__ import annotations

import os
from typing import Any

from hip import hip as _real


class HipStandin:
    hipError_t = _real.hipError_t
    hipFunction_attribute = _real.hipFunction_attribute

    def __init__(self, launch: str = "hipSuccess", func_attr: tuple[str, int] = ("hipSuccess", 1024),
                 sync: str = "hipSuccess", abort_on_launch: bool = False) -> None:
        self.launch, self.func_attr, self.sync, self.abort_on_launch = launch, func_attr, sync, abort_on_launch
        self.calls: list[str] = []

    def _err(self, name: str) -> Any:
        return getattr(_real.hipError_t, name)

    def hipSetDevice(self, device: int) -> tuple:
        return (self._err("hipSuccess"),)

    def hipGetErrorString(self, err: Any) -> tuple:
        return (self._err("hipSuccess"), err.name.encode())

    def hipModuleLaunchKernel(self, *args: Any) -> tuple:
        self.calls.append("hipModuleLaunchKernel")
        if self.abort_on_launch:
            os.abort()
        return (self._err(self.launch),)

    def hipFuncGetAttribute(self, attrib: Any, func: Any) -> tuple:
        self.calls.append(f"hipFuncGetAttribute({attrib.name})")
        return (self._err(self.func_attr[0]), self.func_attr[1])

    def hipStreamSynchronize(self, stream: Any) -> tuple:
        return (self._err(self.sync),)
