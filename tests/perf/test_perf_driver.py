"""The driver timer backend and HIP runtime up to the binding boundary: helper kernels, flush, delays, events.

Stand-ins replace the compiler and the runtime bindings (no GPU here); each records the calls made.
"""

from __future__ import annotations

import ctypes

import pytest
from _perf_fake import noop

from pytest_gpuenv.perf._driver import DriverBackend


def _args_at(address, n):
    """The n 8-byte arguments behind a launch's ``void*[]`` (every helper argument is 8 bytes)."""
    slots = (ctypes.c_void_p * n).from_address(address)
    return [ctypes.c_uint64.from_address(slots[i]).value for i in range(n)]


class HelperCompiles(list):
    """The (name, arch, defines) of each helper compile; ``fail`` plays a machine without a compiler."""

    fail = False


@pytest.fixture
def helper_compiles(monkeypatch):
    """compile_kernel as the driver backend calls it, without a compiler: records each call."""
    from pytest_gpuenv.rtc import Kernel, KernelCompileError
    from pytest_gpuenv.rtc.source import kernel_decl, load_source

    calls = HelperCompiles()

    def fake(source, name, *, arch, defines=None, device=None, **kw):
        calls.append((name, arch, dict(defines or {})))
        if calls.fail:
            raise KernelCompileError("no compiler for " + arch)
        params = kernel_decl(load_source(source), name).params
        return Kernel(name=name, arch=arch, compiler="fake", binary=name.encode(), params=params,
                      compile_seconds=0.0, cache_hit=False, device=device)

    monkeypatch.setattr("pytest_gpuenv.perf._driver.compile_kernel", fake)
    return calls


class FakeRuntime:
    """Stands in for runtime.get(backend, device): records what DriverBackend asks of the runtime."""

    vendor = "nvidia"
    device = 0

    def __init__(self):
        self.calls, self.ev, self.streams = [], 0, set()

    def describe(self):
        return {"name": "Fake", "arch": "sm_90", "l2_bytes": 60 << 20, "sm_count": 132, "uuid": "GPU-x",
                "pci_bus_id": None, "runtime": "cuda driver 13.0"}

    def timer_hz(self):
        return 1e9

    def malloc(self, n):
        return 1 << 40

    def memset(self, p, n, stream):
        self.streams.add(stream)
        self.calls.append(("memset", n))

    def memcpy(self, d, s, n, stream):
        self.calls.append(("memcpy", n))

    def event_create(self):
        self.ev += 1
        return self.ev

    def event_record(self, e, stream):
        self.streams.add(stream)
        self.calls.append(("record", e))

    def event_synchronize(self, e):
        self.calls.append(("event_sync", e))

    def event_elapsed_s(self, a, b):
        return 1e-4

    def synchronize(self, stream):
        self.calls.append(("sync",))

    def load(self, binary, name):
        return {"gpuenv_spin": "SPIN", "gpuenv_read": "READ"}[binary.decode()]

    def launch(self, f, grid, block, args_address, shared_mem, stream, cooperative=False):
        self.streams.add(stream)
        self.calls.append((f, _args_at(args_address, 1 if f == "SPIN" else 3)))


def test_driver_backend_orders_flush_delay_events_and_syncs_once(helper_compiles):
    rt = FakeRuntime()
    be = DriverBackend(rt)
    assert be.info.flush_bytes == 75 << 20 and be.can_delay
    assert [(n, a) for n, a, _d in helper_compiles] == [("gpuenv_spin", "sm_90"), ("gpuenv_read", "sm_90")]
    rt.calls.clear()
    h = be.enqueue([lambda: rt.calls.append(("fn",))], [0, 0], flush=True, delay_s=2e-6, head_delay_s=1e-4, repeat=1)
    assert be.collect(h) == [1e-4, 1e-4]
    names = [c[0] for c in rt.calls]
    assert names == ["SPIN", "READ", "SPIN", "record", "fn", "record", "READ", "SPIN", "record", "fn", "record",
                     "event_sync"]
    assert rt.calls[0][1] == [100000]  # 100 us head delay in globaltimer ns
    assert rt.calls[1][1][1] == (75 << 20) // 16  # float4s read by the flush
    assert rt.streams == {0}  # everything on the backend's one stream


def test_driver_backend_on_cuda_settles_the_flush_with_the_runtimes_fence(helper_compiles):
    """A runtime with ``fencer`` (CUDA's): after the read kernel, a memory fence on the same stream instead of
    the delay kernel; the head delay stays a delay kernel."""

    class Fencing(FakeRuntime):
        def fencer(self, ptr, stream):
            self.calls.append(("bind_fence", ptr, stream))
            return lambda: self.calls.append(("FENCE",))

    rt = Fencing()
    be = DriverBackend(rt)
    assert ("bind_fence", 1 << 40, 0) in rt.calls  # made once, on the backend's stream
    rt.calls.clear()
    be.enqueue([lambda: rt.calls.append(("fn",))], [0, 0], flush=True, delay_s=2e-6, head_delay_s=1e-4, repeat=1)
    assert [c[0] for c in rt.calls] == ["SPIN", "READ", "FENCE", "record", "fn", "record",
                                        "READ", "FENCE", "record", "fn", "record"]


