"""Cooperative launches on AMD (``Kernel.__call__(..., cooperative=True)``), at the binding boundary.

Sources: hip-python 6.2.0 (hip/hip.pyx) ``hipModuleLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ,
blockDimX, blockDimY, blockDimZ, sharedMemBytes, stream, kernelParams)``, no ``extra``; ROCm/clr
hipamd/src/hip_module.cpp: ``hipModuleLaunchCooperativeKernel`` calls ``ihipModuleLaunchKernel`` with
``amd::NDRangeKernelCommand::CooperativeGroups``, and ``ihipLaunchKernel_validate`` then answers
hipErrorLaunchFailure where the device has no cooperative groups and hipErrorCooperativeLaunchTooLarge where the
grid's blocks are more than ``ihipOccupancyMaxActiveBlocksPerMultiprocessor``'s blocks per grid, both before
anything is enqueued. The binding is tests/_hip_standin.py (hip-python's own enums) with those calls added;
everything above it is real.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("hip")

import _hip_standin as hip_standin

from pytest_gpuenv import runtime
from pytest_gpuenv.rtc import Kernel
from pytest_gpuenv.runtime import KernelLaunchError, poisoned
from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime._common import Function

pytestmark = pytest.mark.usefixtures("no_poison")  # a clean sticky-error record before and after each test (conftest)


def _kernel() -> Kernel:
    k = Kernel(name="k", arch="gfx90a", compiler="hiprtc", binary=b"\0", params=[], compile_seconds=0.0,
               cache_hit=False, device=0)
    k._loader = lambda dev: Function(handle="H", module=None, name="k")
    return k


class CoopHipStandin(hip_standin.HipStandin):
    """The stand-in with the calls a cooperative launch makes."""

    def __init__(self, coop: str = "hipSuccess", per_cu: int = 2, cus: int = 104, cooperative_attr: int = 1,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.coop, self.per_cu, self.cus, self.cooperative_attr = coop, per_cu, cus, cooperative_attr
        self.coop_args: list[tuple[Any, ...]] = []
        self.hipDeviceAttribute_t = hip_standin._real.hipDeviceAttribute_t

    def hipModuleLaunchCooperativeKernel(self, *args: Any) -> tuple:
        self.calls.append("hipModuleLaunchCooperativeKernel")
        self.coop_args.append(args)
        return (self._err(self.coop),)

    def hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(self, f: Any, block_size: int, shared: int) -> tuple:
        self.calls.append(f"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor({block_size}, {shared})")
        return (self._err("hipSuccess"), self.per_cu)

    def hipDeviceGetAttribute(self, attr: Any, device: int) -> tuple:
        self.calls.append(f"hipDeviceGetAttribute({attr.name})")
        value = {"hipDeviceAttributeMultiprocessorCount": self.cus,
                 "hipDeviceAttributeCooperativeLaunch": self.cooperative_attr}[attr.name]
        return (self._err("hipSuccess"), value)


def _hip(monkeypatch, hip: Any) -> Kernel:
    from pytest_gpuenv.runtime.hip import HipRuntime

    monkeypatch.setitem(runtime._RUNTIMES, ("rocm", 0), HipRuntime(0, hip=hip))
    return _kernel()


def test_hip_cooperative_calls_hipModuleLaunchCooperativeKernel(monkeypatch):
    hip = CoopHipStandin()
    k = _hip(monkeypatch, hip)
    k((4, 2, 1), (64, 2, 1), shared_mem=512, stream=0x77, cooperative=True)
    (args,) = hip.coop_args
    assert args[0] == "H" and args[1:8] == (4, 2, 1, 64, 2, 1, 512) and args[8] == 0x77
    assert isinstance(args[9], int) and args[9] != 0  # the packed void*[]; no `extra` after it
    assert len(args) == 10
    assert hip.calls == ["hipModuleLaunchCooperativeKernel"]
    k(1, 1, stream=0x77)  # a plain launch is still hipModuleLaunchKernel
    assert hip.calls[-1] == "hipModuleLaunchKernel" and len(hip.coop_args) == 1


def test_hip_cooperative_null_stream_is_none(monkeypatch):
    hip = CoopHipStandin()
    _hip(monkeypatch, hip)(1, 1, stream=0, cooperative=True)
    assert hip.coop_args[0][8] is None


def test_hip_too_large_is_a_launch_error_naming_grid_and_limit(monkeypatch):
    hip = CoopHipStandin(coop="hipErrorCooperativeLaunchTooLarge", per_cu=2, cus=104)
    k = _hip(monkeypatch, hip)
    with _sticky.running("tests/x.py::test_big_grid"), pytest.raises(KernelLaunchError) as e:
        k(1_000_000, 1024, cooperative=True)
    msg = str(e.value)
    assert e.value.code == "hipErrorCooperativeLaunchTooLarge" and e.value.sticky is False
    assert msg.startswith("hipModuleLaunchCooperativeKernel: hipErrorCooperativeLaunchTooLarge: ")
    assert "grid 1000000x1x1 has 1000000 blocks of 1024 threads" in msg
    assert "the limit is 208 (2 per compute unit x 104 compute units) blocks" in msg
    assert "nothing ran, the device is still usable" in msg
    assert "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(1024, 0)" in hip.calls
    assert poisoned() is None and poisoned("rocm") is None


def test_hip_too_large_without_occupancy_call_still_names_the_grid(monkeypatch):
    class NoOccupancy(CoopHipStandin):
        hipModuleOccupancyMaxActiveBlocksPerMultiprocessor = None  # type: ignore[assignment]

    k = _hip(monkeypatch, NoOccupancy(coop="hipErrorCooperativeLaunchTooLarge"))
    with pytest.raises(KernelLaunchError, match=r"grid 4096x2x1 has 8192 blocks of 256 threads.*the limit is unknown"):
        k((4096, 2), 256, cooperative=True)


def test_hip_device_without_cooperative_launch_says_so(monkeypatch):
    # ihipLaunchKernel_validate: `if (!device->info().cooperativeGroups_) return hipErrorLaunchFailure;`
    hip = CoopHipStandin(coop="hipErrorLaunchFailure", cooperative_attr=0, func_attr=("hipSuccess", 1024))
    k = _hip(monkeypatch, hip)
    with pytest.raises(KernelLaunchError) as e:
        k(8, 64, cooperative=True)
    assert e.value.code == "hipErrorLaunchFailure" and e.value.sticky is False
    assert str(e.value).startswith("hipModuleLaunchCooperativeKernel: hipErrorLaunchFailure: device 0 cannot do a "
                                   "cooperative launch (hipDeviceAttributeCooperativeLaunch is 0) of kernel 'k'")
    assert poisoned() is None


def test_hip_cooperative_launch_bounds_refusal_is_unchanged(monkeypatch):
    hip = CoopHipStandin(coop="hipErrorLaunchFailure", func_attr=("hipSuccess", 256))
    with pytest.raises(KernelLaunchError, match=r"block 1024x1x1 \(1024 threads\) is larger than the launch bounds"):
        _hip(monkeypatch, hip)(8, 1024, cooperative=True)


def test_hip_cooperative_other_errors_go_through_check(monkeypatch):
    hip = CoopHipStandin(coop="hipErrorInvalidValue")
    with pytest.raises(KernelLaunchError, match=r"^hipModuleLaunchCooperativeKernel: hipErrorInvalidValue"):
        _hip(monkeypatch, hip)(8, 64, cooperative=True)
