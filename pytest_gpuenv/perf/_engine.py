"""The measurement loop: warm-up, batches, sequential stopping. Backend-neutral and pure.

A *backend* (``_torch.TorchBackend``, ``_driver.DriverBackend``, or a fake in the tests) enqueues
work and reads event times; a *monitor* (``runtime.nvml.Monitor`` or a fake) reads clocks and
processes. The sampler decides what to enqueue and when to stop, so every rule here runs on a CPU.
Before sampling, ``_syncprobe`` checks whether the callable waits for the device.

One timed sample in cold mode: [flush] [short delay] start-event fn end-event (``_schedule``). A batch
of samples is enqueued behind one "head" delay long enough for the host to enqueue the whole batch, so
the device never waits for Python inside a timed interval, and the host synchronises once per batch;
batches grow with the sample count, and a stop on precision aims each batch at the count the samples
near the median predict (``Sampler._batch_size``). Hot mode times ``repeat`` back-to-back calls between one pair of
events, with no flush.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional, Sequence

from pytest_gpuenv.perf import _stats
from pytest_gpuenv.perf._sampling import Backend, Monitor, Problems, SamplingOptions
from pytest_gpuenv.perf._syncprobe import sync_warnings


class Sampler:
    """Draws samples of one callable, or of two interleaved ABBA, and can be resumed.

    ``samples[i]`` are seconds per call of ``fns[i]``; for two callables ``samples[0][k]`` and
    ``samples[1][k]`` come from the same round, so their ratio is a paired observation.
    """

    def __init__(
        self,
        backend: Backend,
        fns: Sequence[Callable[[], Any]],
        *,
        mode: str = "cold",
        options: Optional[SamplingOptions] = None,
        monitor: Optional[Monitor] = None,
        lock: Optional[Callable[[], Any]] = None,
        clock: Callable[[], float] = time.perf_counter,
        name: str = "fn",
    ) -> None:
        if mode not in ("cold", "hot", "auto"):
            raise ValueError(f"invalid mode={mode!r}: expected 'cold', 'hot' or 'auto'")
        for f in fns:
            if not callable(f):
                raise TypeError(f"gpu_bench needs a callable that enqueues GPU work, got {f!r}")
        self.backend = backend
        self.fns = list(fns)
        self.requested_mode = mode
        self.mode = "cold" if mode == "auto" else mode
        self.opts = options or SamplingOptions()
        self.monitor = monitor
        self._lock = lock
        self._clock = clock
        self.name = name
        self.samples: list[list[float]] = [[] for _ in self.fns]
        #: samples of batches discarded for low clocks (used only when nothing else is left)
        self.discarded: list[list[float]] = [[] for _ in self.fns]
        self.repeat = 1
        self.spent_s = 0.0
        self.batches = 0
        self.discarded_batches = 0
        self.clock_mhz: list[float] = []
        self.foreign: list[dict[str, Any]] = []
        self.problems = Problems()
        self.host_enqueue_s: Optional[float] = None
        #: why the event timer measures where a profiler timer could have (set by the bench)
        self.timer_note: Optional[str] = None
        #: CUPTI timer only: how its kernels were recorded (set by the bench: ``CuptiBackend.cupti_records``)
        self.cupti_records: Optional[str] = None
        #: profiler timers only: (operations per call, uncovered gap per call in s) of kept samples of fns[0]
        self.details: list[tuple[float, float]] = []
        self.warmup_medians: list[float] = []
        self.stop_reason: Optional[str] = None
        self._started = False
        self._last_enqueue_s: Optional[float] = None
        self._intrinsic: list[str] = []
        self._tick_kept: Optional[float] = None
        #: (n, samples needed) at the last precision check (``precise``), for ``_batch_size``
        self._need: Optional[tuple[int, float]] = None

    # ------------------------------------------------------------------ public
    @property
    def n(self) -> int:
        return len(self.samples[0])

    def time_left(self) -> float:
        return self.opts.max_time - self.spent_s

    def _kept(self, i: int) -> list[float]:
        return self.samples[i] or self.discarded[i]

    def _tick(self, xs: Sequence[float]) -> float:
        """The tick of a profiler timer's clock in these samples (seconds per call); 0 for events. It is
        read from the first 200 samples, so once there are 200 it is kept."""
        if self._tick_kept is not None:
            return self._tick_kept
        tick = float(self.backend.tick_of(xs, self.repeat)) if hasattr(self.backend, "tick_of") else 0.0
        if len(xs) >= 200:
            self._tick_kept = tick
        return tick

    def stats(self, i: int = 0) -> tuple[float, float, float]:
        return _stats.summarize_sorted(self._sorted(i), self.opts.confidence)

    def _sorted(self, i: int) -> list[float]:
        """The kept samples of ``fns[i]``, sorted; a profiler timer reads whole ticks of its clock, so its
        ties are spread over a tick (``_stats.spread_ties``)."""
        xs = self._kept(i)
        return _stats.spread_ties(xs, self._tick(xs))

    def ratios(self) -> list[float]:
        a, b = self._kept(0), self._kept(1)
        return [x / y for x, y in zip(a, b) if y > 0]

    def run(self, done: Optional[Callable[[Sampler], bool]] = None) -> str:
        """Sample until ``done(self)`` (default: precise enough) or the time cap. Returns why it stopped."""
        done = done or self.precise
        ctx = self._lock() if self._lock is not None else contextlib.nullcontext()
        with ctx, _gc_paused():
            t0 = self._clock()
            try:
                if not self._started:
                    self._start()
                self._check_foreign()
                reason = self._loop(done)
                self._check_foreign()
            finally:
                self.spent_s += self._clock() - t0
        self.stop_reason = reason
        self._finish_problems()
        return reason

    def fresh(self, scale: float = 2.0) -> Sampler:
        """A new sampler of the same callables and settings with ``scale`` times the time cap and the
        minimum sample counts: a second attempt, with its own warm-up and flushes."""
        o = replace(self.opts)
        o.max_time *= scale
        o.min_samples = int(o.min_samples * scale)
        o.min_verdict_samples = int(o.min_verdict_samples * scale)
        s = Sampler(self.backend, self.fns, mode=self.requested_mode, options=o, monitor=self.monitor,
                    lock=self._lock, clock=self._clock, name=self.name)
        s.timer_note, s.cupti_records = self.timer_note, self.cupti_records
        return s

    def precise(self, s: Sampler) -> bool:
        if self.n < self.opts.min_samples:
            return False
        o = self.opts
        data = sorted(self.ratios()) if len(self.fns) == 2 else self._sorted(0)
        med, lo, hi = _stats.summarize_sorted(data, o.confidence)
        self._need = (self.n, _stats.samples_needed(data, med, o.rel_precision, o.confidence))
        return _stats.precise_enough(med, lo, hi, o.rel_precision)

    # ------------------------------------------------------------------ steps
    def _elapsed(self, t0: float) -> float:
        return self.spent_s + (self._clock() - t0)

    def _start(self) -> None:
        self._started = True
        b = self.backend
        for f in self.fns:  # first call outside everything: compilation, autotuning, allocation
            _call(f, self.name)
        b.sync()
        # host cost of enqueuing one call, with the device idle
        host = []
        for _ in range(3):
            for f in self.fns:
                t = time.perf_counter()
                f()
                host.append(time.perf_counter() - t)
            b.sync()
        self.host_enqueue_s = _stats.median(host)
        # the probe's delay: 50 host calls long, at least 0.5 ms, at most sync_probe_s
        probe_s = min(self.opts.sync_probe_s, max(0.5e-3, 50 * self.host_enqueue_s))
        self.problems.warnings.extend(sync_warnings(b, self.fns, probe_s, self.name))
        self._warmup()

    def _warmup(self) -> None:
        o = self.opts
        t0 = self._clock()
        prev: Optional[float] = None
        while True:
            times = self._batch(o.warmup_batch, repeat=1, flush=True, keep=False)
            med = _stats.median(times[0])
            self.warmup_medians.append(med)
            # medians agree within warmup_agree, or within two ticks of a profiler timer's clock
            tol = max(o.warmup_agree * max(med, prev or 0.0), 2 * self._tick(times[0]))
            if prev is not None and prev > 0 and abs(med - prev) <= tol:
                break
            if self._clock() - t0 >= o.warmup_max_time or self._clock() - t0 >= o.max_time / 4:
                break
            prev = med
        cold = self.warmup_medians[-1]
        if cold < max(o.empty_below_s, 1.3 * o.event_floor_s):
            self._intrinsic.append(
                f"{self.name}: the warm-up's median {cold * 1e6:.3f} us is what an empty pair of events reads "
                f"({o.event_floor_s * 1e6:.3f} us here): the callable seems to "
                "enqueue no GPU work on the current stream (work on another stream, or on the CPU, is not "
                "timed)"
            )
        if self.requested_mode == "auto" and cold < o.hot_below_s:
            self.mode = "hot"
        if self.mode == "hot":
            per = max(cold, 0.5e-6)
            self.repeat = int(min(1000, max(2, math.ceil(o.hot_interval_s / per))))

    def _batch(self, n: int, *, repeat: int, flush: bool, keep: bool) -> list[list[float]]:
        """Enqueue n samples (n ABBA rounds for two callables), sync once, return seconds per call."""
        k = len(self.fns)
        if k == 1:
            schedule = [0] * n
        else:  # ABBA: rounds alternate A,B and B,A
            schedule = []
            for r in range(n):
                order = [0, 1] if (self.batches + r) % 2 == 0 else [1, 0]
                schedule.extend(order)
        # the head delay covers the host's enqueue time of the whole batch
        if self._last_enqueue_s is not None:
            head = 1.25 * self._last_enqueue_s + 20e-6
        else:
            head = len(schedule) * (repeat * (self.host_enqueue_s or 20e-6) + 30e-6)
        head = min(head, 50e-3)
        t = time.perf_counter()
        handle = self.backend.enqueue(
            self.fns, schedule, flush=flush, delay_s=self.opts.post_flush_delay_s if flush else 0.0,
            head_delay_s=head if self.backend.can_delay else 0.0, repeat=repeat,
        )
        self._last_enqueue_s = time.perf_counter() - t
        mhz = self.monitor.sm_mhz() if (keep and self.monitor is not None) else None
        raw = self.backend.collect(handle)
        out: list[list[float]] = [[] for _ in range(k)]
        for idx, seconds in zip(schedule, raw):
            out[idx].append(max(seconds, 0.0) / repeat)
        # a profiler timer (CUPTI) also says how many operations each sample held and the gaps between them
        detail = getattr(self.backend, "last_detail", None)
        if keep and detail:
            self.details.extend((ops / repeat, gap / repeat) for idx, (ops, gap) in zip(schedule, detail) if idx == 0)
        if keep:
            self.batches += 1
            if mhz is not None:
                self.clock_mhz.append(mhz)
                mx = self.monitor.max_mhz if self.monitor is not None else None
                if mx and mhz < self.opts.clock_floor * mx:
                    self.discarded_batches += 1
                    for i in range(k):
                        self.discarded[i].extend(out[i])
                    return out
            for i in range(k):
                self.samples[i].extend(out[i])
        return out

    def _loop(self, done: Callable[[Sampler], bool]) -> str:
        o = self.opts
        t0 = self._clock()
        flush = self.mode == "cold"
        while True:
            if self.n >= 1 and done(self):
                return "decided"
            left = o.max_time - self._elapsed(t0)
            if left <= 0:
                return "time cap"
            # size the batch so one batch stays well inside the remaining time
            per = self._per_sample_estimate()
            n = self._batch_size(done)
            if per > 0:
                n = max(1, min(n, int(min(left, o.max_time / 8) / per)))
            if self.n >= 1 and per * n > left:
                return "time cap"
            self._batch(n, repeat=self.repeat, flush=flush, keep=True)
            if self.batches >= 8 and self.discarded_batches == self.batches:
                return "throttled"

    def _batch_size(self, done: Callable[[Sampler], bool]) -> int:
        """Samples in the next batch. Stopping on precision (``precise``), the batch aims at ``aim`` times
        the count the last check predicts (``_stats.samples_needed``), so the last batch is usually a small
        one rather than a quarter of the samples past the stopping point; at most half the samples so far
        and ``max_batch``, at least ``batch`` and a sixteenth of the samples (near the stopping point the
        interval wanders across the target, and batches too small to move it would each cost a sync).
        Before ``min_samples``, when no check is made, one batch takes the count up to it (one sync where
        smaller batches would each cost one).
        Otherwise (a verdict, or no check yet) a batch is a quarter of the samples so far, from ``batch`` up
        to ``max_batch``."""
        o, n = self.opts, self.n
        if done == self.precise and n < o.min_samples:  # no check before min_samples: one batch up to it
            return max(o.batch, o.min_samples - n)
        if done != self.precise or self._need is None or self._need[0] != n:
            return max(o.batch, min(o.max_batch, n // 4))
        want = min(o.max_batch, n // 2, self._need[1] * o.aim - n)
        return int(max(o.batch, n // 16, want))

    def _per_sample_estimate(self) -> float:
        base = self.warmup_medians[-1] if self.warmup_medians else 0.0
        if self.n:
            base = _stats.median(self.samples[0])
        k = len(self.fns)
        extra = 10e-6 + (self.host_enqueue_s or 0.0)
        return k * (base * self.repeat + extra)

    def _check_foreign(self) -> None:
        if self.monitor is None:
            return
        for p in self.monitor.foreign_processes():
            if p.get("pid") not in {q.get("pid") for q in self.foreign}:
                self.foreign.append(p)

    def _finish_problems(self) -> None:
        inc = list(self._intrinsic)
        if self.batches and self.discarded_batches / self.batches > self.opts.max_throttled:
            mx = self.monitor.max_mhz if self.monitor else None
            low = min(self.clock_mhz) if self.clock_mhz else None
            inc.append(
                f"clocks dropped: {self.discarded_batches} of {self.batches} batches ran below "
                f"{self.opts.clock_floor:.0%} of the {mx:.0f} MHz maximum SM clock (lowest {low:.0f} MHz); "
                "the GPU is throttling (power, temperature) or shared"
            )
        if self.foreign:
            who = ", ".join(f"pid {p.get('pid')}" + (f" ({p['name']})" if p.get("name") else "") for p in self.foreign)
            inc.append(f"another process used the GPU during the measurement: {who}")
        self.problems.inconclusive = inc


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while sampling, as ``timeit`` does: a full collection in a
    process holding torch takes tens of milliseconds, which would land in one batch's host time (behind
    the event timer's head delay it can outlast the delay and put host time into samples)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _call(f: Callable[[], Any], name: str) -> Any:
    try:
        return f()
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised by the callable passed to gpu_bench, measuring {name!r})")
        raise
