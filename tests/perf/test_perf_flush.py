"""The torch timer's cold flush: on NVIDIA one ``gpuenv_read`` launch on torch's current stream through
``CudaRuntime.launcher``; ``torch.sum`` over rows where the kernel cannot be built, and on AMD. Fakes stand
at the binding boundary (torch's module, cuda-python's driver module, the runtime compiler)."""

from __future__ import annotations

import contextlib
import sys
import types

import pytest

from pytest_gpuenv.perf._device import MiB, flush_bytes
from pytest_gpuenv.rtc import Kernel, KernelCompileError
from pytest_gpuenv.rtc.source import kernel_decl, load_source
from pytest_gpuenv.runtime import KernelLaunchError
from pytest_gpuenv.runtime.cuda import CudaRuntime


class FakeTensor:
    def __init__(self, shape: tuple, log: list, ptr: int) -> None:
        self.shape, self.log, self.ptr = shape, log, ptr

    def data_ptr(self) -> int:
        return self.ptr

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def zero_(self) -> None:
        self.log.append(("zero_", self.ptr))


def fake_torch(log: list, hip: bool = False, stream: int = 0x5000, current: int = 0) -> types.ModuleType:
    """torch at the calls TorchBackend makes: device properties (torch/_C/__init__.pyi), zeros, sum,
    current_stream."""
    props = types.SimpleNamespace(major=9, minor=0, L2_cache_size=60 * MiB, multi_processor_count=132, uuid=None,
                                  clock_rate=1_980_000, gcnArchName="gfx942:sramecc+:xnack-")
    ptrs = iter(range(0x1000_0000, 0x2000_0000, 0x100_0000))
    t = types.ModuleType("torch")
    t.__version__ = "2.11.0+cu130"
    t.version = types.SimpleNamespace(hip="6.4" if hip else None, cuda=None if hip else "13.0")
    t.device = lambda kind, idx: types.SimpleNamespace(type=kind, index=idx)
    t.float32 = "float32"
    t.zeros = lambda shape, **k: FakeTensor(shape if isinstance(shape, tuple) else (shape,), log, next(ptrs))
    t.sum = lambda buf, dim, out: log.append(("sum", buf.ptr, dim, out.ptr))
    t.cuda = types.SimpleNamespace(
        current_device=lambda: current, get_device_properties=lambda i: props,
        get_device_name=lambda i: "AMD Instinct MI300X" if hip else "NVIDIA H200",
        device=lambda i: contextlib.nullcontext(), _sleep=lambda n: log.append(("sleep", n)),
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=stream))
    return t


class FakeRuntime:
    """runtime.get("cuda", device) at what TorchBackend asks: load, launcher."""

    def __init__(self, log: list) -> None:
        self.log = log

    def load(self, binary: bytes, name: str) -> str:
        return "FUNC:" + name

    def launcher(self, func, grid, block, args, stream):  # type: ignore[no-untyped-def]
        self.log.append(("bind", func, grid, block, stream))
        return lambda: self.log.append(("launch", func, stream, args))

    def fencer(self, ptr, stream):  # type: ignore[no-untyped-def]
        return lambda: self.log.append(("fence", ptr, stream))


@pytest.fixture
def nvidia(monkeypatch):  # type: ignore[no-untyped-def]
    """A fake torch on an H200, the helper compile and the runtime faked; yields the call log."""
    log: list = []
    compiles: list = []

    def compile_kernel(source, name, *, arch, defines=None, device=None, **kw):  # type: ignore[no-untyped-def]
        compiles.append((name, arch))
        if getattr(compile_kernel, "fail", False):
            raise KernelCompileError("no compiler for " + arch)
        params = kernel_decl(load_source(source), name).params
        return Kernel(name=name, arch=arch, compiler="fake", binary=name.encode(), params=params,
                      compile_seconds=0.0, cache_hit=False, device=device)

    monkeypatch.setattr("pytest_gpuenv.perf._driver.compile_kernel", compile_kernel)
    monkeypatch.setattr("pytest_gpuenv.runtime.get", lambda backend, device: FakeRuntime(log))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(log))
    return types.SimpleNamespace(log=log, compiles=compiles, compile=compile_kernel, monkeypatch=monkeypatch)


