"""Does a callable wait for the device? Advice for ``Sampler``, before any sample is taken.

A callable that synchronises (``.item()``, ``.cpu()``, ``torch.cuda.synchronize()``) puts launch
latency into every sample. Two probes: a device delay queued ahead of the call shows up in the call's
host time when it waits; and, with torch imported, calls of ``torch.cuda.synchronize`` are counted.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, Sequence


class _SyncCounter:
    """Wraps ``torch.cuda.synchronize`` to count calls until ``restore``."""

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        self.orig = cuda.synchronize
        self.calls = 0

        def counting(*a: Any, **k: Any) -> Any:
            self.calls += 1
            return self.orig(*a, **k)

        cuda.synchronize = counting

    def restore(self) -> int:
        self.cuda.synchronize = self.orig
        return self.calls


def _count_torch_syncs() -> Optional[_SyncCounter]:
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is None or not hasattr(cuda, "synchronize"):
        return None
    return _SyncCounter(cuda)


def sync_warnings(backend: Any, fns: Sequence[Callable[[], Any]], probe_s: float, name: str) -> list[str]:
    """Call each of ``fns`` once behind a queued ``probe_s`` device delay; a warning per finding.

    Nothing waits for the delays: what the caller enqueues next (the warm-up) queues behind them, so the
    device runs the delay while the host enqueues (a wait would add milliseconds to every measurement)."""
    calls = 0
    for f in fns:
        if backend.can_delay:
            backend.delay(probe_s)
        counter = _count_torch_syncs()
        t = time.perf_counter()
        try:
            f()
        finally:
            host = time.perf_counter() - t
            calls += counter.restore() if counter else 0
        if backend.can_delay and host >= 0.8 * probe_s:
            return [
                f"{name}: the callable appears to synchronise with the device (its call "
                f"waited {host * 1e3:.1f} ms for a {probe_s * 1e3:.0f} ms queued "
                "delay); host waits such as .item(), .cpu() or torch.cuda.synchronize() inside "
                "it put launch latency into every sample"
            ]
    if calls:
        return [
            f"{name}: the callable called torch.cuda.synchronize() {calls} time(s); "
            "remove it: gpu_bench synchronises once per batch itself"
        ]
    return []
