"""gpu_bench's sampler on a fake backend: batches, flushes, sequential stopping, the time cap, hot and cold modes.

A fake clock advances with the simulated device time, so every rule runs here exactly as on a GPU.
"""

from __future__ import annotations

import math
import warnings

import pytest
from _perf_fake import make, noop

from pytest_gpuenv.perf import PASS, SamplingOptions, _engine


def test_one_sync_per_batch_and_flush_in_cold_mode():
    bench, fb, _ = make([100e-6])
    m = bench(noop)
    enq = [c for c in fb.calls if c[0] == "enqueue"]
    col = [c for c in fb.calls if c[0] == "collect"]
    assert len(enq) == len(col) >= 3  # warm-up batches + sampling batches, one collect each
    assert all(c[1][1] is True for c in enq)  # flush before every cold sample
    assert all(c[1][3] > 0 for c in enq)  # a head delay ahead of every batch
    assert m.n >= 20 and m.mode == "cold"


def test_a_precision_stop_aims_each_batch_at_the_sample_count_the_interval_predicts():
    """A noisy kernel needs hundreds of samples: after the first check each batch aims at 0.9 times the
    count at which the interval would be narrow enough (``_stats.samples_needed``), never more than half the
    samples so far or max_batch, never fewer than the base size or a sixteenth of the samples; the last
    batch is a short one rather than a quarter of the samples past the stopping point."""
    bench, fb, _ = make([100e-6], cv=0.15, max_time=10.0)
    m = bench(noop)
    s = m.sampler
    sizes = [len(c[1][0]) for c in fb.calls if c[0] == "enqueue"][len(s.warmup_medians):]
    before = [sum(sizes[:i]) for i in range(len(sizes))]
    assert m.n >= 200 and sum(sizes) == m.n
    assert sizes[0] == SamplingOptions().min_samples  # no check before min_samples: one batch up to it
    assert all(max(10, n // 16) <= b <= max(10, n // 16, min(SamplingOptions().max_batch, n // 2))
               for b, n in zip(sizes[1:], before[1:]))
    assert max(sizes) > m.n // 8  # far from the stopping point, batches double the sample count
    assert m.n - before[-1] < before[-1] // 4  # the last batch: short
    quarter, k = 0, 0  # batches a quarter-growth schedule (the verdict stop's) would take to m.n
    while quarter < m.n:
        quarter, k = quarter + max(10, min(SamplingOptions().max_batch, quarter // 4)), k + 1
    assert len(sizes) < k


def test_a_verdict_stop_grows_batches_by_a_quarter_of_the_samples():
    """Stopping on a verdict (an assertion), there is no precision target to aim at: batches are a quarter
    of the samples so far, from the base size up to max_batch."""
    bench, fb, _ = make([100e-6], cv=0.2, max_time=10.0)
    m = bench(noop)
    s = m.sampler.fresh()
    s.run(lambda smp: smp.n >= 300)
    sizes = [len(c[1][0]) for c in fb.calls if c[0] == "enqueue"][-s.batches:]
    before = [sum(sizes[:i]) for i in range(len(sizes))]
    assert sizes == [max(10, min(SamplingOptions().max_batch, n // 4)) for n in before]


def test_batch_size_rule_against_a_recorded_check():
    """The aim in numbers: before min_samples, one batch up to it; at n=100 with 400 samples needed,
    0.9 x 400 - 100 = 260, capped at half the samples (50) or max_batch; with 121 needed, 0.9 x 121 - 100 =
    8.9 -> the base size 10; just short at 320, a sixteenth (20); a verdict stop, or a check older than the
    samples, is not aimed."""
    bench, _, _ = make([100e-6])
    s = bench._sampler([noop], "cold", None, "x")
    assert s._batch_size(s.precise) == 20  # before min_samples (20): one batch up to it
    s.samples[0] = [1.0] * 5
    assert s._batch_size(s.precise) == 15
    s.samples[0] = [1.0] * 15
    assert s._batch_size(s.precise) == 10  # never below the base size
    assert s._batch_size(lambda smp: False) == 10  # a verdict: the quarter rule from the base size
    s.samples[0] = [1.0] * 100
    s._need = (100, 400.0)
    assert s._batch_size(s.precise) == 50
    s._need = (100, 121.0)
    assert s._batch_size(s.precise) == 10
    s.opts.max_batch = 30
    s._need = (100, 400.0)
    assert s._batch_size(s.precise) == 30
    assert s._batch_size(lambda smp: False) == 25  # a verdict: a quarter of the samples
    s.samples[0] = [1.0] * 320
    s._need = (320, 330.0)
    assert s._batch_size(s.precise) == 20
    s._need = (90, 400.0)  # a stale check (fewer samples than now): not aimed
    assert s._batch_size(s.precise) == 30  # a quarter of 320, capped at max_batch
    s._need = (320, math.inf)  # no sample near the median yet: as large as allowed
    assert s._batch_size(s.precise) == 30


def test_the_garbage_collector_is_paused_while_sampling_and_restored():
    """Like timeit: a full collection would otherwise land in one batch's host time."""
    import gc

    seen = []
    bench, _, _ = make([100e-6])
    bench(lambda: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        bench(lambda: None)
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_the_sync_probe_waits_fifty_host_calls_at_least_half_a_millisecond():
    bench, fb, _ = make([100e-6])
    bench(noop)
    probes = [c[1] for c in fb.calls if c[0] == "delay"]
    assert probes and 0.5e-3 <= probes[0] <= SamplingOptions().sync_probe_s


def test_far_from_budget_decides_quickly():
    bench, fb, _ = make([100e-6], cv=0.01)
    m = bench(noop)
    n0 = m.n
    assert m.assert_faster_than("200us") == PASS
    assert m.n == n0  # already decided: no extra samples
    assert m.sampler.spent_s < 0.05


def test_borderline_samples_more_then_decides():
    bench, fb, _ = make([100e-6], cv=0.03, seed=3)
    m = bench(noop)
    n0 = m.n
    assert m.assert_faster_than("100.6us") == PASS
    assert m.n > n0


def test_time_cap_bounds_the_cost(monkeypatch):
    # a noisy kernel near the budget: stops at the cap (simulated time), never runs away. The sampler times
    # its own enqueues with the host's clock (the event timer's head delay); a loaded host (the whole suite
    # under xdist) made those delays eat the simulated cap, and a verdict on the few samples left read a false
    # FAIL (107.5 us [102.6, 121.7] against 100 us, at c901972 too): the host's clock here moves 1 us a call
    ticks = iter(range(10**9))
    monkeypatch.setattr(_engine.time, "perf_counter", lambda: next(ticks) * 1e-6)
    bench, _, _ = make([100e-6], cv=0.3, max_time=0.5)
    m = bench(noop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.assert_faster_than("100us")
    # INCONCLUSIVE at the cap is measured once more with twice the cap (issue 13 item 3): each attempt
    # stops at its own cap
    assert m.attempts[0]["spent_s"] <= 0.5 * 1.2
    assert m.attempts[0]["stop_reason"] == "time cap"
    assert m.sampler.spent_s <= 2 * 0.5 * 1.2
    assert m.sampler.stop_reason in ("time cap", "decided")


def test_hot_and_auto_modes():
    bench, fb, _ = make([2e-6])
    m = bench(noop, mode="auto")
    assert m.mode == "hot" and m.sampler.repeat >= 2
    assert m.median == pytest.approx(2e-6, rel=0.02)
    sampling = [c for c in fb.calls if c[0] == "enqueue"][-1]
    assert sampling[1][1] is False and sampling[1][4] == m.sampler.repeat  # no flush, repeat launches
    m2 = bench(noop, mode="auto")
    assert m2.mode == "hot"
    bench, _, _ = make([50e-6])
    assert bench(noop, mode="auto").mode == "cold"
