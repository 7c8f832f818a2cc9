"""Timer backend on torch: events on torch's current stream, flush and delay as torch ops.

Imported only when a measurement runs with torch already in use.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._device import DeviceInfo, flush_bytes, format_uuid
from pytest_gpuenv.perf._engine import enqueue_samples


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
        arch = (getattr(props, "gcnArchName", None) or None) if hip else f"sm_{props.major}{props.minor}"
        l2 = int(getattr(props, "L2_cache_size", 0) or 0) or None
        pci = None
        if hasattr(props, "pci_bus_id"):
            pci = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        runtime = f"torch {torch.__version__} ({'hip ' + hip if hip else 'cuda ' + str(torch.version.cuda)})"
        self.info = DeviceInfo(
            name=torch.cuda.get_device_name(idx), vendor="amd" if hip else "nvidia", arch=arch, index=idx,
            uuid=format_uuid(getattr(props, "uuid", None)), pci_bus_id=pci, l2_bytes=l2,
            flush_bytes=flush_bytes(l2, arch), runtime=runtime, timer="torch",
        )
        self.flush_mode = flush
        with torch.cuda.device(idx):
            self._buf = torch.zeros(self.info.flush_bytes // 4, dtype=torch.float32, device=self.device)
            self._scratch = torch.zeros((), dtype=torch.float32, device=self.device)
        # torch.cuda._sleep spins for clock cycles; at the maximum clock a cycle is shortest, so using
        # it never makes a delay shorter than asked
        self.cycles_per_s = float(sm_hz or 2.0e9)
        self._events: list[Any] = []

    # ------------------------------------------------------------------ primitives
    def _flush(self) -> None:
        if self.flush_mode == "write":
            self._buf.zero_()
        elif self.flush_mode == "read":
            self.torch.sum(self._buf, 0, out=self._scratch)
        elif self.flush_mode == "both":
            self._buf.zero_()
            self.torch.sum(self._buf, 0, out=self._scratch)

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
                               self._flush if flush else None, self.delay, fns, schedule,
                               delay_s=delay_s, head_delay_s=head_delay_s, repeat=repeat)

    def collect(self, pairs: Any) -> list[float]:
        pairs[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in pairs]

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        """An equal-bytes device copy: reads nbytes/2 and writes nbytes/2."""
        n = max(1, int(nbytes) // 8)
        src = self.torch.ones(n, dtype=self.torch.float32, device=self.device)
        dst = self.torch.empty_like(src)
        return lambda: dst.copy_(src)
