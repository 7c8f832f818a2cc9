"""The CUPTI timer (perf/_cupti.py): a fake ``cupti`` module at the binding boundary (tests/perf/_cupti_fake.py),
so the record parsing, the per-sample grouping, the timer choice and the table run on a CPU; one GPU test
with the real binding (requires_cuda, skipped where cupti-python is absent)."""

from __future__ import annotations

import enum
import sys
import warnings
from typing import Any

import pytest
from _cupti_fake import FakeCupti, Kind, NullLock, make
from _perf_fake import FakeBackend

from pytest_gpuenv import requires_cuda
from pytest_gpuenv.perf import _cupti
from pytest_gpuenv.perf import bench as _bench
from pytest_gpuenv.perf.bench import GpuBench, PerfContext
from pytest_gpuenv.perf.report import summary_lines


# ----------------------------------------------------------------------------------------------- tests
def test_per_sample_sums_kernels_and_measures_uncovered_gaps():
    ops = [(1, 0, 100), (2, 150, 250), (3, 200, 300), (4, 1000, 1100), (9, 0, 5)]
    ext = {1: 7, 2: 7, 3: 7, 4: 8}
    rows = _cupti.per_sample(ops, ext, [7, 8, 6])
    (t7, n7, g7), (t8, n8, g8), (t6, n6, g6) = rows
    assert n7 == 3 and t7 == pytest.approx(300e-9) and g7 == pytest.approx(50e-9)  # 100..150 uncovered
    assert (n8, g8) == (1, 0.0) and t8 == pytest.approx(100e-9)
    assert (t6, n6, g6) == (0.0, 0, 0.0)  # an id that launched nothing


def test_activity_enables_kernels_copies_and_correlation_and_reads_only_its_own_ids():
    fake = FakeCupti()
    act = _cupti.Activity(fake)
    assert {Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.EXTERNAL_CORRELATION} <= fake.enabled
    assert Kind.CONCURRENT_KERNEL not in fake.enabled
    act.push(5)
    fake.launch(2000, kind=Kind.MEMCPY)
    act.pop()
    fake.launch(3000)  # outside: another tool's external id
    ops, ext = act.drain()
    assert len(ops) == 2 and ext == {1: 5}
    assert act.drain() == ([], {})


def test_concurrent_mode_records_concurrent_kernels_only_and_bad_modes_are_named(monkeypatch):
    """GPUENV_CUPTI_KERNELS=concurrent takes Kineto's kind for every measurement."""
    monkeypatch.setenv("GPUENV_CUPTI_KERNELS", "concurrent")
    fake = FakeCupti()
    act = _cupti.Activity(fake)
    assert Kind.CONCURRENT_KERNEL in fake.enabled and Kind.KERNEL not in fake.enabled
    act.push(1)
    fake.launch(1000, kind=Kind.CONCURRENT_KERNEL)
    fake.launch(1000, kind=Kind.KERNEL)  # not a kind this client asked for
    act.pop()
    assert len(act.drain()[0]) == 1
    monkeypatch.setenv("GPUENV_CUPTI_KERNELS", "sometimes")
    with pytest.raises(ValueError, match="GPUENV_CUPTI_KERNELS='sometimes'.*auto, serial, concurrent"):
        _cupti.Activity(FakeCupti())


def test_short_calls_are_recorded_concurrently_and_long_ones_serialised_less_the_front_end_time():
    """Serialised records hold 1.2-1.5 us of front-end time on the H200 (here 1.44 us: 45 ticks of 32 ns),
    calibrated once per device; a 1.3 us call is recorded concurrently (nothing to take off), a 232 us call
    serialised (concurrent records are slowed by instrumentation) with the front-end time taken off."""
    fake = FakeCupti()
    fake.serial_ns = 1440
    bench, backend, ctx = make(fake)
    m = bench(lambda: fake.launch(1312), name="add 4096")
    assert ctx.session.entries[-1].cupti_records == "concurrent"
    assert backend.offset_s == pytest.approx(1.44e-6) and backend.act.offsets == {"GPU-fake-0": backend.offset_s}
    assert m.median == pytest.approx(1.312e-6) and m.device.timer == "cupti"
    assert int(backend.act.kernel_kind) == Kind.CONCURRENT_KERNEL and Kind.KERNEL not in fake.enabled

    def vector_add() -> None:  # instrumented, a concurrent record reads 7 % more
        fake.launch(250_000 if Kind.CONCURRENT_KERNEL in fake.enabled else 232_000)

    m2 = bench(vector_add, name="vector_add")
    assert int(backend.act.kernel_kind) == Kind.KERNEL
    assert ctx.session.entries[-1].to_dict()["cupti_records"] == "serialised, less 1.44 us front-end time"
    assert m2.median == pytest.approx(232e-6) and backend.offset_s == pytest.approx(1.44e-6)
    assert _cupti.SERIAL_FROM_S == 20e-6


