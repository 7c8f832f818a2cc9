"""Timer backend on CUPTI's activity API (NVIDIA's ``cupti-python``, the optional extra ``cupti``).

CUPTI records each kernel, memcpy and memset the device runs with its start and end timestamps (the
records torch.profiler reads through Kineto). A sample is the sum of the durations of the operations
the callable launched, so no event pair, launch latency or host time is in the figure; the time
between the first start and the last end that no operation covers is the *gap*, kept per sample.

Which operations belong to which sample: every call of the callable runs between a push and a pop of
an external correlation id (``CUSTOM2``; Kineto uses ``CUSTOM0``/``CUSTOM1``), and CUPTI reports which
API calls (correlation ids) ran under which external id. The flush (and a delay, where no fence settles
it) runs outside, and is not counted. The sample schedule (flush and settle, push, fn, pop) is the event
timer's (``_schedule.enqueue_samples``); the inner event backend flushes, settles and synchronises.

How kernels are recorded depends on their length (``GPUENV_CUPTI_KERNELS``: ``auto``, the default;
``serial``; ``concurrent``). For concurrent records (``CONCURRENT_KERNEL``, Kineto's and torch.profiler's
kind) CUPTI instruments the kernel's code, which slows a large kernel down. Serialised records
(``KERNEL``) leave the kernel alone but hold a stretch of front-end time, which is most of a short
kernel's reading. ``CuptiBackend.prepare`` measures that stretch once per device (50 cold samples of a
one-cycle kernel recorded both ways; it varies from one process to the next, so its error is small only
against a long call) and, before each measurement, records five cold calls serialised: a call under
``SERIAL_FROM_S`` (20 us, below which the stretch's error would exceed 1 %) is then recorded
concurrently; longer calls serialised, less the calibrated stretch (for ``assert_ratio``'s two
callables the longer one decides, so both are recorded alike). Switching the kind costs little. A sample
is a sum of operation durations, so serialising several streams' kernels loses nothing it reports.
Figures: docs/explanation/timer.md, "Measurements behind the design".

No head delay: CUPTI's timestamps are the device's own, so the host enqueuing while the device runs
puts nothing into a sample, and batches are not held back behind a delay as the event timer's are.

``cupti`` is imported on first use, never at import time. CUPTI has one activity client per process:
a torch.profiler session in the same process replaces ours (``Activity.ensure`` registers again).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf._schedule import enqueue_samples
from pytest_gpuenv.perf._stats import median

#: shown where the event timer measures on AMD
AMD_NOTE = ("AMD: event timer (CUPTI is NVIDIA's; rocprofiler-sdk, its ROCm counterpart, has no maintained "
            "Python binding on PyPI this project can depend on)")
INSTALL_HINT = "pip install 'pytest-gpuenv[cupti]'"

_STATE: dict[str, Any] = {}


def load_cupti() -> tuple[Any, Optional[str]]:
    """(the ``cupti`` module, None), or (None, why not): imported once per process."""
    if "module" not in _STATE:
        try:
            from cupti import cupti as mod

            _STATE["module"], _STATE["why"] = mod, None
        except ImportError as exc:
            why = (f"cupti-python is not installed ({INSTALL_HINT})" if getattr(exc, "name", "") == "cupti"
                   else f"cupti-python cannot be imported: {exc}")
            _STATE["module"], _STATE["why"] = None, why
        except Exception as exc:  # a broken CUPTI library: the event timer measures instead
            _STATE["module"], _STATE["why"] = None, f"cupti-python failed to load: {type(exc).__name__}: {exc}"
    return _STATE["module"], _STATE["why"]


#: the API callback-id enums (cupti-python 13.2 names them ``Runtime_api_trace_cbid``; CamelCase kept for
#: other releases) and the switch that turns one id's activity records on or off
API_ENUMS = {
    "runtime": (("Runtime_api_trace_cbid", "RuntimeApiTraceCbid"), "activity_enable_runtime_api"),
    "driver": (("Driver_api_trace_cbid", "DriverApiTraceCbid"), "activity_enable_driver_api"),
}
#: calls at least this long are recorded serialised in ``auto`` mode (the module's docstring)
SERIAL_FROM_S = 20e-6
KERNEL_MODES = ("auto", "serial", "concurrent")


def kernel_mode(choice: Optional[str] = None) -> str:
    """How kernels are recorded: ``GPUENV_CUPTI_KERNELS`` (auto, serial, concurrent; default auto)."""
    choice = (choice if choice is not None else os.environ.get("GPUENV_CUPTI_KERNELS", "")).strip().lower()
    if choice in KERNEL_MODES or choice == "":
        return choice or "auto"
    raise ValueError(f"invalid GPUENV_CUPTI_KERNELS={choice!r} (from the environment): expected one of "
                     f"{', '.join(KERNEL_MODES)}")


class Activity:
    """The process's CUPTI activity client: kernel/memcpy/memset records and external correlations.

    ``ops`` holds ``(correlation id, start ns, end ns)``; ``external`` maps correlation id to our
    external id. CUPTI calls ``_completed`` from its own thread or from ``flush_all``; a lock guards both.
    """

    def __init__(self, cupti: Any, kernels: Optional[str] = None) -> None:
        self.cupti = cupti
        K = cupti.ActivityKind
        self.mode = kernel_mode(kernels)
        self._set_kernel_kind(K.CONCURRENT_KERNEL if self.mode == "concurrent" else K.KERNEL)
        self.ext_kind_value = int(K.EXTERNAL_CORRELATION)
        self.custom = int(cupti.ExternalCorrelationKind.CUSTOM2)
        self.ops: list[tuple[int, int, int]] = []
        self.external: dict[int, int] = {}
        #: per device (UUID or index): seconds a serialised kernel record holds (``CuptiBackend.prepare``)
        self.offsets: dict[Any, float] = {}
        self._lock = threading.Lock()
        self.ensure()

    #: API records kept: the calls that enqueue device work (the others would only cost parsing time)
    API_KEEP = ("Launch", "Memcpy", "Memset")

    @property
    def kinds(self) -> list[Any]:
        """The activity kinds enabled: the kernel kind, copies, sets and external correlations, which come
        with traced API calls (the runtime and driver API kinds)."""
        K = self.cupti.ActivityKind
        return [self.kernel_kind, K.MEMCPY, K.MEMSET, K.EXTERNAL_CORRELATION, K.RUNTIME, K.DRIVER]

    @property
    def serialised(self) -> bool:
        """Kernels are recorded serialised (``KERNEL``), not concurrently."""
        return int(self.kernel_kind) == int(self.cupti.ActivityKind.KERNEL)

    def _set_kernel_kind(self, kind: Any) -> None:
        K = self.cupti.ActivityKind
        self.kernel_kind = kind
        self.op_kinds = {int(kind), int(K.MEMCPY), int(K.MEMSET)}  # the records ``_completed`` keeps

    def ensure(self) -> None:
        """Enable the activity kinds, keep API records of the enqueuing calls only, and (re-)register
        the buffer callbacks."""
        for k in self.kinds:
            self.cupti.activity_enable(k)
        self._trim_api_records()
        self.cupti.activity_register_callbacks(self._requested, self._completed)

    def _trim_api_records(self) -> None:
        """Turn off the runtime and driver API records of calls that enqueue no device work (device
        queries, event records, ...): a call of torch.add makes about 8 API records, one of them the
        launch. The enums are looked up by each name a binding has used (cupti-python 13.2's are
        ``Runtime_api_trace_cbid`` and ``Driver_api_trace_cbid``); where none is found nothing is turned
        off, and a binding without these switches keeps them all."""
        c = self.cupti
        for enum_names, switch_name in (API_ENUMS["runtime"], API_ENUMS["driver"]):
            cbids = next((getattr(c, n) for n in enum_names if hasattr(c, n)), None)
            switch = getattr(c, switch_name, None)
            if cbids is None or switch is None:
                continue
            for member in cbids:
                name = member.name
                if any(k in name for k in self.API_KEEP) or name in ("INVALID", "SIZE", "FORCE_INT"):
                    continue
                try:
                    switch(int(member), 0)
                except Exception:  # an id this CUPTI does not know
                    continue

    def use_kernel_kind(self, kind: Any) -> None:
        """Record kernels as ``kind`` (``KERNEL`` or ``CONCURRENT_KERNEL``) from now on."""
        if int(kind) == int(self.kernel_kind):
            return
        self.cupti.activity_disable(self.kernel_kind)
        self._set_kernel_kind(kind)
        self.cupti.activity_enable(kind)

    #: bytes of one activity buffer: about 250 cold samples of a one-kernel call (1 KB of records each).
    #: Every drain hands CUPTI's current buffer back and the next record asks for a new one, and a large
    #: fresh buffer makes that dearer: smaller buffers took less wall time per sample, down to about this
    #: size (figures: docs/explanation/timer.md). A callable with more records fills several buffers
    #: between drains.
    BUFFER_BYTES = 256 << 10

    @classmethod
    def _requested(cls) -> tuple[int, int]:
        return cls.BUFFER_BYTES, 0  # 0: no limit on records per buffer

    def _completed(self, activities: Sequence[Any]) -> None:
        ops, ext = [], {}
        for a in activities:
            kind = int(a.kind)
            if kind in self.op_kinds:
                ops.append((int(a.correlation_id), int(a.start), int(a.end)))
            elif kind == self.ext_kind_value and int(a.external_kind) == self.custom:
                ext[int(a.correlation_id)] = int(a.external_id)
        with self._lock:
            self.ops.extend(ops)
            self.external.update(ext)

    def push(self, ext_id: int) -> None:
        self.cupti.activity_push_external_correlation_id(self.custom, ext_id)

    def pop(self) -> None:
        self.cupti.activity_pop_external_correlation_id(self.custom)

    def drain(self, forced: bool = False) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
        """The records delivered so far, handed over and cleared. After a sync, the default flush hands
        over every buffer whose records are all complete, full or not (``cuptiActivityFlushAll`` with flag
        0); ``forced`` (``CUPTI_ACTIVITY_FLAG_FLUSH_FORCED``) hands over incomplete ones too, as CUPTI's
        documentation suggests at the end of a session, but makes the next batch's first launch cost the
        host far more (figures: docs/explanation/timer.md), so a caller forces it only when records are
        missing."""
        self.cupti.activity_flush_all(1 if forced else 0)
        with self._lock:
            ops, ext = self.ops, self.external
            self.ops, self.external = [], {}
        return ops, ext


def activity() -> Activity:
    """The process's ``Activity`` (created on first use); raises RuntimeError when CUPTI is unusable."""
    if _STATE.get("activity") is None:
        mod, why = load_cupti()
        if mod is None:
            raise RuntimeError(why)
        _STATE["activity"] = Activity(mod)
    activity: Activity = _STATE["activity"]
    return activity


