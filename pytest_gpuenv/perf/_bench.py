"""What users hold: ``GpuBench`` (the ``gpu_bench`` fixture) and the ``Measurement`` it returns.

Each assertion is three-valued. It keeps sampling while the verdict is undecided and time is left
(sequential stopping), then acts on the verdict according to ``--gpuenv-perf``:

============  ===========================  ==========================
mode          FAIL                         INCONCLUSIVE
============  ===========================  ==========================
check         AssertionError               GpuPerfWarning
strict        AssertionError               AssertionError
warn          GpuPerfWarning               GpuPerfWarning
record        AssertionError               GpuPerfWarning (baselines stored)
============  ===========================  ==========================
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Optional, Union

import pytest

from pytest_gpuenv.perf import _baseline, _stats
from pytest_gpuenv.perf._device import DeviceInfo, peak_bandwidth
from pytest_gpuenv.perf._engine import Options, Sampler, event_floor
from pytest_gpuenv.perf._lock import gpu_lock
from pytest_gpuenv.perf._units import (
    check_count,
    check_ratio,
    check_unit_fraction,
    format_budget,
    format_rate,
    format_time,
    format_time_interval,
    parse_fraction,
    parse_time,
)

PERF_MODES = ("check", "strict", "warn", "off", "record")
MEASURE_MODES = ("cold", "hot", "auto")


class GpuPerfWarning(UserWarning):
    """An INCONCLUSIVE performance verdict, or a FAIL under ``--gpuenv-perf=warn``, or advice about
    how a callable was measured."""

    __module__ = "pytest_gpuenv.perf"


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
    records: list[dict[str, Any]] = field(default_factory=list)
    options: Options = field(default_factory=Options)
    #: driver version from the environment model (for the baseline key)
    driver: Optional[str] = None
    lock: Optional[Callable[[DeviceInfo], ContextManager[Any]]] = None
    lock_timeout: float = 600.0
    clock: Optional[Callable[[], float]] = None
    copy_cache: dict[Any, float] = field(default_factory=dict)


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
        self.ctx.records.append(m._record("measure", verdict=None))
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

        s.run(lambda _s: verdict() is not None or _very_precise(s, s.ratios()))
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
            self.ctx.records.append(m._record("copy", verdict=None))
        return _COPY_CACHE[key]


def _very_precise(s: Sampler, xs: list[float]) -> bool:
    """An undecided verdict whose interval is already a quarter of the precision target will not be
    decided by more samples: the value sits inside the guard band."""
    if len(xs) < s.opts.min_samples:
        return False
    med, lo, hi = _stats.summarize(xs, s.opts.confidence)
    return _stats.precise_enough(med, lo, hi, s.opts.rel_precision / 4)


class _Result:
    """Shared verdict handling for measurements and comparisons."""

    bench: GpuBench
    sampler: Sampler
    name: str

    @property
    def device(self) -> DeviceInfo:
        return self.sampler.backend.info

    @property
    def problems(self) -> list[str]:
        """Why a verdict would be INCONCLUSIVE (clocks, other processes, nothing enqueued)."""
        return list(self.sampler.problems.inconclusive)

    @property
    def notes(self) -> list[str]:
        return list(self.sampler.problems.warnings)

    def _emit_warnings(self) -> None:
        for w in self.sampler.problems.warnings:
            warnings.warn(GpuPerfWarning(w), stacklevel=4)

    def _base_record(self) -> dict[str, Any]:
        s = self.sampler
        info = self.device
        mon = s.monitor
        return {
            "nodeid": self.bench.ctx.nodeid,
            "name": self.name,
            "device": info.name,
            "arch": info.arch,
            "device_key": info.key,
            "uuid": info.uuid,
            "timer": info.timer,
            "mode": s.mode,
            "repeat": s.repeat,
            "flush_bytes": info.flush_bytes if s.mode == "cold" else 0,
            "n": s.n,
            "clocks": {
                "source": "nvml" if s.clock_mhz else None,
                "sm_mhz_min": min(s.clock_mhz) if s.clock_mhz else None,
                "sm_mhz_max": max(s.clock_mhz) if s.clock_mhz else None,
                "max_sm_mhz": getattr(mon, "max_mhz", None),
                "batches": s.batches,
                "discarded_batches": s.discarded_batches,
            },
            "foreign_processes": list(s.foreign),
            "problems": self.problems,
            "warnings": self.notes,
            "stop_reason": s.stop_reason,
            "spent_s": round(s.spent_s, 6),
            "host_enqueue_s": s.host_enqueue_s,
        }

    def _act(self, verdict: Optional[str], fail_msg: str, why: list[str]) -> None:
        __tracebackhide__ = True
        mode = self.bench.ctx.perf_mode
        if verdict == _stats.FAIL:
            if mode == "warn":
                warnings.warn(GpuPerfWarning(f"FAIL (--gpuenv-perf=warn): {fail_msg}"), stacklevel=4)
                return
            raise AssertionError(fail_msg)
        if verdict == _stats.INCONCLUSIVE:
            text = f"INCONCLUSIVE: {fail_msg}" + ("; " + "; ".join(why) if why else "")
            if mode == "strict":
                raise AssertionError(text + " (--gpuenv-perf=strict fails on INCONCLUSIVE)")
            warnings.warn(GpuPerfWarning(text), stacklevel=4)

    def _settle(self, verdict: Optional[str], one_sided: bool = True) -> tuple[str, list[str]]:
        """Apply measurement problems: nothing enqueued -> INCONCLUSIVE; throttling or another process
        turn FAIL into INCONCLUSIVE (a PASS under a slowed GPU still holds for one-sided limits)."""
        why = self.problems
        empty = any("enqueue no GPU work" in p for p in why)
        if verdict is None:
            if self.sampler.stop_reason == "time cap":
                why = why + [f"the interval still straddled the limit at the {self.sampler.opts.max_time:g} s time cap"]
            elif not why:
                why = why + ["the value lies within the guard band of the limit"]
            return _stats.INCONCLUSIVE, why
        if empty or (why and (verdict == _stats.FAIL or not one_sided)):
            return _stats.INCONCLUSIVE, why
        return verdict, why


class Measurement(_Result):
    """One callable's device time: ``median``, ``ci``, ``samples``, ``bandwidth``, ``flops_rate``."""

    __module__ = "pytest_gpuenv.perf"

    def __init__(self, bench: GpuBench, sampler: Sampler, name: str, nbytes: Optional[float],
                 nflops: Optional[float]) -> None:
        self.bench = bench
        self.sampler = sampler
        self.name = name
        self.bytes = nbytes
        self.flops = nflops

    def __repr__(self) -> str:
        return (f"<Measurement {self.name}: median {format_time(self.median)} "
                f"{format_time_interval(*self.ci, like=self.median)} n={self.n} on {self.device.name}>")

    # ------------------------------------------------------------------ numbers
    @property
    def samples(self) -> list[float]:
        """Seconds per call, in the order taken (hot mode: interval / repeat)."""
        return list(self.sampler.samples[0])

    @property
    def n(self) -> int:
        return self.sampler.n

    @property
    def median(self) -> float:
        return self.sampler.stats()[0]

    @property
    def ci(self) -> tuple[float, float]:
        _m, lo, hi = self.sampler.stats()
        return lo, hi

    @property
    def mode(self) -> str:
        return self.sampler.mode

    @property
    def bandwidth(self) -> Optional[float]:
        """Bytes/s at the median (``bytes`` as given: read plus written)."""
        return None if self.bytes is None else self.bytes / self.median

    @property
    def flops_rate(self) -> Optional[float]:
        return None if self.flops is None else self.flops / self.median

    @property
    def clocks(self) -> dict[str, Any]:
        return self._base_record()["clocks"]

    def _record(self, kind: str, *, verdict: Optional[str], budget: Optional[str] = None,
                extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        med, lo, hi = self.sampler.stats()
        r = self._base_record()
        r.update({
            "kind": kind, "statistic": "median", "unit": "s",
            "median_s": med, "ci_low_s": lo, "ci_high_s": hi, "value": med, "ci_low": lo, "ci_high": hi,
            "samples_s": self.samples, "bytes": self.bytes, "flops_count": self.flops,
            "bandwidth_Bps": None if self.bytes is None else self.bytes / med,
            "flops": None if self.flops is None else self.flops / med,
            "budget": budget, "verdict": verdict,
        })
        if extra:
            r.update(extra)
        return r

    def _refine(self, decider: Callable[[], Optional[str]]) -> Optional[str]:
        s = self.sampler
        if s.time_left() > 0 and decider() is None and not _very_precise(s, s.samples[0]):
            s.run(lambda _s: decider() is not None or _very_precise(s, s.samples[0]))
        return decider()

    def _decide_time(self, limit_s: float) -> Callable[[], Optional[str]]:
        o = self.sampler.opts

        def decider() -> Optional[str]:
            if self.n < o.min_verdict_samples:
                return None
            _m, lo, hi = self.sampler.stats()
            return _stats.decide(lo, hi, limit_s, upper=True, guard=o.guard)

        return decider

    # ------------------------------------------------------------------ assertions
    def assert_faster_than(self, budget: Union[str, float, dict[str, Any]]) -> str:
        """Median device time within ``budget`` ("250us", seconds, or ``{device name: budget}``; a
        device missing from the dict skips the test). Returns the verdict."""
        __tracebackhide__ = True
        limit = self._budget_for_device(budget)
        verdict, why = self._settle(self._refine(self._decide_time(limit)))
        med, lo, hi = self.sampler.stats()
        sign = ">" if verdict == _stats.FAIL or med > limit else "<="
        msg = (f"{self.name}: median {format_time(med)} {format_time_interval(lo, hi, like=med)} "
               f"{sign} budget {format_budget(limit)} on {self.device.name}")
        self.bench.ctx.records.append(
            self._record("time", verdict=verdict, budget=format_budget(limit), extra={"message": msg})
        )
        self._act(verdict, msg, why)
        return verdict

    def _budget_for_device(self, budget: Any) -> float:
        if isinstance(budget, dict):
            if not budget:
                raise ValueError("invalid budget {}: give at least one device name")
            parsed = {str(k): parse_time(v, f"time budget for {k!r}") for k, v in budget.items()}
            name = self.device.name
            for k, v in parsed.items():
                if k == name or k.lower() == name.lower():
                    return v
            pytest.skip(f"no time budget for {name}: budgets are given for {', '.join(sorted(parsed))}")
        return parse_time(budget)

    def assert_bandwidth(self, at_least: float = 0.8, of: str = "copy") -> str:
        """Bandwidth (``bytes`` / median time) at least ``at_least`` of the session's device-copy
        bandwidth (``of="copy"``) or of the device's peak from the datasheet table (``of="peak"``)."""
        __tracebackhide__ = True
        frac = check_unit_fraction(at_least, "at_least")
        if self.bytes is None:
            raise ValueError(f"{self.name}: assert_bandwidth needs bytes= given to gpu_bench(...)")
        if of == "copy":
            ref = self.bench.copy_bandwidth(self.bytes)
            what = "copy bandwidth"
        elif of == "peak":
            ref_or_none = peak_bandwidth(self.device.name)
            if ref_or_none is None:
                pytest.skip(f"no peak bandwidth known for {self.device.name}; use of='copy'")
            ref = float(ref_or_none)  # type: ignore[arg-type]
            what = "peak bandwidth"
        else:
            raise ValueError(f"invalid of={of!r}: expected 'copy' or 'peak'")
        need = frac * ref
        limit_s = self.bytes / need
        verdict, why = self._settle(self._refine(self._decide_time(limit_s)))
        med, lo, hi = self.sampler.stats()
        bw, bw_lo, bw_hi = self.bytes / med, self.bytes / hi, self.bytes / lo
        sign = "<" if verdict == _stats.FAIL or bw < need else ">="
        msg = (f"{self.name}: bandwidth {format_rate(bw, 'B/s')} [{format_rate(bw_lo, 'B/s')}, "
               f"{format_rate(bw_hi, 'B/s')}] {sign} {frac:g} x {what} {format_rate(ref, 'B/s')} on {self.device.name}")
        budget = f">= {frac:g} x {of} ({format_rate(need, 'B/s')})"
        self.bench.ctx.records.append(self._record(
            "bandwidth", verdict=verdict, budget=budget,
            extra={"message": msg, "reference_Bps": ref, "reference": of, "fraction": bw / ref,
                   "unit": "B/s", "value": bw, "ci_low": bw_lo, "ci_high": bw_hi, "statistic": "bandwidth at median"},
        ))
        self._act(verdict, msg, why)
        return verdict

    def assert_no_regression(self, at_most: Union[str, float] = "10%") -> str:
        """Median no more than ``at_most`` slower than the stored baseline of this device key.

        FAIL only when the slowdown's whole interval is beyond the threshold. With
        ``--gpuenv-perf=record`` the measurement is stored instead.
        """
        __tracebackhide__ = True
        thr = parse_fraction(at_most, "at_most")
        ctx = self.bench.ctx
        path = ctx.baselines or os.path.join(".gpuenv", "baselines.json")
        dkey = self.device.key
        tkey = f"{ctx.nodeid}::{self.name}"
        budget = f"<= baseline +{thr:.0%}"
        med, lo, hi = self.sampler.stats()
        if ctx.perf_mode == "record":
            _baseline.store(path, dkey, tkey, {
                "median_s": med, "ci_low_s": lo, "ci_high_s": hi, "n": self.n, "mode": self.mode,
                "repeat": self.sampler.repeat, "samples_s": self.samples,
            })
            self.bench.ctx.records.append(self._record(
                "regression", verdict=None, budget=budget,
                extra={"message": f"{self.name}: baseline recorded for {dkey}", "baseline_path": path},
            ))
            return "RECORDED"
        base = _baseline.load(path, dkey, tkey)
        if base is None:
            msg = f"{self.name}: no baseline for {dkey}; run with --gpuenv-perf=record"
            others = _baseline.other_keys(path, tkey)
            why = [f"baselines exist for other devices ({'; '.join(others)}), never compared"] if others else []
            self.bench.ctx.records.append(self._record("regression", verdict=_stats.INCONCLUSIVE, budget=budget,
                                                       extra={"message": msg}))
            self._act(_stats.INCONCLUSIVE, msg, why)
            return _stats.INCONCLUSIVE
        if base.get("mode") != self.mode:
            msg = (f"{self.name}: baseline stale: recorded in {base.get('mode')} mode, measured in {self.mode} "
                   f"mode; re-record with --gpuenv-perf=record")
            self.bench.ctx.records.append(self._record("regression", verdict=_stats.INCONCLUSIVE, budget=budget,
                                                       extra={"message": msg}))
            self._act(_stats.INCONCLUSIVE, msg, [])
            return _stats.INCONCLUSIVE
        b_lo, b_hi, b_med = float(base["ci_low_s"]), float(base["ci_high_s"]), float(base["median_s"])
        o = self.sampler.opts

        def decider() -> Optional[str]:
            if self.n < o.min_verdict_samples:
                return None
            _m, lo_, hi_ = self.sampler.stats()
            # conservative interval of the ratio now/baseline
            return _stats.decide(lo_ / b_hi, hi_ / b_lo, 1.0 + thr, upper=True, guard=0.0)

        verdict, why = self._settle(self._refine(decider))
        med, lo, hi = self.sampler.stats()
        r, r_lo, r_hi = med / b_med, lo / b_hi, hi / b_lo
        sign = ">" if verdict == _stats.FAIL or r > 1 + thr else "<="
        msg = (f"{self.name}: median {format_time(med)} {format_time_interval(lo, hi, like=med)} is "
               f"{(r - 1):+.1%} [{(r_lo - 1):+.1%}, {(r_hi - 1):+.1%}] vs baseline {format_time(b_med)} "
               f"{sign} +{thr:.0%} on {self.device.name}")
        self.bench.ctx.records.append(self._record(
            "regression", verdict=verdict, budget=budget,
            extra={"message": msg, "baseline_median_s": b_med, "ratio": r, "ratio_ci": [r_lo, r_hi]},
        ))
        self._act(verdict, msg, why)
        return verdict


class Comparison(_Result):
    """Result of ``gpu_bench.assert_ratio``: the median per-pair ratio and its interval."""

    __module__ = "pytest_gpuenv.perf"

    def __init__(self, bench: GpuBench, sampler: Sampler, name: str, ref_name: str, limit: float) -> None:
        self.bench = bench
        self.sampler = sampler
        self.name = name
        self.ref_name = ref_name
        self.limit = limit
        self.verdict: Optional[str] = None

    @property
    def ratio(self) -> float:
        return _stats.median(self.sampler.ratios())

    @property
    def ci(self) -> tuple[float, float]:
        return _stats.median_ci(self.sampler.ratios(), self.sampler.opts.confidence)

    @property
    def medians(self) -> tuple[float, float]:
        return self.sampler.stats(0)[0], self.sampler.stats(1)[0]

    def __repr__(self) -> str:
        lo, hi = self.ci
        return f"<Comparison {self.name}/{self.ref_name}: {self.ratio:.3f}x [{lo:.3f}, {hi:.3f}]>"

    def _conclude(self, raw: Optional[str]) -> None:
        __tracebackhide__ = True
        verdict, why = self._settle(raw, one_sided=True)
        self.verdict = verdict
        r = self.ratio
        lo, hi = self.ci
        ta, tb = self.medians
        sign = ">" if verdict == _stats.FAIL or r > self.limit else "<="
        msg = (f"{self.name}: median ratio {r:.3f}x [{lo:.3f}, {hi:.3f}] of {self.ref_name} "
               f"({format_time(ta)} vs {format_time(tb)}) {sign} budget {self.limit:g}x on {self.device.name}")
        rec = self._base_record()
        a = self.sampler.stats(0)
        rec.update({
            "kind": "ratio", "statistic": "median of per-pair ratios", "unit": "x",
            "value": r, "ci_low": lo, "ci_high": hi,
            "median_s": a[0], "ci_low_s": a[1], "ci_high_s": a[2],
            "reference": self.ref_name, "reference_median_s": tb,
            "samples_s": list(self.sampler.samples[0]), "reference_samples_s": list(self.sampler.samples[1]),
            "bandwidth_Bps": None, "flops": None, "budget": f"<= {self.limit:g}x", "verdict": verdict,
            "message": msg,
        })
        self.bench.ctx.records.append(rec)
        self._act(verdict, msg, why)


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
    elif timer == "cuda":
        from pytest_gpuenv.perf._driver import CudaApi, DriverBackend

        b = DriverBackend(CudaApi(device or 0), flush=flush)
    elif timer == "hip":
        from pytest_gpuenv.perf._driver import DriverBackend, HipApi

        b = DriverBackend(HipApi(device or 0), flush=flush)
    else:
        raise ValueError(f"invalid timer {timer!r}: expected torch, cuda, hip or auto")
    if b.info.vendor == "nvidia" and not b.info.driver:
        from pytest_gpuenv.perf import _nvml

        b.info.driver = _nvml.driver_version()
    _BACKENDS[key] = b
    return b


_BACKENDS: dict[Any, Any] = {}
_MONITORS: dict[Any, Any] = {}


def default_monitor(backend: Any) -> Any:
    info = backend.info
    if info.vendor != "nvidia":
        return None
    key = info.lock_key
    if key not in _MONITORS:
        from pytest_gpuenv.perf._nvml import Monitor

        m = Monitor(info.uuid, info.pci_bus_id)
        _MONITORS[key] = m if m.available else None
    return _MONITORS[key]
