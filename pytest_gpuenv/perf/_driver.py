"""Timer backend without torch: driver events through cuda-python (NVIDIA) or hip-python (AMD).

``DriverBackend`` holds the logic once; ``CudaApi`` and ``HipApi`` are thin, symmetric adaptors over
the bindings (each call returns ``(err, *values)`` there; ``_ck`` turns errors into exceptions). The
delay and the read-flush are two tiny kernels compiled once with NVRTC / hiprtc; where no runtime
compiler is present the flush falls back to a memset and there is no delay kernel.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._device import DeviceInfo, flush_bytes, format_uuid
from pytest_gpuenv.perf._engine import enqueue_samples

HELPERS_SRC = r"""
#ifdef GPUENV_AMD
#define GPUENV_NOW() ((unsigned long long)wall_clock64())
#else
__device__ __forceinline__ unsigned long long gpuenv_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define GPUENV_NOW() gpuenv_now()
#endif
extern "C" __global__ void gpuenv_spin(unsigned long long ticks) {
  unsigned long long t0 = GPUENV_NOW();
  while (GPUENV_NOW() - t0 < ticks) { }
}
extern "C" __global__ void gpuenv_read(const float4* p, unsigned long long n4, float* out) {
  float acc = 0.f;
  unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1.2345e-30f) out[0] = acc;  /* never true: keeps the loads */
}
"""


def _ck(res: Any, what: str) -> Any:
    """``(err, *values)`` -> values; raises RuntimeError naming the call and the error."""
    if not isinstance(res, tuple):
        res = (res,)
    err = res[0]
    if int(getattr(err, "value", err)) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


class CudaApi:
    """cuda.bindings (cuda-python >= 12) driver API and NVRTC."""

    vendor = "nvidia"

    def __init__(self, ordinal: int = 0, stream: Any = 0) -> None:
        from cuda.bindings import driver as cu

        self.cu = cu
        _ck(cu.cuInit(0), "cuInit")
        self.dev = _ck(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ordinal = ordinal
        self.ctx = _ck(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        _ck(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = cu.CUstream(int(stream))

    def _attr(self, name: str) -> int:
        a = getattr(self.cu.CUdevice_attribute, name)
        return int(_ck(self.cu.cuDeviceGetAttribute(a, self.dev), "cuDeviceGetAttribute"))

    def describe(self) -> dict[str, Any]:
        cu = self.cu
        name = _ck(cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        major = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = self._attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        uuid = _ck(cu.cuDeviceGetUuid(self.dev), "cuDeviceGetUuid")
        ver = int(_ck(cu.cuDriverGetVersion(), "cuDriverGetVersion"))
        pci = "{:08x}:{:02x}:{:02x}.0".format(
            self._attr("CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID"), self._attr("CU_DEVICE_ATTRIBUTE_PCI_BUS_ID"),
            self._attr("CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID"),
        )
        return {
            "name": bytes(name).split(b"\0", 1)[0].decode(errors="replace"),
            "arch": f"sm_{major}{minor}",
            "l2_bytes": self._attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE") or None,
            "sm_count": self._attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "uuid": format_uuid(bytes(getattr(uuid, "bytes", b""))),
            "pci_bus_id": pci,
            "runtime": f"cuda driver {ver // 1000}.{(ver % 1000) // 10}",
        }

    def timer_hz(self) -> float:
        return 1e9  # %globaltimer counts nanoseconds

    def malloc(self, nbytes: int) -> int:
        return int(_ck(self.cu.cuMemAlloc(nbytes), "cuMemAlloc"))

    def memset(self, ptr: int, nbytes: int) -> None:
        _ck(self.cu.cuMemsetD8Async(self.cu.CUdeviceptr(ptr), 0, nbytes, self.stream), "cuMemsetD8Async")

    def memcpy(self, dst: int, src: int, nbytes: int) -> None:
        cu = self.cu
        _ck(cu.cuMemcpyDtoDAsync(cu.CUdeviceptr(dst), cu.CUdeviceptr(src), nbytes, self.stream), "cuMemcpyDtoDAsync")

    def event_create(self) -> Any:
        return _ck(self.cu.cuEventCreate(self.cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def event_record(self, ev: Any) -> None:
        _ck(self.cu.cuEventRecord(ev, self.stream), "cuEventRecord")

    def event_sync(self, ev: Any) -> None:
        _ck(self.cu.cuEventSynchronize(ev), "cuEventSynchronize")

    def elapsed_s(self, a: Any, b: Any) -> float:
        return float(_ck(self.cu.cuEventElapsedTime(a, b), "cuEventElapsedTime")) * 1e-3

    def sync(self) -> None:
        _ck(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def compile_helpers(self, arch: str) -> dict[str, Any]:
        from cuda.bindings import nvrtc

        prog = _ck(nvrtc.nvrtcCreateProgram(HELPERS_SRC.encode(), b"gpuenv_helpers.cu", 0, [], []), "nvrtcCreateProgram")
        opts = [f"--gpu-architecture={arch}".encode()]
        rc = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(rc[0]) != 0:
            size = _ck(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC could not compile the timer helpers: {log.decode(errors='replace')}")
        size = _ck(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        image = b" " * size
        _ck(nvrtc.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
        mod = _ck(self.cu.cuModuleLoadData(image), "cuModuleLoadData")
        return {n: _ck(self.cu.cuModuleGetFunction(mod, n.encode()), "cuModuleGetFunction")
                for n in ("gpuenv_spin", "gpuenv_read")}

    def launch(self, fn: Any, grid: int, block: int, args: Sequence[tuple[Any, Any]]) -> None:
        params = (tuple(v for v, _t in args), tuple(t for _v, t in args))
        _ck(self.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, self.stream, params, 0), "cuLaunchKernel")


class HipApi:
    """hip-python (``hip``, ``hiprtc``): the same calls as ``CudaApi``, for ROCm."""

    vendor = "amd"

    def __init__(self, ordinal: int = 0, stream: Any = None, hip: Any = None, hiprtc: Any = None) -> None:
        if hip is None:
            from hip import hip  # type: ignore[no-redef]
        if hiprtc is None:
            from hip import hiprtc  # type: ignore[no-redef]
        self.hip, self.hiprtc = hip, hiprtc
        self.ordinal = ordinal
        _ck(hip.hipSetDevice(ordinal), "hipSetDevice")
        self.stream = stream  # None: the null stream

    def describe(self) -> dict[str, Any]:
        hip = self.hip
        props = hip.hipDeviceProp_t()
        _ck(hip.hipGetDeviceProperties(props, self.ordinal), "hipGetDeviceProperties")

        def text(v: Any) -> str:
            return (bytes(v).split(b"\0", 1)[0].decode(errors="replace") if isinstance(v, (bytes, bytearray))
                    else str(v))

        ver = int(_ck(hip.hipRuntimeGetVersion(), "hipRuntimeGetVersion"))
        return {
            "name": text(props.name),
            "arch": text(props.gcnArchName).split(":")[0] or None,
            "l2_bytes": int(props.l2CacheSize) or None,
            "sm_count": int(props.multiProcessorCount),
            "uuid": None,
            "pci_bus_id": f"{int(props.pciDomainID):04x}:{int(props.pciBusID):02x}:{int(props.pciDeviceID):02x}.0",
            "runtime": f"hip {ver // 10000000}.{(ver // 100000) % 100}",
        }

    def timer_hz(self) -> float:
        attr = self.hip.hipDeviceAttribute_t.hipDeviceAttributeWallClockRate
        khz = int(_ck(self.hip.hipDeviceGetAttribute(attr, self.ordinal), "hipDeviceGetAttribute"))
        return khz * 1e3 if khz > 0 else 100e6  # wall_clock64() runs at 100 MHz on CDNA

    def malloc(self, nbytes: int) -> Any:
        return _ck(self.hip.hipMalloc(nbytes), "hipMalloc")

    def memset(self, ptr: Any, nbytes: int) -> None:
        _ck(self.hip.hipMemsetAsync(ptr, 0, nbytes, self.stream), "hipMemsetAsync")

    def memcpy(self, dst: Any, src: Any, nbytes: int) -> None:
        _ck(self.hip.hipMemcpyDtoDAsync(dst, src, nbytes, self.stream), "hipMemcpyDtoDAsync")

    def event_create(self) -> Any:
        return _ck(self.hip.hipEventCreate(), "hipEventCreate")

    def event_record(self, ev: Any) -> None:
        _ck(self.hip.hipEventRecord(ev, self.stream), "hipEventRecord")

    def event_sync(self, ev: Any) -> None:
        _ck(self.hip.hipEventSynchronize(ev), "hipEventSynchronize")

    def elapsed_s(self, a: Any, b: Any) -> float:
        return float(_ck(self.hip.hipEventElapsedTime(a, b), "hipEventElapsedTime")) * 1e-3

    def sync(self) -> None:
        _ck(self.hip.hipStreamSynchronize(self.stream), "hipStreamSynchronize")

    def compile_helpers(self, arch: str) -> dict[str, Any]:
        rtc = self.hiprtc
        prog = _ck(rtc.hiprtcCreateProgram(HELPERS_SRC.encode(), b"gpuenv_helpers.hip", 0, [], []),
                   "hiprtcCreateProgram")
        opts = [f"--offload-arch={arch}".encode(), b"-DGPUENV_AMD"]
        rc = rtc.hiprtcCompileProgram(prog, len(opts), opts)
        if int(getattr(rc[0], "value", rc[0])) != 0:
            size = _ck(rtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
            log = bytearray(size)
            rtc.hiprtcGetProgramLog(prog, log)
            raise RuntimeError(f"hiprtc could not compile the timer helpers: {bytes(log).decode(errors='replace')}")
        size = _ck(rtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
        code = bytearray(size)
        _ck(rtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
        mod = _ck(self.hip.hipModuleLoadData(code), "hipModuleLoadData")
        return {n: _ck(self.hip.hipModuleGetFunction(mod, n.encode()), "hipModuleGetFunction")
                for n in ("gpuenv_spin", "gpuenv_read")}

    def launch(self, fn: Any, grid: int, block: int, args: Sequence[tuple[Any, Any]]) -> None:
        extra = tuple(t(int(v)) if t is not ctypes.c_void_p else ctypes.c_void_p(int(v)) for v, t in args)
        _ck(self.hip.hipModuleLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, self.stream, None, extra),
            "hipModuleLaunchKernel")


class DriverBackend:
    """Events, flush and delay on one stream of a driver API (``CudaApi`` or ``HipApi``)."""

    def __init__(self, api: Any, flush: str = "read", compile_helpers: bool = True) -> None:
        self.api = api
        d = api.describe()
        self.name = "cuda" if api.vendor == "nvidia" else "hip"
        self.info = DeviceInfo(
            name=d["name"], vendor=api.vendor, arch=d["arch"], index=getattr(api, "ordinal", 0), uuid=d["uuid"],
            pci_bus_id=d["pci_bus_id"], l2_bytes=d["l2_bytes"], flush_bytes=flush_bytes(d["l2_bytes"], d["arch"]),
            runtime=d["runtime"], timer=self.name,
        )
        self.sm_count = int(d.get("sm_count") or 32)
        self.flush_mode = flush
        self.note: Optional[str] = None
        self._buf = api.malloc(self.info.flush_bytes)
        self._out = api.malloc(256)
        api.memset(self._buf, self.info.flush_bytes)
        self._k: Optional[dict[str, Any]] = None
        if compile_helpers:
            try:
                self._k = api.compile_helpers(d["arch"])
            except Exception as exc:  # no NVRTC/hiprtc: memset flush, no delay kernel
                self.note = f"timer helpers unavailable ({exc}); flushing with memset and without a delay kernel"
        self.can_delay = self._k is not None
        self.ticks_per_s = api.timer_hz()
        self._events: list[tuple[Any, Any]] = []
        self.floor_s: Optional[float] = None
        api.sync()

    def _flush(self) -> None:
        mode = self.flush_mode
        if mode == "none":
            return
        if mode in ("write", "both") or self._k is None:
            self.api.memset(self._buf, self.info.flush_bytes)
        if mode in ("read", "both") and self._k is not None:
            self.api.launch(
                self._k["gpuenv_read"], 4 * self.sm_count, 256,
                [(self._buf, ctypes.c_void_p), (self.info.flush_bytes // 16, ctypes.c_ulonglong),
                 (self._out, ctypes.c_void_p)],
            )

    def delay(self, seconds: float) -> None:
        if seconds > 0 and self._k is not None:
            ticks = max(1, int(seconds * self.ticks_per_s))
            self.api.launch(self._k["gpuenv_spin"], 1, 1, [(ticks, ctypes.c_ulonglong)])

    def sync(self) -> None:
        self.api.sync()

    def enqueue(
        self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
        head_delay_s: float, repeat: int,
    ) -> Any:
        api = self.api
        while len(self._events) < len(schedule):
            self._events.append((api.event_create(), api.event_create()))
        return enqueue_samples(self._events[: len(schedule)], api.event_record, self._flush if flush else None,
                               self.delay, fns, schedule, delay_s=delay_s, head_delay_s=head_delay_s, repeat=repeat)

    def collect(self, pairs: Any) -> list[float]:
        self.api.event_sync(pairs[-1][1])
        return [self.api.elapsed_s(a, b) for a, b in pairs]

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        half = max(16, int(nbytes) // 2)
        src, dst = self.api.malloc(half), self.api.malloc(half)
        self.api.memset(src, half)
        return lambda: self.api.memcpy(dst, src, half)
