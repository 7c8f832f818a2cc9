"""A fake ``cupti.cupti`` at the binding boundary and the event backend the CUPTI timer wraps, so its record
parsing, per-sample grouping and timer choice run on a CPU (tests/perf/test_perf_cupti.py)."""

from __future__ import annotations

import enum
import types
from typing import Any

from _perf_fake import FakeBackend, FakeClock

from pytest_gpuenv.perf import _cupti
from pytest_gpuenv.perf.bench import GpuBench, PerfContext


class Kind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 21


class Ext(enum.IntEnum):
    CUSTOM0 = 4
    CUSTOM1 = 5
    CUSTOM2 = 6


class FakeCupti:
    """What perf/_cupti.py uses of ``cupti.cupti``: kinds, enable, callbacks, external ids, flush.

    ``launch(ns)`` is a kernel the fake device runs: it gets the next correlation id, and an external
    correlation record when an id is pushed, as CUPTI gives them."""

    ActivityKind = Kind
    ExternalCorrelationKind = Ext

    def __init__(self) -> None:
        self.enabled: set[int] = set()
        self.callbacks: Any = None
        self.stack: list[int] = []
        self.corr = 0
        self.t = 1_000_000
        self.pending: list[Any] = []
        self.flushes = 0
        self.flags: list[int] = []  # the flag of each activity_flush_all
        #: plays a buffer holding an incomplete record: the default flush (flag 0) hands nothing over
        self.incomplete = False

    def activity_enable(self, kind: int) -> None:
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        assert requested() == (256 << 10, 0)
        self.callbacks = (requested, completed)

    def activity_push_external_correlation_id(self, kind: int, ext: int) -> None:
        assert kind == Ext.CUSTOM2
        self.stack.append(ext)

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        return self.stack.pop()

    def activity_flush_all(self, flag: int) -> None:
        self.flushes += 1
        self.flags.append(flag)
        if flag == 0 and self.incomplete:
            return
        recs, self.pending = self.pending, []
        self.callbacks[1](recs)

    #: what a serialised (KERNEL) record adds to a kernel's duration (the H200's 1.44 us: ``serial_ns``)
    serial_ns = 0

    def launch(self, ns: int, gap_ns: int = 0, kind: Any = None) -> None:
        if kind is None:  # a kernel, recorded as the kind that is enabled
            kind = Kind.KERNEL if Kind.KERNEL in self.enabled else Kind.CONCURRENT_KERNEL
        if kind == Kind.KERNEL:
            ns += self.serial_ns
        self.corr += 1
        self.t += gap_ns
        rec = types.SimpleNamespace(kind=kind, correlation_id=self.corr, start=self.t, end=self.t + ns)
        self.t += ns
        self.pending.append(rec)
        if self.stack:
            self.pending.append(types.SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, correlation_id=self.corr,
                                                      external_kind=Ext.CUSTOM2, external_id=self.stack[-1]))
        else:  # the runtime's own API calls outside a push carry another tool's ids, or none
            self.pending.append(types.SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, correlation_id=self.corr,
                                                      external_kind=Ext.CUSTOM0, external_id=999))


class FakeEvents(FakeBackend):
    """The event backend CUPTI wraps: flush, delay and sync (flush and delay launch fake kernels too)."""

    def __init__(self, cupti: FakeCupti, **kw: Any) -> None:
        super().__init__([5e-6], cv=0.0, floor_s=0.0, **kw)
        self.cupti = cupti
        self.info.vendor = "nvidia"

    def _flush(self) -> None:
        self.cupti.launch(50_000)

    def flush_fn(self, settle_s: float = 0.0) -> Any:
        def flush() -> None:  # the flush, then the delay that lets it settle (as where no fence follows it)
            self._flush()
            self.delay(settle_s)

        return flush

    def delay(self, seconds: float) -> None:
        super().delay(seconds)
        if seconds > 0:
            self.cupti.launch(int(seconds * 1e9))


def make(fake: FakeCupti, **ctx: Any) -> tuple[GpuBench, Any, PerfContext]:
    clock = FakeClock()
    events = FakeEvents(fake, clock=clock)
    backend = _cupti.CuptiBackend(events, _cupti.Activity(fake))
    ctx.setdefault("lock", lambda info: NullLock())
    c = PerfContext(backend_factory=lambda: backend, nodeid="t.py::test_k", test_name="test_k",
                    clock=clock, **ctx)
    return GpuBench(c), backend, c


class NullLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None
