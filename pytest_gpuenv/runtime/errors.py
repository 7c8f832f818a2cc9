"""The one error of the runtime layer (re-exported as ``pytest_gpuenv.rtc.KernelLaunchError``)."""

from __future__ import annotations

from typing import Optional


class KernelLaunchError(RuntimeError):
    """The runtime refused to load or launch a kernel, or the kernel faulted on the GPU.

    ``code`` is the runtime's error name (``CUDA_ERROR_ILLEGAL_ADDRESS``, ``hipErrorNoDevice``);
    ``sticky`` is True when the error leaves the process's GPU context unusable.
    """

    __module__ = "pytest_gpuenv.rtc"

    def __init__(self, message: str, *, code: Optional[str] = None, sticky: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.sticky = sticky
