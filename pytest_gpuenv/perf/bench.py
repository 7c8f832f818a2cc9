"""What users hold: ``GpuBench`` (the ``gpu_bench`` fixture), the ``PerfContext`` it is built from, and
the choice of timer backend (``select_backend``) and clock monitor (``default_monitor``).

``GpuBench`` times callables with a ``Sampler`` and returns a ``Measurement`` or ``Comparison``
(``_results``), whose assertions add ``PerfEntry`` objects to ``PerfContext.session``.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ContextManager, Optional

from pytest_gpuenv.base.lock import gpu_lock
from pytest_gpuenv.base.model import PERF_MODES
from pytest_gpuenv.perf._comparison import Comparison
from pytest_gpuenv.perf._device import DeviceInfo
from pytest_gpuenv.perf._engine import Sampler
from pytest_gpuenv.perf._results import GpuPerfWarning, Measurement, ResultContext, very_precise
from pytest_gpuenv.perf._sampling import SamplingOptions
from pytest_gpuenv.perf._schedule import event_floor
from pytest_gpuenv.perf._units import check_count, check_ratio, format_rate, parse_time, printable
from pytest_gpuenv.perf.session import PerfSession

MEASURE_MODES = ("cold", "hot", "auto")
#: ``timer=`` of a measurement: the profiler timer where it can time the callable, or one of the two
TIMERS = ("auto", "cupti", "events")


@dataclass
class PerfContext:
    """Everything a ``GpuBench`` needs from the session; tests build one by hand with fakes."""

    backend_factory: Callable[[], Any]
    monitor_factory: Callable[[Any], Any] = lambda backend: None
    nodeid: str = "<unknown>"
    test_name: str = "test"
    perf_mode: str = "check"
    max_time: float = 2.0
    baselines: Optional[str] = None
    #: where measurements and assertions put their entries (the plugin passes the run's session)
    session: PerfSession = field(default_factory=PerfSession)
    options: SamplingOptions = field(default_factory=SamplingOptions)
    #: driver version from the environment model (for the baseline key)
    driver: Optional[str] = None
    lock: Optional[Callable[[DeviceInfo], ContextManager[Any]]] = None
    lock_timeout: float = 600.0
    clock: Optional[Callable[[], float]] = None


# copy bandwidth measured once per process (xdist worker) per device and size
_COPY_CACHE: dict[Any, float] = {}


class GpuBench:
    """The ``gpu_bench`` fixture: ``gpu_bench(fn, bytes=..., flops=...)`` times the GPU work ``fn``
    enqueues and returns a :class:`Measurement`; ``gpu_bench.assert_ratio`` compares two callables."""

    __module__ = "pytest_gpuenv.perf"

    def __init__(self, ctx: PerfContext) -> None:
        if ctx.perf_mode not in PERF_MODES:
            raise ValueError(f"invalid perf mode {ctx.perf_mode!r}: expected one of {', '.join(PERF_MODES)}")
        self.ctx = ctx
        self._backend: Any = None
        self._monitor: Any = None
        self._count = 0

    # ------------------------------------------------------------------ plumbing
    @property
    def backend(self) -> Any:
        if self._backend is None:
            self._backend = self.ctx.backend_factory()
            if self.ctx.driver and not self._backend.info.driver:
                self._backend.info.driver = self.ctx.driver
            self._monitor = self.ctx.monitor_factory(self._backend)
            self._calibrate(self._backend)
            note = getattr(self._backend, "note", None)
            if note:
                warnings.warn(GpuPerfWarning(note), stacklevel=3)
        return self._backend

    @property
    def device(self) -> DeviceInfo:
        info: DeviceInfo = self.backend.info
        return info

    def _calibrate(self, b: Any) -> None:
        """Time an empty event pair once per event backend (the event timer's zero)."""
        if getattr(b, "floor_s", None) is None:
            with self._lock()():
                b.floor_s = event_floor(b)

    def _timer(self, fns: list[Callable[[], Any]], timer: Optional[str]) -> tuple[Any, Optional[str]]:
        """(backend, why the event timer measures) for ``timer``: the profiler timer (CUPTI) when the
        default backend has one and it sees device work from every callable, else the event timer. The
        probe runs the callables: the caller holds the GPU's lock from here to the last
        sample, so no other worker measures in between."""
        timer = "auto" if timer is None else str(timer).lower()
        if timer not in TIMERS:
            raise ValueError(f"invalid timer={timer!r}: expected one of {', '.join(TIMERS)}")
        b = self.backend
        events = getattr(b, "events", None)
        if events is None:  # no profiler timer here: the backend says why
            if timer == "cupti":
                raise ValueError(f"timer='cupti' is not available: {getattr(b, 'timer_note', None) or b.name}")
            return b, getattr(b, "timer_note", None)
        why = None
        if timer == "events":
            why = "event timer requested (timer='events')"
        elif not all(b.prepare(fns)) and timer == "auto":  # prepare also picks CUPTI's kernel record kind
            why = "CUPTI saw no kernel, memcpy or memset from the callable: event timer"
        if why is None:
            return b, None
        self._calibrate(events)
        return events, why

    def _sampling_options(self, max_time: Optional[float | str], backend: Any = None) -> SamplingOptions:
        o = replace(self.ctx.options)
        # seconds, or a duration such as "500ms"; anything else is a ValueError naming it
        o.max_time = self.ctx.max_time if max_time is None else parse_time(max_time, "max_time")
        b = self.backend if backend is None else backend
        o.event_floor_s = float(getattr(b, "floor_s", 0.0) or 0.0)
        o.empty_below_s = float(getattr(b, "empty_below_s", o.empty_below_s))
        return o

    def _lock(self) -> Callable[[], ContextManager[Any]]:
        info = self._backend.info if self._backend is not None else self.backend.info
        if self.ctx.lock is not None:
            return lambda: self.ctx.lock(info)  # type: ignore[misc]
        return lambda: gpu_lock(info.lock_key, timeout=self.ctx.lock_timeout)

    def _result_context(self) -> ResultContext:
        """What the results of this bench take from it (once the backend exists)."""
        c = self.ctx
        return ResultContext(c.nodeid, c.perf_mode, c.baselines, c.session.add, self.copy_bandwidth,
                             getattr(self.backend, "monitor_note", None))

    def _name(self, fn: Any, name: Optional[str]) -> str:
        self._count += 1
        if name:
            return printable(str(name))
        n = getattr(fn, "__name__", None)
        if n and n != "<lambda>":
            return printable(str(n))
        test = printable(self.ctx.test_name)
        return test if self._count == 1 else f"{test}#{self._count}"

    def _sampler(self, fns: list[Callable[[], Any]], mode: str, max_time: Optional[float | str], name: str,
                 timer: Optional[str] = None) -> Sampler:
        if mode not in MEASURE_MODES:
            raise ValueError(f"invalid mode={mode!r}: expected one of {', '.join(MEASURE_MODES)}")
        kw: dict[str, Any] = {}
        if self.ctx.clock is not None:
            kw["clock"] = self.ctx.clock
        b, why = self._timer(fns, timer)
        s = Sampler(b, fns, mode=mode, options=self._sampling_options(max_time, b), monitor=self._monitor,
                    lock=self._lock(), name=name, **kw)
        s.timer_note = why
        s.cupti_records = getattr(b, "cupti_records", None)
        return s

    # ------------------------------------------------------------------ API
    def __call__(
        self,
        fn: Callable[[], Any],
        *,
        bytes: Optional[float] = None,
        flops: Optional[float] = None,
        name: Optional[str] = None,
        mode: str = "cold",
        max_time: Optional[float | str] = None,
        timer: Optional[str] = None,
    ) -> Measurement:
        """Time the device work ``fn`` enqueues on the current stream.

        :param bytes: bytes the call reads plus writes (for bandwidth).
        :param flops: floating-point operations per call (for the FLOP rate).
        :param mode: ``cold`` (L2 flushed before each sample; default), ``hot`` (back-to-back calls,
            warm caches), ``auto`` (cold, or hot for kernels under 5 us).
        :param max_time: cap in seconds, or a duration such as ``"500ms"`` (default ``--gpuenv-perf-max-time``,
            2 s).
        :param timer: ``auto`` (default: CUPTI's kernel durations where cupti-python is installed on
            NVIDIA and the callable launches device work, else events), ``cupti`` or ``events``.
        """
        if not callable(fn):
            raise TypeError(f"gpu_bench needs a callable that enqueues GPU work, got {fn!r}")
        nbytes = check_count(bytes, "bytes")
        nflops = check_count(flops, "flops")
        label = self._name(fn, name)
        with self._lock()():  # one hold from the timer's probe to the last sample (the lock is reentrant)
            s = self._sampler([fn], mode, max_time, label, timer)
            s.run()
        m = Measurement(self._result_context(), s, label, nbytes, nflops)
        m._emit_warnings()
        m._add("measure", verdict=None)
        return m

    def assert_ratio(
        self,
        fast_fn: Callable[[], Any],
        reference_fn: Callable[[], Any],
        *,
        at_most: float = 1.2,
        name: Optional[str] = None,
        mode: str = "cold",
        max_time: Optional[float | str] = None,
        timer: Optional[str] = None,
    ) -> Comparison:
        """``time(fast_fn) / time(reference_fn) <= at_most``, the two interleaved ABBA in one loop and
        decided on the median of per-pair ratios with its order-statistic interval."""
        __tracebackhide__ = True
        limit = check_ratio(at_most, "at_most")
        for f in (fast_fn, reference_fn):
            if not callable(f):
                raise TypeError(f"assert_ratio needs callables that enqueue GPU work, got {f!r}")
        label = self._name(fast_fn, name)
        ref_label = printable(str(getattr(reference_fn, "__name__", "reference")))
        with self._lock()():
            s = self._sampler([fast_fn, reference_fn], mode, max_time, label, timer)
            c = Comparison(self._result_context(), s, label, ref_label, limit)
            decider = c.decider()
            s.run(lambda _s: decider() is not None or very_precise(s, s.ratios()))
        c._emit_warnings()
        c._conclude(decider)
        return c

    def copy_bandwidth(self, nbytes: float, timer: Optional[str] = None) -> float:
        """Bytes/s of an equal-bytes device copy (read nbytes/2, write nbytes/2), measured once per
        device, timer and size in this process."""
        info = self.backend.info
        key = (info.lock_key, info.timer, timer, int(nbytes))
        if key not in _COPY_CACHE:
            fn = self.backend.copy_fn(int(nbytes))
            with self._lock()():
                s = self._sampler([fn], "cold", None, f"copy {format_rate(nbytes, 'B')}", timer)
                s.run()
            _COPY_CACHE[key] = nbytes / s.stats()[0]
            m = Measurement(self._result_context(), s, s.name, float(nbytes), None)
            m._add("copy", verdict=None)
        return _COPY_CACHE[key]


def select_backend(env: Any = None, device: Optional[int] = None, timer: Optional[str] = None) -> Any:
    """The event timer (torch's events when torch is in use, else the driver API of the environment's
    backend), inside CUPTI's kernel timer where that can run (``_cupti``).

    ``timer`` (or ``$GPUENV_PERF_TIMER``): ``auto`` (CUPTI where available), ``events`` (never CUPTI),
    or one event backend without CUPTI: ``torch``, ``cuda``, ``hip``.
    ``$GPUENV_PERF_FLUSH``: ``read`` (default), ``write``, ``both`` or ``none``.
    """
    timer = (timer or os.environ.get("GPUENV_PERF_TIMER") or "auto").lower()
    flush = os.environ.get("GPUENV_PERF_FLUSH", "read").lower()
    key = (timer, device, flush)
    if key in _BACKENDS:
        return _BACKENDS[key]
    requested, profile = timer, timer == "auto"
    if timer in ("auto", "events"):
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            timer = "torch"
        else:
            kind = getattr(env, "backend", None)
            timer = "hip" if kind == "rocm" else "cuda"
    if timer == "torch":
        from pytest_gpuenv.perf._torch import TorchBackend

        b: Any = TorchBackend(device, flush=flush)
        mon = default_monitor(b)
        b.use_max_clock(mon.max_mhz if mon is not None else None)  # the rate torch.cuda._sleep counts at
    elif timer in ("cuda", "hip"):
        from pytest_gpuenv.perf._driver import DriverBackend

        b = DriverBackend.for_backend("cuda" if timer == "cuda" else "rocm", device or 0, flush=flush)
    else:
        raise ValueError(f"invalid timer {timer!r}: expected auto, events, torch, cuda or hip")
    if b.info.vendor == "nvidia" and not b.info.driver:
        from pytest_gpuenv.runtime.nvml import driver_version

        b.info.driver = driver_version()
    b = _with_profiler(b) if profile else b
    if getattr(b, "events", None) is None and not getattr(b, "timer_note", None):
        b.timer_note = f"event timer requested (GPUENV_PERF_TIMER={requested})"
    _BACKENDS[key] = b
    return b


def _with_profiler(b: Any) -> Any:
    """``b`` inside CUPTI's timer on NVIDIA when cupti-python works; else ``b`` with ``timer_note``
    saying why the event timer measures."""
    from pytest_gpuenv.perf import _cupti

    if b.info.vendor != "nvidia":
        b.timer_note = _cupti.AMD_NOTE if b.info.vendor == "amd" else f"{b.info.vendor}: event timer"
        return b
    mod, why = _cupti.load_cupti()
    if mod is None:
        b.timer_note = f"CUPTI timer unavailable: {why}"
        return b
    try:
        return _cupti.CuptiBackend(b)
    except Exception as exc:  # CUPTI refused (another profiler attached, no permission): events measure
        b.timer_note = f"CUPTI timer unavailable: {type(exc).__name__}: {exc}"
        return b


_BACKENDS: dict[Any, Any] = {}
_MONITORS: dict[Any, Any] = {}


def default_monitor(backend: Any) -> Any:
    """The clock, throttle and process monitor of the backend's device (NVML on NVIDIA, amdsmi on AMD),
    one per device and process; None for another vendor or where the library is unavailable. Guards
    that are off, and why, are added to the backend's ``note`` (a GpuPerfWarning)."""
    info = backend.info
    if info.vendor not in ("nvidia", "amd"):
        return None
    key = info.lock_key
    if key not in _MONITORS:
        from pytest_gpuenv.runtime import amdsmi, nvml

        m = (nvml.Monitor if info.vendor == "nvidia" else amdsmi.Monitor)(info.uuid, info.pci_bus_id)
        _MONITORS[key] = (m if m.available else None, m.note)
    mon, note = _MONITORS[key]
    backend.monitor_note = note  # the perf table says which guards were off
    if note and note not in (getattr(backend, "note", None) or ""):
        backend.note = "; ".join(filter(None, [getattr(backend, "note", None), note]))
    return mon