def test_nvidia_flush_is_one_read_kernel_launch_on_torchs_stream(nvidia):
    from pytest_gpuenv.perf._torch import TorchBackend

    be = TorchBackend(0)
    assert be.flush_note is None and nvidia.compiles == [("gpuenv_read", "sm_90")]
    assert be.info.flush_bytes == flush_bytes(60 * MiB, "sm_90") == 75 * MiB
    f = be.flush_fn(2e-6)
    f()
    f()
    args = be._read[2]  # the packed arguments: the buffer, its float4s, the never-written output
    fence = ("fence", be._row_sums.ptr, 0x5000)  # then a memory fence on the same stream, and no delay kernel
    assert nvidia.log == [("bind", "FUNC:gpuenv_read", (4 * 132, 1, 1), (256, 1, 1), 0x5000),
                          ("launch", "FUNC:gpuenv_read", 0x5000, args), fence,
                          ("launch", "FUNC:gpuenv_read", 0x5000, args), fence]
    assert args.values[1].value == 75 * MiB // 16 and args.values[0].value == be._buf.ptr


def test_a_flush_keeps_its_backend_and_arguments_alive(nvidia):
    """``TorchBackend(...).flush_fn()`` with the backend dropped at once (benchmarks/_references.py does this):
    the buffer the kernel reads and the packed arguments must outlive the backend, or the kernel reads freed
    memory through a freed ``void*[]`` (on the H200: 'misaligned address')."""
    import gc
    import weakref

    from pytest_gpuenv.perf._torch import TorchBackend

    be = TorchBackend(0)
    gone = weakref.ref(be)
    flush = be.flush_fn()
    del be
    gc.collect()
    assert gone() is not None
    flush()
    assert [c[0] for c in nvidia.log[-2:]] == ["launch", "fence"]


def test_a_batch_enqueues_the_flush_made_once_on_the_current_stream(nvidia):
    from pytest_gpuenv.perf._torch import TorchBackend

    be = TorchBackend(0)
    be._event_pairs = lambda n: [(types.SimpleNamespace(record=lambda s: None),) * 2 for _ in range(n)]
    be.enqueue([lambda: nvidia.log.append(("fn",))], [0, 0, 0], flush=True, delay_s=2e-6, head_delay_s=0.0, repeat=1)
    kinds = [c[0] for c in nvidia.log]
    assert kinds == ["bind"] + ["launch", "fence", "fn"] * 3  # the fence settles the flush: no sleep


def test_a_batch_while_another_device_is_current_flushes_with_torch_and_leaves_the_context(nvidia):
    """Measuring device 0 while torch's current device is 1: binding the kernel's launch would make device
    0's context current on the thread; the batch flushes with torch.sum instead."""
    from pytest_gpuenv.perf._torch import TorchBackend

    be = TorchBackend(0)
    nvidia.monkeypatch.setattr(be.torch.cuda, "current_device", lambda: 1)
    be.flush_fn(2e-6)()
    assert [c[0] for c in nvidia.log] == ["sum", "sleep"]  # no fence there: the delay settles the flush


def test_without_a_compiler_the_flush_is_torch_sum_and_says_why(nvidia):
    from pytest_gpuenv.perf._torch import TorchBackend

    nvidia.compile.fail = True
    be = TorchBackend(0)
    assert be._read is None and "KernelCompileError" in be.flush_note and "no compiler for sm_90" in be.flush_note
    be.flush_fn(2e-6)()
    assert [c[0] for c in nvidia.log] == ["sum", "sleep"]
    nvidia.log.clear()
    be.flush_fn(0.0)()  # no settle asked
    assert [c[0] for c in nvidia.log] == ["sum"]


def test_write_then_read_flush_in_both_mode(nvidia):
    from pytest_gpuenv.perf._torch import TorchBackend

    be = TorchBackend(0, flush="both")
    be.flush_fn()()
    assert [c[0] for c in nvidia.log] == ["bind", "zero_", "launch", "fence"]  # made, the write, the read, the fence
    nvidia.log.clear()
    TorchBackend(0, flush="write").flush_fn(2e-6)()
    assert [c[0] for c in nvidia.log] == ["zero_", "sleep"]  # no read kernel, no fence: the delay


