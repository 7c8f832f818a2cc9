"""What users hold: ``GpuBench`` (the ``gpu_bench`` fixture), the ``PerfContext`` it is built from, and
the choice of timer backend (``select_backend``) and clock monitor (``default_monitor``).

``GpuBench`` times callables with a ``Sampler`` and returns a ``Measurement`` or ``Comparison``
(``_results``), whose assertions add ``PerfRecord`` objects to ``PerfContext.session``.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Optional

from pytest_gpuenv.perf import _stats
from pytest_gpuenv.perf._device import DeviceInfo
from pytest_gpuenv.perf._engine import Options, Sampler, event_floor
from pytest_gpuenv.perf._lock import gpu_lock
from pytest_gpuenv.perf._results import Comparison, GpuPerfWarning, Measurement, very_precise
from pytest_gpuenv.perf._units import check_count, check_ratio, format_rate
from pytest_gpuenv.perf.session import PerfSession

PERF_MODES = ("check", "strict", "warn", "off", "record")
MEASURE_MODES = ("cold", "hot", "auto")


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
    #: where measurements and assertions put their records (the plugin passes the run's session)
    session: PerfSession = field(default_factory=PerfSession)
    options: Options = field(default_factory=Options)
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
            if getattr(self._backend, "floor_s", None) is None:
                with self._lock()():
                    self._backend.floor_s = event_floor(self._backend)
            note = getattr(self._backend, "note", None)
            if note:
                warnings.warn(GpuPerfWarning(note), stacklevel=3)
        return self._backend

    @property
    def device(self) -> DeviceInfo:
        return self.backend.info

    def _options(self, max_time: Optional[float]) -> Options:
        o = Options(**{k: getattr(self.ctx.options, k) for k in self.ctx.options.__dataclass_fields__})
        o.max_time = self.ctx.max_time if max_time is None else float(max_time)
        o.event_floor_s = float(getattr(self.backend, "floor_s", 0.0) or 0.0)
        if not o.max_time > 0:
            raise ValueError(f"invalid max_time={max_time!r}: expected seconds > 0")
        return o

    def _lock(self) -> Callable[[], ContextManager[Any]]:
        info = self._backend.info if self._backend is not None else self.backend.info
        if self.ctx.lock is not None:
            return lambda: self.ctx.lock(info)  # type: ignore[misc]
        return lambda: gpu_lock(info.lock_key, timeout=self.ctx.lock_timeout)

    def _name(self, fn: Any, name: Optional[str]) -> str:
        self._count += 1
        if name:
            return str(name)
        n = getattr(fn, "__name__", None)
        if n and n != "<lambda>":
            return n
        return self.ctx.test_name if self._count == 1 else f"{self.ctx.test_name}#{self._count}"

    def _sampler(self, fns: list[Callable[[], Any]], mode: str, max_time: Optional[float], name: str) -> Sampler:
        if mode not in MEASURE_MODES:
            raise ValueError(f"invalid mode={mode!r}: expected one of {', '.join(MEASURE_MODES)}")
        kw: dict[str, Any] = {}
        if self.ctx.clock is not None:
            kw["clock"] = self.ctx.clock
        b = self.backend
        return Sampler(b, fns, mode=mode, options=self._options(max_time), monitor=self._monitor,
                       lock=self._lock(), name=name, **kw)

    # ------------------------------------------------------------------ API
    def __call__(
        self,
        fn: Callable[[], Any],
        *,
        bytes: Optional[float] = None,
        flops: Optional[float] = None,
        name: Optional[str] = None,
        mode: str = "cold",
        max_time: Optional[float] = None,
    ) -> Measurement:
        """Time the device work ``fn`` enqueues on the current stream.

        :param bytes: bytes the call reads plus writes (for bandwidth).
        :param flops: floating-point operations per call (for the FLOP rate).
        :param mode: ``cold`` (L2 flushed before each sample; default), ``hot`` (back-to-back calls,
            warm caches), ``auto`` (cold, or hot for kernels under 5 us).
        :param max_time: cap in seconds (default ``--gpuenv-perf-max-time``, 2 s).
        """
        if not callable(fn):
            raise TypeError(f"gpu_bench needs a callable that enqueues GPU work, got {fn!r}")
        nbytes = check_count(bytes, "bytes")
        nflops = check_count(flops, "flops")
        label = self._name(fn, name)
        s = self._sampler([fn], mode, max_time, label)
        s.run()
        m = Measurement(self, s, label, nbytes, nflops)
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
        max_time: Optional[float] = None,
    ) -> Comparison:
        """``time(fast_fn) / time(reference_fn) <= at_most``, the two interleaved ABBA in one loop and
        decided on the median of per-pair ratios with its order-statistic interval."""
        __tracebackhide__ = True
        limit = check_ratio(at_most, "at_most")
        for f in (fast_fn, reference_fn):
            if not callable(f):
                raise TypeError(f"assert_ratio needs callables that enqueue GPU work, got {f!r}")
        label = self._name(fast_fn, name)
        ref_label = getattr(reference_fn, "__name__", "reference")
        s = self._sampler([fast_fn, reference_fn], mode, max_time, label)
        opts = s.opts

        def verdict() -> Optional[str]:
            if s.n < opts.min_verdict_samples:
                return None
            _m, lo, hi = _stats.summarize(s.ratios(), opts.confidence)
            return _stats.decide(lo, hi, limit, upper=True, guard=opts.guard)

        s.run(lambda _s: verdict() is not None or very_precise(s, s.ratios()))
        c = Comparison(self, s, label, ref_label, limit)
        c._emit_warnings()
        c._conclude(verdict())
        return c

    def copy_bandwidth(self, nbytes: float) -> float:
        """Bytes/s of an equal-bytes device copy (read nbytes/2, write nbytes/2), measured once per
        device and size in this process."""
        info = self.backend.info
        key = (info.lock_key, info.timer, int(nbytes))
        if key not in _COPY_CACHE:
            fn = self.backend.copy_fn(int(nbytes))
            s = self._sampler([fn], "cold", None, f"copy {format_rate(nbytes, 'B')}")
            s.run()
            _COPY_CACHE[key] = nbytes / s.stats()[0]
            m = Measurement(self, s, s.name, float(nbytes), None)
            m._add("copy", verdict=None)
        return _COPY_CACHE[key]


def select_backend(env: Any = None, device: Optional[int] = None, timer: Optional[str] = None) -> Any:
    """torch's events when torch is in use, else the driver API of the environment's backend.

    ``timer`` (or ``$GPUENV_PERF_TIMER``): ``torch``, ``cuda``, ``hip`` or ``auto``.
    ``$GPUENV_PERF_FLUSH``: ``read`` (default), ``write``, ``both`` or ``none``.
    """
    timer = (timer or os.environ.get("GPUENV_PERF_TIMER") or "auto").lower()
    flush = os.environ.get("GPUENV_PERF_FLUSH", "read").lower()
    key = (timer, device, flush)
    if key in _BACKENDS:
        return _BACKENDS[key]
    if timer == "auto":
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
        if mon is not None and mon.max_mhz:
            b.cycles_per_s = mon.max_mhz * 1e6
    elif timer in ("cuda", "hip"):
        from pytest_gpuenv.perf._driver import DriverBackend

        b = DriverBackend.for_backend("cuda" if timer == "cuda" else "rocm", device or 0, flush=flush)
    else:
        raise ValueError(f"invalid timer {timer!r}: expected torch, cuda, hip or auto")
    if b.info.vendor == "nvidia" and not b.info.driver:
        from pytest_gpuenv.runtime.nvml import driver_version

        b.info.driver = driver_version()
    _BACKENDS[key] = b
    return b


_BACKENDS: dict[Any, Any] = {}
_MONITORS: dict[Any, Any] = {}


def default_monitor(backend: Any) -> Any:
    """The NVML clock and process monitor of the backend's device, one per device and process; None
    off NVIDIA or without NVML."""
    info = backend.info
    if info.vendor != "nvidia":
        return None
    key = info.lock_key
    if key not in _MONITORS:
        from pytest_gpuenv.runtime.nvml import Monitor

        m = Monitor(info.uuid, info.pci_bus_id)
        _MONITORS[key] = m if m.available else None
    return _MONITORS[key]