def test_the_front_end_time_is_calibrated_once_per_device():
    fake = FakeCupti()
    fake.serial_ns = 1440
    bench, backend, _ctx = make(fake)
    bench(lambda: fake.launch(232_000), name="long")
    fake.serial_ns = 5000  # a second calibration would read this
    m = bench(lambda: fake.launch(232_000), name="again")
    assert backend.offset_s == pytest.approx(1.44e-6) and m.median == pytest.approx(232e-6 + 3.56e-6)


@pytest.mark.parametrize("mode, kind, offset", [("serial", Kind.KERNEL, 1.44e-6),
                                                ("concurrent", Kind.CONCURRENT_KERNEL, 0.0)])
def test_a_forced_record_kind_holds_for_short_calls(monkeypatch, mode, kind, offset):
    """serial: a short call keeps serialised records, less the front-end time; concurrent: nothing is
    calibrated and serialised records are never enabled."""
    monkeypatch.setenv("GPUENV_CUPTI_KERNELS", mode)
    fake = FakeCupti()
    fake.serial_ns = 1440
    bench, backend, _ctx = make(fake)
    m = bench(lambda: fake.launch(1312), name="add 4096")
    assert int(backend.act.kernel_kind) == kind and m.median == pytest.approx(1.312e-6)
    assert backend.offset_s == pytest.approx(offset) and (Kind.KERNEL in fake.enabled) == (mode == "serial")


def test_cupti_samples_are_not_held_behind_a_head_delay():
    """CUPTI's durations are device timestamps: the batch is enqueued without the event timer's head delay."""
    fake = FakeCupti()
    _bench_, backend, _ctx = make(fake)
    ids = backend.enqueue([lambda: fake.launch(2345)], [0, 0], flush=True, delay_s=2e-6, head_delay_s=5e-3,
                          repeat=1)
    assert [c[1] for c in backend.events.calls if c[0] == "delay"] == [0.0, 2e-6, 2e-6]
    assert backend.collect(ids) == [pytest.approx(2.345e-6)] * 2


def test_cupti_timer_reads_kernel_durations_not_the_flush_or_delay():
    fake = FakeCupti()
    bench, backend, ctx = make(fake)
    m = bench(lambda: fake.launch(2345), name="add")
    assert m.median == pytest.approx(2.345e-6) and m.device.timer == "cupti"
    rec = ctx.session.entries[-1]
    assert rec.timer == "cupti" and rec.ops_per_call == 1 and rec.gap_s == 0 and rec.timer_note is None
    assert "[cupti]" in "\n".join(summary_lines(ctx.session.entries))


def test_batches_are_read_with_the_default_flush_and_forced_only_when_records_are_missing():
    """After the sync, cuptiActivityFlushAll(0) hands over every buffer whose records are complete; a
    forced flush (which made the next batch's first launch dearer on the H200) only when a sample's
    records did not come (a buffer still held an incomplete record)."""
    fake = FakeCupti()
    bench, _b, _ctx = make(fake)
    assert bench(lambda: fake.launch(2345), name="add").median == pytest.approx(2.345e-6)
    assert fake.flags and set(fake.flags) == {0}
    fake.flags.clear()
    fake.incomplete = True  # every default flush hands nothing over: each batch falls back to a forced one
    assert bench(lambda: fake.launch(2345), name="add").median == pytest.approx(2.345e-6)
    assert fake.flags[:2] == [0, 1] and fake.flags.count(0) == fake.flags.count(1)


def test_cupti_timer_sums_a_calls_kernels_and_reports_the_gaps():
    fake = FakeCupti()
    bench, _b, ctx = make(fake)

    def two() -> None:
        fake.launch(1000)
        fake.launch(3000, gap_ns=500)

    m = bench(two, name="two")
    m.assert_faster_than("10us")
    assert m.median == pytest.approx(4e-6)
    rec = ctx.session.entries[-1]
    assert rec.ops_per_call == 2 and rec.gap_s == pytest.approx(0.5e-6)
    assert any("cupti summed 2 operations per call; gaps between them 500.0 ns" in ln
               for ln in summary_lines(ctx.session.entries)), summary_lines(ctx.session.entries)