def test_amd_flush_is_torch_sum_and_builds_nothing(nvidia):
    from pytest_gpuenv.perf._torch import TorchBackend

    nvidia.monkeypatch.setitem(sys.modules, "torch", fake_torch(nvidia.log, hip=True))
    be = TorchBackend(0)
    assert nvidia.compiles == [] and be.flush_note == "AMD: torch.sum"
    assert be.info.flush_bytes == 2 * be.info.last_level_cache_bytes  # AMD keeps 2x (unmeasured there)
    be.flush_fn(2e-6)()
    assert [c[0] for c in nvidia.log] == ["sum", "sleep"]  # and the delay (the fence is unmeasured there too)


class FakeDriver:
    """cuda.bindings.driver at the calls CudaRuntime makes: every call returns (CUresult, *values)."""

    CUstream = staticmethod(lambda h: ("CUstream", h))
    CUdeviceptr = staticmethod(lambda p: ("CUdeviceptr", p))

    def __init__(self, launch_result: int = 0, fail: str = "") -> None:
        self.calls: list = []
        self.launch_result = launch_result
        self.fail = fail  # a call that answers CUDA_ERROR_INVALID_HANDLE (400)

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):  # type: ignore[no-untyped-def]
            self.calls.append((name, args))
            if name == "cuLaunchKernel":
                return (self.launch_result,)
            if name == self.fail:
                return (400,)
            if name in ("cuGetErrorName", "cuGetErrorString"):
                return (0, b"CUDA_ERROR_INVALID_HANDLE" if name == "cuGetErrorName" else b"invalid resource handle")
            return (0, f"<{name}>")

        return call


class Args:
    """Packed arguments as the launcher reads them: the address of their ``void*[]``."""

    address = 0xABC


def test_cuda_launcher_makes_the_context_current_once_then_only_launches():
    import gc
    import weakref

    drv = FakeDriver()
    rt = CudaRuntime(0, driver=drv)
    drv.calls.clear()
    args = Args()
    held = weakref.ref(args)
    run = rt.launcher(types.SimpleNamespace(handle="H"), (528, 1, 1), (256, 1, 1), args, 0x5000)
    del args
    gc.collect()
    assert held() is not None  # the launcher holds the packed arguments the driver reads
    assert [c[0] for c in drv.calls] == ["cuCtxSetCurrent"]
    drv.calls.clear()
    run()
    run()
    assert drv.calls == [("cuLaunchKernel", ("H", 528, 1, 1, 256, 1, 1, 0, ("CUstream", 0x5000), 0xABC, 0))] * 2


def test_cuda_launcher_raises_the_drivers_error_naming_the_call():
    drv = FakeDriver(launch_result=400)
    run = CudaRuntime(0, driver=drv).launcher(types.SimpleNamespace(handle="H"), (1, 1, 1), (1, 1, 1),
                                              Args(), 0)
    with pytest.raises(KernelLaunchError, match="cuLaunchKernel: CUDA_ERROR_INVALID_HANDLE"):
        run()


def test_cuda_fencer_writes_one_word_on_the_stream_with_the_default_memory_fence():
    drv = FakeDriver()
    rt = CudaRuntime(0, driver=drv)
    drv.calls.clear()
    run = rt.fencer(0x7000, 0x5000)
    assert drv.calls == []  # made once: nothing is called until the batch runs it
    run()
    run()
    # flags 0: CU_STREAM_WRITE_VALUE_DEFAULT, the write after a memory fence
    assert drv.calls == [("cuStreamWriteValue32", (("CUstream", 0x5000), ("CUdeviceptr", 0x7000), 1, 0))] * 2


def test_cuda_fencer_raises_the_drivers_error_naming_the_call():
    drv = FakeDriver(fail="cuStreamWriteValue32")
    run = CudaRuntime(0, driver=drv).fencer(0x7000, 0)
    with pytest.raises(KernelLaunchError, match="cuStreamWriteValue32: CUDA_ERROR_INVALID_HANDLE"):
        run()
