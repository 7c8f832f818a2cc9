"""Timer backend without torch: events, flush and delay on one stream of a runtime object.

``DriverBackend`` runs on the runtime layer's object for its backend and device
(``pytest_gpuenv.runtime.get``: the CUDA driver API through cuda-python, or HIP through hip-python);
errors are the runtime's ``KernelLaunchError``. The delay and the read-flush are two tiny kernels
(``HELPERS_SRC``) built by ``pytest_gpuenv.rtc.compile_kernel`` (the one compile path and cache:
hiprtc or hipcc for gfx, NVRTC or nvcc for sm) and launched through the runtime on the backend's
stream; where no compiler is present the flush falls back to a memset and there is no delay kernel.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._device import DeviceInfo, cache_facts, format_uuid
from pytest_gpuenv.perf._schedule import enqueue_samples
from pytest_gpuenv.rtc import compile_kernel

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
/* four independent loads a step keep more reads in flight than one at a time: a shorter flush */
extern "C" __global__ void gpuenv_read(const float4* p, unsigned long long n4, float* out) {
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
  unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * step < n4; i += 4 * step) {
    float4 v0 = p[i], v1 = p[i + step], v2 = p[i + 2 * step], v3 = p[i + 3 * step];
    a0 += v0.x + v0.y + v0.z + v0.w;
    a1 += v1.x + v1.y + v1.z + v1.w;
    a2 += v2.x + v2.y + v2.z + v2.w;
    a3 += v3.x + v3.y + v3.z + v3.w;
  }
  for (; i < n4; i += step) {
    float4 v = p[i];
    a0 += v.x + v.y + v.z + v.w;
  }
  float acc = a0 + a1 + a2 + a3;
  if (acc == 1.2345e-30f) out[0] = acc;  /* never true: keeps the loads */
}
"""


HELPERS = ("gpuenv_spin", "gpuenv_read")


def read_dims(sm_count: int) -> tuple[int, int]:
    """(blocks, threads per block) of a ``gpuenv_read`` launch: 4 blocks of 256 threads per SM/CU."""
    return 4 * sm_count, 256


def build_helper(name: str, arch: str, device: int) -> Any:
    """One helper kernel (``HELPERS``) for ``arch`` (``wall_clock64()`` under ``-DGPUENV_AMD`` for gfx)."""
    defines = {"GPUENV_AMD": 1} if arch.startswith("gfx") else {}
    return compile_kernel(HELPERS_SRC, name, arch=arch, defines=defines, device=device)


def build_helpers(arch: str, device: int) -> dict[str, Any]:
    """The two helper kernels for ``arch``."""
    return {n: build_helper(n, arch, device) for n in HELPERS}


