"""Cooperative launches (``Kernel.__call__(..., cooperative=True)``) at the binding boundary, no GPU.

HIP (tests/kernels/test_amd_cooperative.py): hip-python 6.2.0's ``hipModuleLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX,
blockDimY, blockDimZ, sharedMemBytes, stream, kernelParams)`` (hip/hip.pyx; no ``extra``), and ROCm/clr
hipamd/src/hip_module.cpp: ``hipModuleLaunchCooperativeKernel`` calls ``ihipModuleLaunchKernel`` with
``CooperativeGroups``, whose ``ihipLaunchKernel_validate`` answers hipErrorLaunchFailure on a device without
cooperative groups and hipErrorCooperativeLaunchTooLarge for a grid of more blocks than fit at once, before
anything is enqueued.

CUDA: cuda.bindings.driver (cuda-python 13) ``cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ,
blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams)``; its documented limit is
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` times ``CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT``, and a
larger grid answers CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. The driver is a fake answering with the
binding's own enums. tests/kernels/test_gpu_cooperative.py runs the real thing on an NVIDIA GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gpuenv import runtime
from pytest_gpuenv.rtc import Kernel
from pytest_gpuenv.runtime import KernelLaunchError, poisoned
from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime._common import Function

pytestmark = pytest.mark.usefixtures("no_poison")  # a clean sticky-error record before and after each test (conftest)


def _kernel(arch: str) -> Kernel:
    k = Kernel(name="k", arch=arch, compiler="hiprtc" if arch.startswith("gfx") else "nvrtc", binary=b"\0",
               params=[], compile_seconds=0.0, cache_hit=False, device=0)
    k._loader = lambda dev: Function(handle="H", module=None, name="k")
    return k


# ------------------------------------------------------------------------------------ Kernel.__call__
class RecordingRuntime:
    def __init__(self) -> None:
        self.launches: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def launch(self, *args: Any, **kw: Any) -> int:
        self.launches.append((args, kw))
        return 0


@pytest.mark.parametrize("bad", [1, 0, "yes", None, 1.0])
def test_cooperative_must_be_a_bool(bad):
    with pytest.raises(TypeError, match=r"cooperative must be True or False, got " + repr(bad).replace(".", r"\.")):
        _kernel("sm_90")(1, 1, cooperative=bad)


@pytest.mark.parametrize("arch,backend", [("sm_90", "cuda"), ("gfx90a", "rocm")])
def test_cooperative_is_forwarded_to_the_runtime(monkeypatch, arch, backend):
    rt = RecordingRuntime()
    monkeypatch.setitem(runtime._RUNTIMES, (backend, 0), rt)
    k = _kernel(arch)
    k(8, 64, cooperative=True)
    k(8, 64)
    (coop_args, coop_kw), (plain_args, plain_kw) = rt.launches
    assert coop_args[1:3] == plain_args[1:3] == ((8, 1, 1), (64, 1, 1)) and coop_args[4:] == (0, None)
    assert coop_kw == {"cooperative": True}
    assert plain_kw == {"cooperative": False}


# ----------------------------------------------------------------------------------------------- CUDA
class FakeDriver:
    """cuda.bindings.driver at the calls CudaRuntime makes, answering with the binding's own enums."""

    CUstream = staticmethod(lambda h: ("CUstream", h))

    def __init__(self, coop: str = "CUDA_SUCCESS", per_sm: int = 2, sms: int = 132, cooperative_attr: int = 1) -> None:
        self.d = pytest.importorskip("cuda.bindings.driver")
        self.CUresult, self.CUdevice_attribute = self.d.CUresult, self.d.CUdevice_attribute
        self.CUfunction_attribute = self.d.CUfunction_attribute
        self.coop, self.per_sm, self.sms, self.cooperative_attr = coop, per_sm, sms, cooperative_attr
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)
        ok = self.d.CUresult.CUDA_SUCCESS

        def call(*args: Any) -> tuple:
            self.calls.append((name, args))
            if name == "cuLaunchCooperativeKernel":
                return (getattr(self.d.CUresult, self.coop),)
            if name == "cuOccupancyMaxActiveBlocksPerMultiprocessor":
                return (ok, self.per_sm)
            if name == "cuDeviceGetAttribute":
                return (ok, {"CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": self.sms,
                             "CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH": self.cooperative_attr}[args[0].name])
            if name == "cuGetErrorName":
                return (ok, args[0].name.encode())
            if name == "cuGetErrorString":
                return (ok, b"the driver's message")
            return (ok, f"<{name}>")

        return call


