"""Timer backend on torch: events on torch's current stream, flush and delay as torch ops.

The flush and delay before each cold sample are captured once as a graph (``torch.cuda.CUDAGraph``, a
HIP graph on ROCm) and replayed: one launch where the plain calls make three (the flush's memset and
reduction, and the delay). On the H200 under CUPTI that took the host 8 us per sample where the plain
calls took 20-28 us, and the host's enqueue time is what a cold sample of a microsecond kernel costs.
Where capture fails, the plain calls run.

Imported only when a measurement runs with torch already in use.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._device import DeviceInfo, cache_facts, format_uuid
from pytest_gpuenv.perf._schedule import cold_prelude, enqueue_samples

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

        self.torch = torch
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
            self._buf = torch.zeros(self.info.flush_bytes // 4, dtype=torch.float32, device=self.device)
            self._scratch = torch.zeros((), dtype=torch.float32, device=self.device)
        self._hip, self._props = bool(hip), props
        #: ticks per second of the counter torch.cuda._sleep spins on (``sleep_rate``)
        self.cycles_per_s = float(sm_hz) if sm_hz else sleep_rate(self._hip, arch, props)
        self._events: list[Any] = []
        #: (flush mode, delay ticks) -> the captured prelude's replay, or None where capture failed
        self._graphs: dict[tuple[Any, int], Optional[Callable[[], None]]] = {}

    def use_max_clock(self, max_mhz: Optional[float]) -> None:
        """Take the monitor's maximum clock (MHz) into the delay's rate where ``_sleep`` counts core cycles."""
        self.cycles_per_s = sleep_rate(self._hip, self.info.arch, self._props, max_mhz)

    # ------------------------------------------------------------------ primitives
    def _flush(self) -> None:
        if self.flush_mode == "write":
            self._buf.zero_()
        elif self.flush_mode == "read":
            self.torch.sum(self._buf, 0, out=self._scratch)
        elif self.flush_mode == "both":
            self._buf.zero_()
            self.torch.sum(self._buf, 0, out=self._scratch)

    def _ticks(self, seconds: float) -> int:
        return max(1, int(seconds * self.cycles_per_s)) if seconds > 0 else 0

    def delay(self, seconds: float) -> None:
        if seconds > 0:
            self.torch.cuda._sleep(self._ticks(seconds))

    def prelude(self, flush: bool, delay_s: float) -> Optional[Callable[[], None]]:
        """Before each sample: the flush (when ``flush``) and a ``delay_s`` delay, replayed as one graph
        (the module's docstring); the plain calls where capture failed."""
        plain = cold_prelude(self._flush if flush else None, self.delay, delay_s)
        if plain is None:
            return None
        key = (self.flush_mode if flush else None, self._ticks(delay_s))
        if key not in self._graphs:
            self._graphs[key] = self._capture(plain)
        return self._graphs[key] or plain

    def _capture(self, body: Callable[[], None]) -> Optional[Callable[[], None]]:
        """``body``'s device work captured on a side stream (run once there first, so nothing is
        initialised during capture); the graph's ``replay`` launches it on the current stream."""
        torch = self.torch
        try:
            graph = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                body()
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    body()
                finally:
                    graph.capture_end()
            side.synchronize()
            return graph.replay  # type: ignore[no-any-return]
        except Exception:  # no graphs here (an old runtime, a capture this op refuses): plain calls
            return None

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
                               self.prelude(flush, delay_s), self.delay, fns, schedule,
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
