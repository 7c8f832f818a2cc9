"""What ``gpu_bench`` returns: ``Measurement`` (one callable); ``Comparison`` (``assert_ratio``) is in
``_comparison`` and shares ``_Result``.

Each assertion is three-valued. It keeps sampling while the verdict is undecided and time is left
(sequential stopping), adds a ``PerfEntry`` to the session, then acts on the verdict according to
``--gpuenv-perf``:

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
import warnings
from typing import Any, Callable, NamedTuple, Optional, Union

import pytest

from pytest_gpuenv.perf import _baseline, _retry, _stats
from pytest_gpuenv.perf._device import DeviceInfo, peak_bandwidth
from pytest_gpuenv.perf._engine import Sampler
from pytest_gpuenv.perf._entries import Clocks, PerfEntry
from pytest_gpuenv.perf._retry import very_precise
from pytest_gpuenv.perf._units import (
    check_unit_fraction,
    format_budget,
    format_rate,
    format_time,
    format_time_interval,
    parse_fraction,
    parse_time,
)


class GpuPerfWarning(UserWarning):
    """An INCONCLUSIVE performance verdict, or a FAIL under ``--gpuenv-perf=warn``, or advice about
    how a callable was measured."""

    __module__ = "pytest_gpuenv.perf"


__all__ = ["GpuPerfWarning", "Measurement", "ResultContext", "very_precise"]


class ResultContext(NamedTuple):
    """What a result takes from the bench that made it (``GpuBench._result_context``): the test, how its
    verdicts act, where its entries go, and the bench's copy reference."""

    nodeid: str
    #: ``--gpuenv-perf``: check, strict, warn, off or record
    perf_mode: str
    #: the baselines file (None: ``.gpuenv/baselines.json``)
    baselines: Optional[str]
    #: where each entry goes (the run's ``PerfSession.add``)
    add: Callable[[PerfEntry], None]
    #: bytes/s of an equal-bytes device copy of ``nbytes`` (``GpuBench.copy_bandwidth(nbytes, timer=)``)
    copy_bandwidth: Callable[..., float]
    #: the clock, throttle and process guards that were off, and why (the backend's ``monitor_note``)
    monitor_note: Optional[str] = None