def per_sample(ops: Sequence[tuple[int, int, int]], external: dict[int, int],
               ids: Sequence[int]) -> list[tuple[float, int, float]]:
    """(summed duration s, operations, uncovered gap s) for each external id in ``ids``.

    The gap is the part of [first start, last end] that no operation covers (overlapping operations on
    several streams are merged), so it is 0 for one kernel and never negative.
    """
    groups: dict[int, list[tuple[int, int]]] = {i: [] for i in ids}
    for corr, start, end in ops:
        ext = external.get(corr)
        if ext in groups:
            groups[ext].append((start, end))
    out = []
    for i in ids:
        spans = sorted(groups[i])
        total = sum(max(0, e - s) for s, e in spans)
        covered, cur_s, cur_e = 0, None, None
        for s, e in spans:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    covered += cur_e - cur_s  # type: ignore[operator]
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            covered += cur_e - cur_s  # type: ignore[operator]
        gap = (spans[-1][1] - spans[0][0] - covered) if spans else 0
        out.append((total * 1e-9, len(spans), max(0, gap) * 1e-9))
    return out


class CuptiBackend:
    """Kernel durations from CUPTI; flush, delay and sync from the event backend ``events``.

    ``last_detail`` holds (operations, gap seconds) per sample of the last ``collect``.
    """

    name = "cupti"
    can_delay = True
    #: CUPTI has no empty-pair offset: an empty callable reads 0
    floor_s = 0.0
    #: a sample with any operation in it is work; exactly 0 is "nothing enqueued"
    empty_below_s = 1e-9

    def __init__(self, events: Any, act: Optional[Activity] = None) -> None:
        self.events = events
        self.act = act or activity()
        self.info = replace(events.info, timer="cupti")
        self.note = getattr(events, "note", None)
        self._next = 1
        self.last_detail: list[tuple[int, float]] = []
        #: seconds taken off each kernel-holding sample per call (``prepare``)
        self.offset_s = 0.0

    @staticmethod
    def tick_of(samples: Sequence[float], repeat: int = 1) -> float:
        """The tick of the clock a measurement's samples were read with, seconds per call: the largest of
        32, 16 or 8 ns that 95 % of the first 200 durations are whole multiples of, give or take 1 ns
        (CUPTI's kernel durations on Hopper are 32 ns steps, some 1 ns off); 0 when none fits."""
        ns = [int(round(x * repeat * 1e9)) for x in samples[:200]]
        for t in (32, 16, 8):
            if ns and sum(min(v % t, t - v % t) <= 1 for v in ns) >= 0.95 * len(ns):
                return t * 1e-9 / repeat
        return 0.0

    def prepare(self, fns: Sequence[Callable[[], Any]]) -> list[int]:
        """Before a measurement of ``fns``: how many kernels, memcpys and memsets one call of each makes
        the device run, and the record kind for them with what is taken off each sample (the module's
        docstring), from the same few cold calls (five in ``auto`` mode, one otherwise).

        A callable that shows no operation is tried once more after our activity client registers again
        (a torch.profiler session in the process replaces it)."""
        K = self.act.cupti.ActivityKind
        if self.act.mode != "concurrent":
            self.act.use_kernel_kind(K.KERNEL)
            self._front_end()
        calls = 5 if self.act.mode == "auto" else 1
        counts, longest = [], 0.0
        for f in fns:
            times, ops = self._cold(f, calls)
            if not any(ops):
                self.act.ensure()
                times, ops = self._cold(f, calls)
            counts.append(max(ops))
            longest = max(longest, median(times) if times else 0.0)
        if self.act.mode == "auto" and longest - self.offset_s < SERIAL_FROM_S:
            self.act.use_kernel_kind(K.CONCURRENT_KERNEL)
        return counts

    def _front_end(self, n: int = 50) -> None:
        """Once per device: the front-end time of a serialised record (``offset_s``), from n cold samples of
        a one-cycle kernel recorded both ways, rounded to the records' tick; 0 without a delay kernel."""
        K, offsets = self.act.cupti.ActivityKind, self.act.offsets
        key = self.info.uuid or self.info.index
        if key not in offsets:
            offsets[key] = 0.0
            if self.events.can_delay:
                try:
                    self.act.use_kernel_kind(K.CONCURRENT_KERNEL)
                    conc = self._cold(self._tiny, n)[0]
                finally:
                    self.act.use_kernel_kind(K.KERNEL)
                ser = self._cold(self._tiny, n)[0]
                if conc and ser:
                    tick = self.tick_of(ser) or 1e-9
                    offsets[key] = round(max(0.0, median(ser) - median(conc)) / tick) * tick
        self.offset_s = offsets[key]

    @property
    def cupti_records(self) -> str:
        """How kernels are recorded now, for the measurement's entry: "concurrent" or "serialised, less
        1.79 us front-end time"."""
        if not self.act.serialised:
            return "concurrent"
        return f"serialised, less {self.offset_s * 1e6:.2f} us front-end time"

    def _tiny(self) -> None:
        self.events.delay(1e-12)  # a one-cycle kernel

    def _cold(self, f: Callable[[], Any], n: int) -> tuple[list[float], list[int]]:
        """n cold samples of ``f`` as recorded now, nothing taken off: (the durations of those with
        operations in them, the operations in each)."""
        ids, _take = self.enqueue([f], [0] * n, flush=True, delay_s=2e-6, head_delay_s=0.0, repeat=1)
        times = self.collect((ids, 0.0))
        return [t for t in times if t > 0], [ops for ops, _gap in self.last_detail]

    def delay(self, seconds: float) -> None:
        self.events.delay(seconds)

    def sync(self) -> None:
        self.events.sync()

    def _ids(self, n: int) -> list[int]:
        first = self._next
        self._next += n
        return list(range(first, first + n))

    def enqueue(
        self, fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *, flush: bool, delay_s: float,
        head_delay_s: float, repeat: int,
    ) -> Any:
        ids = self._ids(len(schedule))

        def record(marker: tuple[str, int]) -> None:
            if marker[0] == "push":
                self.act.push(marker[1])
            else:
                self.act.pop()

        pairs = [(("push", i), ("pop", i)) for i in ids]
        # no head delay: host time between samples is not in CUPTI's figures (the module's docstring)
        enqueue_samples(pairs, record, self.events.flush_fn(delay_s) if flush else None, self.events.delay, fns,
                        schedule, head_delay_s=0.0, repeat=repeat)
        return ids, (self.offset_s * repeat if self.act.serialised else 0.0)  # the handle: ids, seconds off each sample

    def collect(self, handle: Any) -> list[float]:
        ids, take = handle
        self.events.sync()
        ops, ext = self.act.drain()
        rows = per_sample(ops, ext, ids)
        if not all(n for _t, n, _gap in rows):  # a buffer still held an incomplete record (work on a stream
            more, more_ext = self.act.drain(forced=True)  # the sync did not wait for): hand everything over
            ops, ext = ops + more, {**ext, **more_ext}
            rows = per_sample(ops, ext, ids)
        self.last_detail = [(n, gap) for _t, n, gap in rows]
        # a sample with operations in it stays above 0 (exactly 0 means "nothing enqueued")
        return [max(1e-9, t - take) if n else 0.0 for t, n, _gap in rows]

    def copy_fn(self, nbytes: int) -> Callable[[], Any]:
        copy: Callable[[], Any] = self.events.copy_fn(nbytes)
        return copy