def test_a_callable_cupti_sees_nothing_from_is_timed_by_events_saying_why():
    fake = FakeCupti()
    bench, _b, ctx = make(fake)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = bench(lambda: None, name="cpu_only")
    assert m.device.timer == "fake"
    rec = ctx.session.entries[-1]
    assert "CUPTI saw no kernel" in (rec.timer_note or "")
    assert any("timer fake events: CUPTI saw no kernel" in ln for ln in summary_lines(ctx.session.entries))


def test_timer_argument_forces_events_and_rejects_bad_values():
    fake = FakeCupti()
    bench, _b, ctx = make(fake)
    m = bench(lambda: fake.launch(2000), name="k", timer="events")
    assert m.device.timer == "fake" and "timer='events'" in ctx.session.entries[-1].timer_note
    with pytest.raises(ValueError, match="invalid timer='ncu'"):
        bench(lambda: fake.launch(2000), timer="ncu")
    plain = GpuBench(PerfContext(backend_factory=lambda: FakeBackend([1e-6]), lock=lambda info: NullLock()))
    with pytest.raises(ValueError, match="timer='cupti' is not available"):
        plain(lambda: None, timer="cupti")


def test_assert_ratio_with_cupti_compares_kernel_durations():
    fake = FakeCupti()
    bench, _b, ctx = make(fake)
    c = bench.assert_ratio(lambda: fake.launch(1000), lambda: fake.launch(2000), at_most=0.6)
    assert c.ratio == pytest.approx(0.5) and ctx.session.entries[-1].timer == "cupti"


def test_missing_binding_leaves_the_event_timer_with_the_reason(monkeypatch):
    monkeypatch.setattr(_cupti, "_STATE", {})
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ImportError(name="cupti")
    mod, why = _cupti.load_cupti()
    assert mod is None and "cupti-python is not installed" in why and "pytest-gpuenv[cupti]" in why
    ev = FakeBackend([1e-6])
    ev.info.vendor = "nvidia"
    b = _bench._with_profiler(ev)
    assert b is ev and b.timer_note.startswith("CUPTI timer unavailable: cupti-python is not installed")
    amd = FakeBackend([1e-6])
    amd.info.vendor = "amd"
    assert "rocprofiler-sdk" in _bench._with_profiler(amd).timer_note


def test_a_failing_cupti_falls_back_to_events(monkeypatch):
    class Broken(FakeCupti):
        def activity_enable(self, kind: int) -> None:
            raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")

    monkeypatch.setattr(_cupti, "_STATE", {"module": Broken(), "why": None})
    ev = FakeBackend([1e-6])
    ev.info.vendor = "nvidia"
    b = _bench._with_profiler(ev)
    assert b is ev and "INSUFFICIENT_PRIVILEGES" in b.timer_note