class _Result:
    """Shared verdict handling for measurements and comparisons."""

    ctx: ResultContext
    sampler: Sampler
    name: str
    #: unit of the judged statistic ("s" for a measurement, "x" for a comparison)
    _unit = "s"

    def _init(self, ctx: ResultContext, sampler: Sampler, name: str) -> None:
        self.ctx = ctx
        self.sampler = sampler
        self.name = name
        #: each attempt's summary when an INCONCLUSIVE verdict was measured again (``_retry.decide``)
        self.attempts: list[dict[str, Any]] = []

    def _xs(self) -> list[float]:
        raise NotImplementedError

    def _judged(self) -> tuple[float, float, float]:
        raise NotImplementedError

    def _decide(self, decider: Callable[[], Optional[str]]) -> tuple[str, list[str]]:
        return _retry.decide(self, decider)

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

    def _clocks(self) -> Clocks:
        s = self.sampler
        mhz = s.clock_mhz
        return Clocks(source=getattr(s.monitor, "source", "nvml") if mhz else None, sm_mhz_min=min(mhz) if mhz else None,
                      sm_mhz_max=max(mhz) if mhz else None, max_sm_mhz=getattr(s.monitor, "max_mhz", None),
                      batches=s.batches, discarded_batches=s.discarded_batches)

    def _new_entry(self, kind: str, **fields: Any) -> PerfEntry:
        """The entry of this result: how and where it was measured, plus ``fields``."""
        s = self.sampler
        info = self.device
        spent = s.spent_s + sum(a["spent_s"] for a in self.attempts[:-1])
        ops = _stats.median([d[0] for d in s.details]) if s.details else None
        gap = _stats.median([d[1] for d in s.details]) if s.details else None
        return PerfEntry(
            kind=kind, nodeid=self.ctx.nodeid, name=self.name, device=info.name, arch=info.arch,
            device_key=info.key, uuid=info.uuid, timer=info.timer, mode=s.mode, repeat=s.repeat,
            flush_bytes=info.flush_bytes if s.mode == "cold" else 0, n=s.n, clocks=self._clocks(),
            foreign_processes=list(s.foreign), problems=self.problems, warnings=self.notes,
            stop_reason=s.stop_reason, spent_s=round(spent, 6), host_enqueue_s=s.host_enqueue_s,
            timer_note=s.timer_note, monitor_note=self.ctx.monitor_note,
            ops_per_call=ops, gap_s=gap, attempts=list(self.attempts) or None, cupti_records=s.cupti_records, **fields,
        )

    def _act(self, verdict: Optional[str], fail_msg: str, why: list[str]) -> None:
        __tracebackhide__ = True
        mode = self.ctx.perf_mode
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

    def __init__(self, ctx: ResultContext, sampler: Sampler, name: str, nbytes: Optional[float],
                 nflops: Optional[float]) -> None:
        self._init(ctx, sampler, name)
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
        """SM clocks during sampling, as in the entry's ``"clocks"``."""
        return self._clocks().to_dict()

    def _entry(self, kind: str, **fields: Any) -> PerfEntry:
        """A time entry (value = median time) of this measurement; ``fields`` override or add."""
        med, lo, hi = self.sampler.stats()
        timed: dict[str, Any] = {
            "statistic": "median", "unit": "s", "median_s": med, "ci_low_s": lo, "ci_high_s": hi,
            "value": med, "ci_low": lo, "ci_high": hi, "samples_s": self.samples, "bytes": self.bytes,
            "flops_count": self.flops, "bandwidth_Bps": self.bandwidth, "flops": self.flops_rate,
        }
        timed.update(fields)
        return self._new_entry(kind, **timed)

    def _add(self, kind: str, **fields: Any) -> None:
        self.ctx.add(self._entry(kind, **fields))

    def _xs(self) -> list[float]:
        return self.sampler.samples[0]

    def _judged(self) -> tuple[float, float, float]:
        return self.sampler.stats()

    def _decider(self, limit: float, lo_div: float = 1.0, hi_div: float = 1.0,
                      guard: Optional[float] = None) -> Callable[[], Optional[str]]:
        """Decider of ``median <= limit`` on the interval [lo / lo_div, hi / hi_div] (divisors: a
        baseline's interval, for a conservative ratio now/baseline), once enough samples are in (of
        whichever attempt is sampling)."""

        def decider() -> Optional[str]:
            o = self.sampler.opts
            if self.n < o.min_verdict_samples:
                return None
            _m, lo, hi = self.sampler.stats()
            return _stats.decide(lo / lo_div, hi / hi_div, limit, upper=True, guard=o.guard if guard is None else guard)

        return decider

    # ------------------------------------------------------------------ assertions
    def assert_faster_than(self, budget: Union[str, float, dict[str, Any]]) -> str:
        """Median device time within ``budget`` ("250us", seconds, or ``{device name: budget}``; a
        device missing from the dict skips the test). Returns the verdict."""
        __tracebackhide__ = True
        limit = self._budget_for_device(budget)
        verdict, why = self._decide(self._decider(limit))
        med, lo, hi = self.sampler.stats()
        sign = ">" if verdict == _stats.FAIL or med > limit else "<="
        msg = (f"{self.name}: median {format_time(med)} {format_time_interval(lo, hi, like=med)} "
               f"{sign} budget {format_budget(limit)} on {self.device.name}")
        self._add("time", verdict=verdict, budget=format_budget(limit), message=msg)
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

    def _bandwidth_reference(self, nbytes: float, of: str) -> tuple[float, str]:
        """(bytes/s, what) of the reference bandwidth ``of``; skips when a peak is unknown."""
        if of == "copy":
            timer = "events" if self.device.timer != "cupti" else None  # the copy timed like the kernel
            return self.ctx.copy_bandwidth(nbytes, timer=timer), "copy bandwidth"
        if of == "peak":
            ref = peak_bandwidth(self.device.name)
            if ref is None:
                pytest.skip(f"no peak bandwidth known for {self.device.name}; use of='copy'")
            return float(ref), "peak bandwidth"
        raise ValueError(f"invalid of={of!r}: expected 'copy' or 'peak'")

    def assert_bandwidth(self, at_least: float = 0.8, of: str = "copy") -> str:
        """Bandwidth (``bytes`` / median time) at least ``at_least`` of the session's device-copy
        bandwidth (``of="copy"``) or of the device's peak from the datasheet table (``of="peak"``)."""
        __tracebackhide__ = True
        frac = check_unit_fraction(at_least, "at_least")
        if self.bytes is None:
            raise ValueError(f"{self.name}: assert_bandwidth needs bytes= given to gpu_bench(...)")
        ref, what = self._bandwidth_reference(self.bytes, of)
        need = frac * ref
        verdict, why = self._decide(self._decider(self.bytes / need))
        med, lo, hi = self.sampler.stats()
        bw, bw_lo, bw_hi = self.bytes / med, self.bytes / hi, self.bytes / lo
        sign = "<" if verdict == _stats.FAIL or bw < need else ">="
        msg = (f"{self.name}: bandwidth {format_rate(bw, 'B/s')} [{format_rate(bw_lo, 'B/s')}, "
               f"{format_rate(bw_hi, 'B/s')}] {sign} {frac:g} x {what} {format_rate(ref, 'B/s')} on {self.device.name}")
        self._add("bandwidth", verdict=verdict, budget=f">= {frac:g} x {of} ({format_rate(need, 'B/s')})",
                  message=msg, reference_Bps=ref, reference=of, fraction=bw / ref, unit="B/s", value=bw,
                  ci_low=bw_lo, ci_high=bw_hi, statistic="bandwidth at median")
        self._act(verdict, msg, why)
        return verdict

    def assert_no_regression(self, at_most: Union[str, float] = "10%") -> str:
        """Median no more than ``at_most`` slower than the stored baseline of this device key.

        FAIL only when the slowdown's whole interval is beyond the threshold. With
        ``--gpuenv-perf=record`` the measurement is stored instead. A baselines file or entry that is
        not what recording writes raises ``ValueError`` naming the file, the entry and the problem.
        """
        __tracebackhide__ = True
        thr = parse_fraction(at_most, "at_most")
        ctx = self.ctx
        path = ctx.baselines or os.path.join(".gpuenv", "baselines.json")
        dkey, tkey = self.device.key, f"{ctx.nodeid}::{self.name}"
        budget = f"<= baseline +{thr:.0%}"
        if ctx.perf_mode == "record":
            med, lo, hi = self.sampler.stats()
            _baseline.store(path, dkey, tkey, {
                "median_s": med, "ci_low_s": lo, "ci_high_s": hi, "n": self.n, "mode": self.mode,
                "repeat": self.sampler.repeat, "samples_s": self.samples,
            })
            self._add("regression", verdict=None, budget=budget,
                      message=f"{self.name}: baseline recorded for {dkey}", baseline_path=path)
            return "RECORDED"
        base = _baseline.load(path, dkey, tkey)
        unusable = self._unusable_baseline(base, path, dkey, tkey)
        if unusable is not None:
            msg, why = unusable
            self._add("regression", verdict=_stats.INCONCLUSIVE, budget=budget, message=msg)
            self._act(_stats.INCONCLUSIVE, msg, why)
            return _stats.INCONCLUSIVE
        assert base is not None
        b_lo, b_hi, b_med = float(base["ci_low_s"]), float(base["ci_high_s"]), float(base["median_s"])
        # conservative interval of the ratio now/baseline
        verdict, why = self._decide(self._decider(1.0 + thr, b_hi, b_lo, guard=0.0))
        med, lo, hi = self.sampler.stats()
        r, r_lo, r_hi = med / b_med, lo / b_hi, hi / b_lo
        sign = ">" if verdict == _stats.FAIL or r > 1 + thr else "<="
        msg = (f"{self.name}: median {format_time(med)} {format_time_interval(lo, hi, like=med)} is "
               f"{(r - 1):+.1%} [{(r_lo - 1):+.1%}, {(r_hi - 1):+.1%}] vs baseline {format_time(b_med)} "
               f"{sign} +{thr:.0%} on {self.device.name}")
        self._add("regression", verdict=verdict, budget=budget, message=msg, baseline_median_s=b_med, ratio=r,
                  ratio_ci=[r_lo, r_hi])
        self._act(verdict, msg, why)
        return verdict

    def _unusable_baseline(self, base: Optional[dict[str, Any]], path: str, dkey: str,
                           tkey: str) -> Optional[tuple[str, list[str]]]:
        """(message, reasons) when there is no baseline to compare with, or it was taken in another mode."""
        if base is None:
            others = _baseline.other_keys(path, tkey)
            why = [f"baselines exist for other devices ({'; '.join(others)}), never compared"] if others else []
            return f"{self.name}: no baseline for {dkey}; run with --gpuenv-perf=record", why
        if base.get("mode") != self.mode:
            return (f"{self.name}: baseline stale: recorded in {base.get('mode')} mode, measured in {self.mode} "
                    f"mode; re-record with --gpuenv-perf=record"), []
        return None