def _cuda(monkeypatch, drv: FakeDriver) -> Kernel:
    from pytest_gpuenv.runtime.cuda import CudaRuntime

    monkeypatch.setitem(runtime._RUNTIMES, ("cuda", 0), CudaRuntime(0, driver=drv))
    drv.calls.clear()
    return _kernel("sm_90")


def test_cuda_cooperative_calls_cuLaunchCooperativeKernel(monkeypatch):
    drv = FakeDriver()
    k = _cuda(monkeypatch, drv)
    k((4, 2, 1), (64, 2, 1), shared_mem=512, stream=0x77, cooperative=True)
    launches = [args for name, args in drv.calls if name.startswith("cuLaunch")]
    (args,) = launches
    assert [name for name, _ in drv.calls] == ["cuCtxSetCurrent", "cuDeviceGetAttribute", "cuLaunchCooperativeKernel"]
    assert args[0] == "H" and args[1:8] == (4, 2, 1, 64, 2, 1, 512) and args[8] == ("CUstream", 0x77)
    assert isinstance(args[9], int) and len(args) == 10  # kernelParams, no `extra`
    drv.calls.clear()
    k(1, 1, cooperative=True)  # the device attribute is asked once
    assert [name for name, _ in drv.calls] == ["cuCtxSetCurrent", "cuLaunchCooperativeKernel"]


def test_cuda_large_shared_memory_opt_in_comes_before_the_cooperative_launch(monkeypatch):
    drv = FakeDriver()
    _cuda(monkeypatch, drv)(8, 64, shared_mem=100 * 1024, cooperative=True)
    names = [name for name, _ in drv.calls]
    assert names.index("cuFuncSetAttribute") < names.index("cuLaunchCooperativeKernel")


def test_cuda_too_large_is_a_launch_error_naming_grid_and_limit(monkeypatch):
    drv = FakeDriver(coop="CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", per_sm=2, sms=132)
    k = _cuda(monkeypatch, drv)
    with _sticky.running("tests/x.py::test_big_grid"), pytest.raises(KernelLaunchError) as e:
        k(1_000_000, 1024, shared_mem=256, cooperative=True)
    msg = str(e.value)
    assert e.value.code == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE" and e.value.sticky is False
    assert msg.startswith("cuLaunchCooperativeKernel: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: ")
    assert "grid 1000000x1x1 has 1000000 blocks of 1024 threads" in msg and "256 bytes of dynamic shared memory" in msg
    assert "the limit is 264 (2 per multiprocessor x 132 multiprocessors) blocks" in msg
    assert "nothing ran, the context is still usable" in msg
    assert ("cuOccupancyMaxActiveBlocksPerMultiprocessor", ("H", 1024, 256)) in drv.calls
    assert poisoned() is None and poisoned("cuda") is None


def test_cuda_device_without_cooperative_launch_is_refused_before_the_driver(monkeypatch):
    drv = FakeDriver(cooperative_attr=0)
    k = _cuda(monkeypatch, drv)
    with pytest.raises(KernelLaunchError) as e:
        k(8, 64, cooperative=True)
    assert e.value.sticky is False
    assert "device 0 cannot do a cooperative launch (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)" in str(e.value)
    assert "cuLaunchCooperativeKernel" not in [name for name, _ in drv.calls]
    assert poisoned() is None


def test_cuda_cooperative_other_errors_go_through_check(monkeypatch):
    drv = FakeDriver(coop="CUDA_ERROR_INVALID_VALUE")
    with pytest.raises(KernelLaunchError, match=r"^cuLaunchCooperativeKernel: CUDA_ERROR_INVALID_VALUE: "):
        _cuda(monkeypatch, drv)(8, 64, cooperative=True)


def test_cuda_launcher_stays_non_cooperative():
    import inspect

    from pytest_gpuenv.runtime.cuda import CudaRuntime

    assert "cooperative" not in inspect.signature(CudaRuntime.launcher).parameters