def test_cupti_is_imported_only_when_a_measurement_runs():
    import subprocess

    code = ("import sys, pytest_gpuenv.perf, pytest_gpuenv.perf.bench, pytest_gpuenv.perf._cupti; "
            "print('cupti' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# ----------------------------------------------------------------------------------------------- GPU
@requires_cuda
def test_cupti_timer_on_the_gpu():
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupti")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from pytest_gpuenv.perf.bench import default_monitor, select_backend

    bench = GpuBench(PerfContext(backend_factory=lambda: select_backend(None), monitor_factory=default_monitor,
                                 perf_mode="warn"))
    n = 1 << 20
    a, b, c = (torch.ones(n, device="cuda") for _ in range(3))
    m = bench(lambda: torch.add(a, b, out=c), name="add_1M")
    e = bench(lambda: torch.add(a, b, out=c), name="add_1M_events", timer="events")
    assert m.device.timer == "cupti", getattr(bench.backend, "timer_note", None)
    assert m.sampler.details and m.sampler.details[0][0] == 1
    assert 1e-6 < m.median < e.median  # no event-pair overhead in the CUPTI figure


def test_ties_spread_over_the_tick_move_the_median_smoothly():
    from pytest_gpuenv.perf import _stats

    xs = [1280e-9] * 6 + [1312e-9] * 10 + [1344e-9] * 4
    assert _stats.median(xs) == 1312e-9  # plain median: a whole tick
    med, lo, hi = _stats.summarize(xs, 0.95, tick=32e-9)
    assert 1296e-9 < med < 1328e-9 and med != 1312e-9 and lo < med < hi
    assert _stats.spread_ties([3.0, 1.0], 0.0) == [1.0, 3.0]
    assert _stats.summarize([5e-6] * 20, 0.95, tick=32e-9)[0] == pytest.approx(5e-6)
    # readings a nanosecond off the tick (CUPTI's rounding) are tied with it, at the middle reading
    near = _stats.spread_ties([1311e-9] * 3 + [1312e-9] * 14 + [1313e-9] * 3, 32e-9)
    assert min(near) > 1296e-9 and max(near) < 1328e-9 and _stats.median(near) == pytest.approx(1312e-9)
    # a reading off the grid has a cell overlapping its neighbours': the result is still sorted
    off = _stats.spread_ties([1280e-9] * 5 + [1290e-9] + [1312e-9] * 5, 32e-9)
    assert off == sorted(off) and len(off) == 11


def test_warm_up_ends_when_medians_agree_within_two_ticks():
    """A 1.3 us kernel read in 32 ns ticks: medians of 5 that differ by one tick (2.5 %) agree."""
    fake = FakeCupti()
    bench, _backend, _ctx = make(fake)
    seq = iter([1280, 1312] * 10_000)
    m = bench(lambda: fake.launch(next(seq)), name="tiny")
    assert len(m.sampler.warmup_medians) == 2


def test_tick_of_finds_the_timestamp_resolution():
    tick = _cupti.CuptiBackend.tick_of
    assert tick([1.28e-6, 1.312e-6, 1.344e-6]) == pytest.approx(32e-9)
    assert tick([1.279e-6, 1.313e-6, 1.344e-6, 1.088e-6]) == pytest.approx(32e-9)  # 1 ns off, as seen on the H200
    assert tick([0.656e-6, 1.6e-6], repeat=2) == pytest.approx(16e-9)  # hot mode: interval / repeat
    assert tick([]) == 0.0 and tick([1.0013e-6, 1.0051e-6]) == 0.0  # arbitrary ns: no tick


def test_a_quantised_cupti_median_is_not_stuck_on_one_tick():
    fake = FakeCupti()
    bench, _b, _ctx = make(fake)
    durations = iter(([1280] * 3 + [1312] * 5 + [1344] * 2) * 300)
    m = bench(lambda: fake.launch(next(durations)), name="small")
    assert 1296e-9 < m.median < 1328e-9 and m.median != pytest.approx(1312e-9, abs=0.5e-9)


def test_api_records_of_calls_that_enqueue_nothing_are_turned_off():
    class Cbid(enum.IntEnum):
        INVALID = 0
        cudaGetDevice_v3020 = 1
        cudaLaunchKernel_v7000 = 2
        cudaMemcpyAsync_v3020 = 3
        cudaEventRecord_v3020 = 4

    calls = []
    fake = FakeCupti()
    fake.Runtime_api_trace_cbid = Cbid  # type: ignore[attr-defined]  # cupti-python 13.2's name
    fake.activity_enable_runtime_api = lambda cbid, on: calls.append((cbid, on))  # type: ignore[attr-defined]
    _cupti.Activity(fake)
    assert calls == [(1, 0), (4, 0)]  # launches and copies keep their records (and external correlation)
    older = FakeCupti()
    older.RuntimeApiTraceCbid = Cbid  # type: ignore[attr-defined]
    older.activity_enable_runtime_api = lambda cbid, on: calls.append((cbid, on))  # type: ignore[attr-defined]
    _cupti.Activity(older)
    assert calls == [(1, 0), (4, 0)] * 2


def test_a_replaced_activity_client_is_registered_again():
    fake = FakeCupti()
    bench, backend, ctx = make(fake)
    mine = fake.callbacks
    fake.callbacks = (mine[0], lambda recs: None)  # torch.profiler took CUPTI's callbacks over
    m = bench(lambda: fake.launch(3000), name="after_profiler")
    assert fake.callbacks == mine and m.device.timer == "cupti" and m.median == pytest.approx(3e-6)


def test_every_call_of_the_callable_runs_under_the_gpu_lock():
    # found on the H200: the probe call (does the callable launch device work?) ran before the per-GPU lock
    # was taken, so another xdist worker's measurement could run beside it; one hold now covers probe and
    # samples, for a measurement and for a ratio
    fake = FakeCupti()
    depth = [0]

    class Lock:
        def __enter__(self) -> None:
            depth[0] += 1

        def __exit__(self, *a: Any) -> None:
            depth[0] -= 1

    bench, _b, _c = make(fake, lock=lambda info: Lock())
    held: list[int] = []

    def fn() -> None:
        held.append(depth[0])
        fake.launch(2345)

    bench(fn, name="add")
    bench.assert_ratio(fn, fn, at_most=2.0)
    assert held and min(held) >= 1