class DriverBackend:
    """Events, flush and delay on one stream of a runtime object (``runtime.get(backend, device)``)."""

    def __init__(self, rt: Any, flush: str = "read", compile_helpers: bool = True, stream: int = 0) -> None:
        self.runtime = rt
        self.stream = stream  # 0: the default (null) stream
        d = rt.describe()
        self.name = "cuda" if rt.vendor == "nvidia" else "hip"
        self.info = DeviceInfo(
            name=d["name"], vendor=rt.vendor, arch=d["arch"], index=rt.device, uuid=format_uuid(d["uuid"]),
            pci_bus_id=d["pci_bus_id"], runtime=d["runtime"], timer=self.name,
            **cache_facts(d["l2_bytes"], d["arch"], d["name"]),  # the runtime's L2 and the cache table
        )
        self.sm_count = int(d.get("sm_count") or 32)
        self.flush_mode = flush
        self.note: Optional[str] = None
        self._buf = rt.malloc(self.info.flush_bytes)
        self._out = rt.malloc(256)
        rt.memset(self._buf, self.info.flush_bytes, stream)
        #: helper name -> (Kernel, function loaded on the device); None without a compiler
        self._k: Optional[dict[str, tuple[Any, Any]]] = None
        self._read_args: Any = None  # the read-flush's packed arguments (the same every time)
        if compile_helpers:
            try:
                self._k = self._load_helpers(d["arch"])
            except Exception as exc:  # no NVRTC/hiprtc/nvcc/hipcc: memset flush, no delay kernel
                self.note = f"timer helpers unavailable ({exc}); flushing with memset and without a delay kernel"
        self.can_delay = self._k is not None
        #: the memory fence after the read kernel (NVIDIA, with the helpers); None: the flush settles with a delay
        self._fence = rt.fencer(self._out, stream) if self._k is not None and hasattr(rt, "fencer") else None
        self.ticks_per_s = rt.timer_hz()
        self._events: list[tuple[Any, Any]] = []
        self.floor_s: Optional[float] = None
        rt.synchronize(stream)

    @classmethod
    def for_backend(cls, backend: str, device: int = 0, flush: str = "read") -> DriverBackend:
        """The backend on the runtime of ``backend`` ("cuda" or "rocm") and ``device``, default stream."""
        from pytest_gpuenv import runtime

        return cls(runtime.get(backend, device), flush=flush)

    def _load_helpers(self, arch: str) -> dict[str, tuple[Any, Any]]:
        kernels = build_helpers(arch, self.runtime.device)
        loaded = {n: (k, self.runtime.load(k.binary, k.name)) for n, k in kernels.items()}
        self._read_args = kernels["gpuenv_read"].pack(self._buf, self.info.flush_bytes // 16, self._out,
                                                      device=self.runtime.device)
        return loaded

    def _launch(self, func: Any, grid: int, block: int, args: Any) -> None:
        self.runtime.launch(func, (grid, 1, 1), (block, 1, 1), args.address, 0, self.stream)

    def _flush(self) -> None:
        mode = self.flush_mode
        if mode == "none":
            return
        if mode in ("write", "both") or self._k is None:
            self.runtime.memset(self._buf, self.info.flush_bytes, self.stream)
        if mode in ("read", "both") and self._k is not None:
            self._launch(self._k["gpuenv_read"][1], *read_dims(self.sm_count), self._read_args)

    def flush_fn(self, settle_s: float = 0.0) -> Callable[[], None]:
        """The flush for one batch (on the backend's one stream; each launch selects the device again), then
        what lets it settle: after the read kernel on NVIDIA a memory fence (``CudaRuntime.fencer``, as the
        torch timer does), else a delay of ``settle_s``."""
        fence = self._fence if self.flush_mode in ("read", "both") else None

        def flush() -> None:
            self._flush()
            if fence is not None:
                fence()
            elif settle_s > 0:
                self.delay(settle_s)

        return flush

    def delay(self, seconds: float) -> None:
        if seconds > 0 and self._k is not None:
            ticks = max(1, int(seconds * self.ticks_per_s))
            kernel, func = self._k["gpuenv_spin"]
            self._launch(func, 1, 1, kernel.pack(ticks, device=self.runtime.device))

    def sync(self) -> None:
        self.runtime.synchronize(self.stream)

    def _record(self, event: Any) -> None:
        self.runtime.event_record(event, self.stream)

    def enqueue(
        self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
        head_delay_s: float, repeat: int,
    ) -> Any:
        rt = self.runtime
        while len(self._events) < len(schedule):
            self._events.append((rt.event_create(), rt.event_create()))
        return enqueue_samples(self._events[: len(schedule)], self._record, self.flush_fn(delay_s) if flush else None,
                               self.delay, fns, schedule, head_delay_s=head_delay_s, repeat=repeat)

    def collect(self, pairs: Any) -> list[float]:
        self.runtime.event_synchronize(pairs[-1][1])
        return [self.runtime.event_elapsed_s(a, b) for a, b in pairs]

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        half = max(16, int(nbytes) // 2)
        rt = self.runtime
        src, dst = rt.malloc(half), rt.malloc(half)
        rt.memset(src, half, self.stream)
        return lambda: rt.memcpy(dst, src, half, self.stream)
