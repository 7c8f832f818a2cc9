"""Sticky GPU errors: which test left which backend's context unusable in this process.

A sticky error (an illegal address, a trap) makes every later call on that context fail. The runtime
records the first one per backend with the test that was running (``running(nodeid)`` brackets a
test's GPU use); the plugin asks ``poisoned()`` to skip later GPU tests with a reason naming the
culprit instead of failing them cryptically.

Where a fault kills the process instead (ROCm before 7, or with core dumps enabled: ROCr's
``VMFaultHandler`` and clr's queue callback call ``abort()``), nothing here survives; the runtime calls
``before_launch`` before each launch so that a hook set by the plugin (``set_launch_hook``) can record
the running test on disk first.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, NamedTuple, Optional

#: errors after which the CUDA context (or HIP device) cannot be used again in this process
STICKY = frozenset({
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
    # sticky when a kernel failed; the same code answered by the launch call itself is clr refusing the
    # launch before it ran (runtime/hip.py classifies that one as not sticky)
    "hipErrorLaunchFailure",
    "hipErrorAssert",
    "hipErrorIllegalState",
})

#: the codes clr's stored GPU error can come back as, from HIP 7.0: ``callbackQueue`` stores
#: ``ConvertHSAErrorIntoCLError(status)`` in ``amd::Device::gpu_error_`` and every API that starts with
#: ``HIP_INIT_API`` then returns ``ConvertCLErrorIntoHIPError(GetGPUError())`` (ROCm/rocm-systems 01280b9
#: projects/clr rocclr/device/rocm/rocdevice.cpp ``ConvertHSAErrorIntoCLError``, ``callbackQueue``;
#: hipamd/src/hip_internal.hpp ``ConvertCLErrorIntoHIPError``, ``HIP_INIT_API``). ROCm/clr f9f995c (Oct 2024,
#: ROCm 6.3) has no stored error: a queue error aborts. Which HSA status gives which code:
#: memory fault / aperture violation / invalid allocation -> hipErrorIllegalAddress; exception, packet
#: format, illegal instruction -> hipErrorLaunchFailure; invalid argument / incompatible arguments ->
#: hipErrorInvalidValue; invalid code object -> hipErrorInvalidSource; invalid ISA ->
#: hipErrorInvalidKernelFile; out of resources, invalid dispatch parameters, a plain HSA_STATUS_ERROR and
#: anything else -> hipErrorUnknown.
STORED_FROM = 7
STORED = frozenset({"hipErrorIllegalAddress", "hipErrorLaunchFailure", "hipErrorInvalidValue", "hipErrorInvalidSource",
                    "hipErrorInvalidKernelFile", "hipErrorUnknown"})


def stored_codes(hip_major: Optional[int]) -> frozenset[str]:
    """The codes a HIP runtime of ``hip_major`` may answer from its stored GPU error (None: unknown, as 7)."""
    return STORED if hip_major is None or hip_major >= STORED_FROM else frozenset()


class Poison(NamedTuple):
    """Who poisoned a backend's GPU context in this process (``backend``: "cuda" or "rocm"), with what
    (``code``), and ``by`` which test (a nodeid, or "<outside pytest>"). ``culprit``: True when the fault was
    caught waiting for a kernel launch (the culprit is known); False when a later call found the context
    already broken (by earlier GPU work, e.g. torch, in ``by`` or before)."""

    backend: str
    code: str
    by: str
    culprit: bool = True
    #: the test that launched the last kernel before the error was found (None where unknown)
    launched: Optional[str] = None

    def reason(self) -> str:
        api = "CUDA context" if self.backend == "cuda" else "HIP device"
        if self.culprit:
            who = f"poisoned by {self.by}"
        elif self.launched and self.launched != self.by:
            who = f"poisoned by {self.launched} (its kernel's error surfaced in {self.by})"
        else:
            who = f"found poisoned in {self.by} (by GPU work in or before it)"
        return (
            f"{api} {who} ({self.code}); every later GPU call in this process fails. "
            "Run kernels that may fault in a subprocess (pytester.runpytest_subprocess, or pytest-xdist "
            "with --max-worker-restart), or fix the fault first"
        )


_state: dict[str, Optional[str]] = {"test": None, "launched": None}
_poisons: dict[str, Poison] = {}
_launch_hook: list[Callable[[str], None]] = []


def set_launch_hook(hook: Optional[Callable[[str], None]]) -> None:
    """Call ``hook(backend)`` before each launch that may abort the process (None: no hook)."""
    _launch_hook[:] = [hook] if hook is not None else []


def before_launch(backend: str) -> None:
    """Run the launch hook; a hook that cannot write its record does not stop the launch."""
    _state["launched"] = _state["test"] or "<outside pytest>"
    for hook in _launch_hook:
        with contextlib.suppress(OSError):
            hook(backend)


@contextlib.contextmanager
def running(nodeid: str) -> Iterator[None]:
    """Attribute GPU errors raised inside the block to the test ``nodeid``."""
    previous = _state["test"]
    _state["test"] = nodeid
    try:
        yield
    finally:
        _state["test"] = previous


def current_test() -> Optional[str]:
    return _state["test"]


def is_sticky(code: str) -> bool:
    return code in STICKY


def record(backend: str, code: str, *, culprit: bool) -> Poison:
    """Note a sticky error on ``backend``; the first one recorded per backend stands."""
    if backend not in _poisons:
        _poisons[backend] = Poison(backend, code, _state["test"] or "<outside pytest>", culprit, _state["launched"])
    return _poisons[backend]


def poisoned(backend: Optional[str] = None) -> Optional[Poison]:
    """The sticky error of ``backend`` (or of any backend) in this process, or None."""
    if backend is not None:
        return _poisons.get(backend)
    return next(iter(_poisons.values()), None)


def reset() -> None:
    """Forget every recorded error (tests only: a real poisoned context stays poisoned)."""
    _poisons.clear()
    _state["test"] = _state["launched"] = None