def test_driver_backend_without_runtime_compiler_falls_back_to_memset(helper_compiles):
    helper_compiles.fail = True
    rt = FakeRuntime()
    be = DriverBackend(rt)
    assert not be.can_delay and "memset" in be.note and "no compiler for sm_90" in be.note
    rt.calls.clear()
    be.enqueue([noop], [0], flush=True, delay_s=2e-6, head_delay_s=1e-4, repeat=1)
    assert [c[0] for c in rt.calls] == ["memset", "record", "record"]


class FakeHip:
    """The slice of hip-python's ``hip`` module HipRuntime uses; each call returns (err, *values)."""

    class hipDeviceAttribute_t:
        hipDeviceAttributeWallClockRate = 99

    class hipDeviceProp_t:
        name = b"AMD Instinct MI300X\0"
        gcnArchName = b"gfx942:sramecc+:xnack-\0"
        l2CacheSize = 4 << 20
        multiProcessorCount = 304
        pciDomainID, pciBusID, pciDeviceID = 0, 0x1C, 0

    class OutOfMemory(int):
        name = "hipErrorOutOfMemory"

    def __init__(self):
        self.calls, self.fail = [], {}

    def __getattr__(self, name):
        def call(*args):
            if name == "hipModuleLaunchKernel":  # the packed arguments live only during the call
                args = (*args, _args_at(args[-2], 1 if args[0] == b"gpuenv_spin" else 3))
            self.calls.append((name, args))
            results = {"hipMalloc": (0, 0xABC), "hipEventCreate": (0, object()), "hipEventElapsedTime": (0, 0.25),
                       "hipRuntimeGetVersion": (0, 60443484), "hipDeviceGetAttribute": (0, 100000),
                       "hipModuleLoadData": (0, "mod"), "hipGetErrorString": (0, b"out of memory")}
            if name in self.fail:
                return (self.fail[name], None)
            if name == "hipModuleGetFunction":
                return (0, args[-1])
            return results.get(name, (0,))

        return call


def test_hip_runtime_up_to_the_binding_boundary(helper_compiles):
    from pytest_gpuenv.runtime.hip import HipRuntime

    hip = FakeHip()
    be = DriverBackend(HipRuntime(0, hip=hip))
    info = be.info
    assert (info.name, info.arch, info.vendor, info.timer) == ("AMD Instinct MI300X", "gfx942", "amd", "hip")
    assert info.flush_bytes == 512 << 20  # Infinity Cache covered
    assert info.runtime == "hip 6.4" and be.ticks_per_s == 100e6
    assert {(a, "GPUENV_AMD" in d) for _n, a, d in helper_compiles} == {("gfx942", True)}
    hip.calls.clear()
    h = be.enqueue([noop], [0], flush=True, delay_s=0.0, head_delay_s=1e-4, repeat=1)
    assert be.collect(h) == [0.25e-3]
    names = [c[0] for c in hip.calls if c[0] != "hipEventCreate"]
    # each launch selects its device first (a thread may have switched since)
    assert names == ["hipSetDevice", "hipModuleLaunchKernel", "hipSetDevice", "hipModuleLaunchKernel",
                     "hipEventRecord", "hipEventRecord", "hipEventSynchronize", "hipEventElapsedTime"]
    launches = [c[1] for c in hip.calls if c[0] == "hipModuleLaunchKernel"]
    spin, read = launches
    assert spin[0] == b"gpuenv_spin" and spin[-1] == [10000]  # 100 us at 100 MHz
    assert read[0] == b"gpuenv_read" and read[-1] == [0xABC, (512 << 20) // 16, 0xABC]  # device pointers


def test_binding_errors_name_the_call():
    from pytest_gpuenv.rtc import KernelLaunchError
    from pytest_gpuenv.runtime.hip import HipRuntime

    hip = FakeHip()
    rt = HipRuntime(0, hip=hip)
    hip.fail["hipMalloc"] = FakeHip.OutOfMemory(2)
    with pytest.raises(KernelLaunchError, match=r"^hipMalloc: hipErrorOutOfMemory: out of memory$") as info:
        rt.malloc(1 << 40)
    assert info.value.code == "hipErrorOutOfMemory" and not info.value.sticky
    assert rt._check((0, 5), "x") == 5 and rt._check((0,), "x") is None and rt._check((0, 1, 2), "x") == (1, 2)
