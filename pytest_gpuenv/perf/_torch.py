"""Timer backend on torch: events on torch's current stream, the delay a torch op, the flush one kernel
and a memory fence.

On NVIDIA the read flush is ``_driver``'s ``gpuenv_read`` kernel launched by one ``cuLaunchKernel`` on
torch's current stream (``runtime.cuda.CudaRuntime.launcher``): it costs the host less than ``torch.sum``
over the rows, so a cold sample takes less wall time, and leaves the cold medians as they were. Where
cuda-python or a compiler for the helper is missing, and on AMD, the flush is ``torch.sum`` over rows of
4,096 floats: ROCm builds of torch carry their own HIP runtime, and a stream of it is no handle for
the one hip-python loads.

After the read kernel the device settles with a memory fence, ``cuStreamWriteValue32`` on the same
stream (``CudaRuntime.fencer``), in place of the post-flush delay kernel (``torch.cuda._sleep``), which
stays where there is no read kernel. Without either, the kernel after the flush reads longer; the fence
settles it as well as the delay does, at a fraction of the delay launch's host time and with no records
for CUPTI to parse.

The flush and delay are plain launches, not a captured CUDA graph: a graph replay of them costs the host
less, but the kernel after a replay reads longer, by CUPTI and by events alike.

Figures for each of these choices: docs/explanation/timer.md, "Measurements behind the design".

Imported only when a measurement runs with torch already in use.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._device import DeviceInfo, cache_facts, format_uuid
from pytest_gpuenv.perf._schedule import enqueue_samples

#: ticks per second of AMD's ``wall_clock64()`` (hipDeviceAttributeWallClockRate, read by ROCr from
#: amdgpu's GPU counter): the 100 MHz reference clock (``soc21_get_xclk`` in amdgpu's soc21.c; 99.81 MHz
#: on APUs, where 100 MHz makes a delay 0.2 % longer, never shorter)
WALL_CLOCK_HZ = 100e6
#: the counter rate assumed when nothing says the device's maximum clock
FALLBACK_CLOCK_HZ = 2.0e9


def sleep_counter(hip: bool, arch: Optional[str]) -> str:
    """What ``torch.cuda._sleep(n)`` counts n of: PyTorch's ``aten/src/ATen/cuda/Sleep.cu`` spins on
    ``wall_clock64()`` where ``__GFX11__`` is defined (every gfx11 target) and on ``clock64()`` elsewhere,
    which counts core clock cycles (clr's ``amd_device_functions.h``: "GPU core cycle count"; NVIDIA: SM
    cycles). Returns "wall clock" or "core clock"."""
    return "wall clock" if hip and (arch or "").startswith("gfx11") else "core clock"


def sleep_rate(hip: bool, arch: Optional[str], props: Any, max_mhz: Optional[float] = None) -> float:
    """Ticks per second of the counter ``torch.cuda._sleep`` spins on (``sleep_counter``).

    Core clock: the highest of the device properties' ``clock_rate`` (kHz; HIP's and CUDA's peak clock) and
    the monitor's maximum clock (NVML, amdsmi), so a delay is never shorter than asked (at a lower clock a
    cycle lasts longer); 2 GHz when neither is known. Wall clock: ``WALL_CLOCK_HZ``.
    """
    if sleep_counter(hip, arch) == "wall clock":
        return WALL_CLOCK_HZ
    try:
        khz = float(getattr(props, "clock_rate", 0) or 0)
    except (TypeError, ValueError):
        khz = 0.0
    rates = [r for r in (khz * 1e3, float(max_mhz or 0) * 1e6) if r > 0]
    return max(rates) if rates else FALLBACK_CLOCK_HZ


class TorchBackend:
    name = "torch"
    can_delay = True
    #: empty event pair time, calibrated by GpuBench on first use
    floor_s = None

    def __init__(self, device: Optional[int] = None, flush: str = "read", sm_hz: Optional[float] = None) -> None:
        import torch

        self.torch: Any = torch  # its private helpers (_sleep) and Event are untyped
        idx = torch.cuda.current_device() if device is None else int(device)
        self.device = torch.device("cuda", idx)
        props = torch.cuda.get_device_properties(idx)
        hip = getattr(torch.version, "hip", None)
        # gcnArchName carries target features ("gfx942:sramecc+:xnack-"): the arch is the part before them,
        # as in HIP's describe() and the detection probe
        arch = (str(getattr(props, "gcnArchName", "") or "").split(":")[0] or None) if hip else \
            f"sm_{props.major}{props.minor}"
        l2 = int(getattr(props, "L2_cache_size", 0) or 0) or None
        pci = None
        if hasattr(props, "pci_bus_id"):
            pci = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        runtime = f"torch {torch.__version__} ({'hip ' + hip if hip else 'cuda ' + str(torch.version.cuda)})"
        name = torch.cuda.get_device_name(idx)
        self.info = DeviceInfo(
            name=name, vendor="amd" if hip else "nvidia", arch=arch, index=idx,
            uuid=format_uuid(getattr(props, "uuid", None)), pci_bus_id=pci, runtime=runtime, timer="torch",
            **cache_facts(l2, arch, name),
        )
        self.flush_mode = flush
        with torch.cuda.device(idx):
            # without the kernel, the read flush sums rows of 4,096 floats: one kernel. A sum of the whole
            # buffer to one value also memsets its blocks' semaphores, one more operation per sample. Rows of
            # 4,096 read fastest of the widths tried (figures: docs/explanation/timer.md)
            rows = -(-self.info.flush_bytes // 16384)
            self._buf = torch.zeros((rows, 4096), dtype=torch.float32, device=self.device)
            self._row_sums = torch.zeros(rows, dtype=torch.float32, device=self.device)
        self._hip, self._props = bool(hip), props
        #: the read flush kernel (NVIDIA): (runtime, function, packed arguments, (blocks, threads)), or None
        self._read: Optional[tuple[Any, Any, Any, tuple[int, int]]] = None
        #: why the read flush is ``torch.sum`` where the kernel could have read (None: the kernel reads)
        self.flush_note: Optional[str] = "AMD: torch.sum" if hip else None
        if not hip and flush in ("read", "both"):
            self._read, self.flush_note = _read_kernel(idx, str(arch), self._buf, self._row_sums,
                                                       int(getattr(props, "multi_processor_count", 0) or 32))
        #: ticks per second of the counter torch.cuda._sleep spins on (``sleep_rate``)
        self.cycles_per_s = float(sm_hz) if sm_hz else sleep_rate(self._hip, arch, props)
        self._events: list[Any] = []

    def use_max_clock(self, max_mhz: Optional[float]) -> None:
        """Take the monitor's maximum clock (MHz) into the delay's rate where ``_sleep`` counts core cycles."""
        self.cycles_per_s = sleep_rate(self._hip, self.info.arch, self._props, max_mhz)

    # ------------------------------------------------------------------ primitives
    def flush_fn(self, settle_s: float = 0.0) -> Callable[[], None]:
        """The flush for one batch, on torch's current stream, and then what lets it settle: the memory fence
        after the read kernel, else a delay of ``settle_s`` (the module's docstring). The kernel's launch and
        the fence are made here when this device is torch's current one (its context is then the current
        one, and torch's device guards restore it around each op of the batch); otherwise the batch flushes
        with ``torch.sum``, so the thread's current device stays the caller's."""
        stream = int(self.torch.cuda.current_stream(self.device).cuda_stream)
        here = self.torch.cuda.current_device() == self.device.index
        return self._make_flush(stream, self._read if here else None, settle_s)

    def _make_flush(self, stream: int, read: Optional[tuple[Any, Any, Any, tuple[int, int]]],
                    settle_s: float) -> Callable[[], None]:
        steps: list[Callable[[], Any]] = []
        if self.flush_mode in ("write", "both"):
            steps.append(self._buf.zero_)
        fenced = read is not None and self.flush_mode in ("read", "both")
        if self.flush_mode in ("read", "both"):
            if read is not None:
                rt, func, args, (blocks, threads) = read
                steps.append(rt.launcher(func, (blocks, 1, 1), (threads, 1, 1), args, stream))
                steps.append(rt.fencer(self._row_sums.data_ptr(), stream))  # scratch: the kernel never writes it
            else:
                buf, sums, torch_sum = self._buf, self._row_sums, self.torch.sum
                steps.append(lambda: torch_sum(buf, 1, out=sums))
        if not fenced and settle_s > 0:
            steps.append(lambda: self.delay(settle_s))

        def flush(steps: tuple[Callable[[], Any], ...] = tuple(steps), owner: TorchBackend = self) -> None:
            for step in steps:  # ``owner`` keeps the buffer the kernel reads alive with the flush
                step()

        return flush

    def delay(self, seconds: float) -> None:
        if seconds > 0:
            self.torch.cuda._sleep(max(1, int(seconds * self.cycles_per_s)))

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def _event_pairs(self, n: int) -> list[Any]:
        E = self.torch.cuda.Event
        while len(self._events) < n:
            self._events.append((E(enable_timing=True), E(enable_timing=True)))
        return self._events[:n]

    # ------------------------------------------------------------------ backend protocol
    def enqueue(
        self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
        head_delay_s: float, repeat: int,
    ) -> Any:
        stream = self.torch.cuda.current_stream(self.device)
        return enqueue_samples(self._event_pairs(len(schedule)), lambda ev: ev.record(stream),
                               self.flush_fn(delay_s) if flush else None, self.delay, fns, schedule,
                               head_delay_s=head_delay_s, repeat=repeat)

    def collect(self, pairs: Any) -> list[float]:
        pairs[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in pairs]

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        """An equal-bytes device copy: reads nbytes/2 and writes nbytes/2."""
        n = max(1, int(nbytes) // 8)
        src = self.torch.ones(n, dtype=self.torch.float32, device=self.device)
        dst = self.torch.empty_like(src)
        return lambda: dst.copy_(src)


def _read_kernel(device: int, arch: str, buf: Any, out: Any, sm_count: int) -> tuple[Any, Optional[str]]:
    """((runtime, function, packed arguments, (blocks, threads)), None) for ``_driver``'s read flush over ``buf`` on an
    NVIDIA ``device``, or (None, why not): no cuda-python, no NVRTC or nvcc, a runtime error."""
    try:
        from pytest_gpuenv import runtime
        from pytest_gpuenv.perf._driver import build_helper, read_dims

        kernel = build_helper("gpuenv_read", arch, device)
        rt = runtime.get("cuda", device)
        func = rt.load(kernel.binary, kernel.name)
        args = kernel.pack(buf.data_ptr(), buf.numel() // 4, out.data_ptr(), device=device)
    except Exception as exc:  # the flush stays a torch op, as exact but dearer to enqueue
        return None, f"torch.sum ({type(exc).__name__}: {exc})"
    return (rt, func, args, read_dims(sm_count)), None
