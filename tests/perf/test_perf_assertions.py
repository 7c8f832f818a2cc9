"""gpu_bench's assertions beyond a time budget on a fake backend: bandwidth, per-device budgets, ratios and
regressions against recorded baselines.
"""

from __future__ import annotations

import json

import pytest
from _perf_fake import make, noop

from pytest_gpuenv.perf import INCONCLUSIVE, PASS, GpuPerfWarning


def test_bandwidth_checks():
    bench, _, ctx = make([100e-6])
    m = bench(noop, bytes=4e8)  # 4 TB/s
    assert m.bandwidth == pytest.approx(4e12, rel=0.02)
    for bad in (1.5, 0, -0.1, "80%"):
        with pytest.raises(ValueError, match="at_least"):
            m.assert_bandwidth(at_least=bad)
    with pytest.raises(ValueError, match="of='hbm'"):
        m.assert_bandwidth(at_least=0.5, of="hbm")
    with pytest.raises(pytest.skip.Exception, match="no peak bandwidth known for Fake GPU 9000"):
        m.assert_bandwidth(at_least=0.5, of="peak")
    nob = bench(noop)
    with pytest.raises(ValueError, match="needs bytes="):
        nob.assert_bandwidth(at_least=0.5)


def test_bandwidth_against_copy_and_peak():
    bench, fb, ctx = make([100e-6, 110e-6], name="NVIDIA H200")
    # fns[0] is the kernel; the copy reference is timed as fns[0] of its own sampler: same 100 us
    m = bench(noop, bytes=4e8)
    assert m.assert_bandwidth(at_least=0.9, of="copy") == PASS
    assert m.assert_bandwidth(at_least=0.8, of="peak") == PASS  # 4.0 of 4.8 TB/s
    with pytest.raises(AssertionError, match=r"bandwidth 4 TB/s .* < 0.9 x peak bandwidth 4.8 TB/s on NVIDIA H200"):
        m.assert_bandwidth(at_least=0.9, of="peak")
    kinds = [r.kind for r in ctx.session.entries]
    assert kinds.count("copy") == 1


def test_device_keyed_budgets():
    bench, _, _ = make([200e-6], name="NVIDIA H200")
    m = bench(noop)
    assert m.assert_faster_than({"NVIDIA H200": "250us", "AMD Instinct MI300X": "280us"}) == PASS
    with pytest.raises(pytest.skip.Exception, match="no time budget for NVIDIA H200: budgets are given for AMD"):
        m.assert_faster_than({"AMD Instinct MI300X": "280us"})
    with pytest.raises(ValueError, match="'fast'"):
        m.assert_faster_than({"NVIDIA H200": "fast"})


def test_ratio_is_interleaved_abba_and_paired():
    bench, fb, ctx = make([100e-6, 125e-6])
    c = bench.assert_ratio(noop, noop, at_most=0.9)
    assert c.ratio == pytest.approx(0.8, rel=0.02)
    schedules = [c_[1][0] for c_ in fb.calls if c_[0] == "enqueue" and len(c_[1][0]) > 2]
    flat = [tuple(s[i:i + 2]) for s in schedules for i in range(0, len(s), 2)]
    assert (0, 1) in flat and (1, 0) in flat
    assert ctx.session.entries[-1].kind == "ratio" and ctx.session.entries[-1].verdict == PASS
    with pytest.raises(AssertionError, match=r"median ratio 0.8\d\dx .* > budget 0.7x"):
        bench.assert_ratio(noop, noop, at_most=0.7)
    with pytest.raises(ValueError, match="at_most"):
        bench.assert_ratio(noop, noop, at_most=-1)


def test_ratio_cancels_a_common_drift():
    # both slow down together (thermal drift): the paired ratio stays put
    drift = [lambda k: 100e-6 * (1 + k / 400), lambda k: 125e-6 * (1 + k / 400)]
    bench, _, _ = make(drift, cv=0.002)
    c = bench.assert_ratio(noop, noop, at_most=0.85)
    lo, hi = c.ci
    assert lo <= 0.8 * 1.01 and hi >= 0.8 * 0.99


def test_regression_record_check_and_device_isolation(tmp_path):
    path = str(tmp_path / "baselines.json")
    bench, _, ctx = make([100e-6], mode="record", baselines=path)
    assert bench(noop, name="k").assert_no_regression("10%") == "RECORDED"
    with open(path) as fh:
        data = json.load(fh)
    (key,) = data["devices"]
    assert key.startswith("Fake GPU 9000 | fake_1 | driver 1.0 | fake 1.0")
    # unchanged: PASS; 30 % slower: FAIL; 5 % slower: PASS (within threshold)
    assert make([100e-6], baselines=path)[0](noop, name="k").assert_no_regression("10%") == PASS
    assert make([105e-6], baselines=path)[0](noop, name="k").assert_no_regression("10%") == PASS
    with pytest.raises(AssertionError, match=r"\+30\.\d% .* vs baseline 100.\d+ us > \+10% on Fake GPU 9000"):
        make([130e-6], baselines=path)[0](noop, name="k").assert_no_regression("10%")
    # another device never compares against this baseline
    other, _, octx = make([130e-6], baselines=path, name="Other GPU")
    with pytest.warns(GpuPerfWarning, match="no baseline for Other GPU .*run with --gpuenv-perf=record"):
        assert other(noop, name="k").assert_no_regression("10%") == INCONCLUSIVE
    with pytest.raises(ValueError, match="'lots'"):
        make([1e-4], baselines=path)[0](noop, name="k").assert_no_regression("lots")
