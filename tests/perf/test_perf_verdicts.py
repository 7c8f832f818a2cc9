"""gpu_bench's verdicts on a fake backend: failure messages, perf modes, and the problems (dropped clocks,
foreign processes, empty or synchronizing callables) that make a verdict inconclusive.
"""

from __future__ import annotations

import json

import pytest
from _perf_fake import FakeMonitor, make, noop

from pytest_gpuenv.perf import FAIL, INCONCLUSIVE, PASS, GpuPerfWarning
from pytest_gpuenv.runtime.nvml import foreign_of


def test_fail_message_names_statistic_interval_budget_device():
    bench, _, ctx = make([262.1e-6], cv=0.005)
    m = bench(noop, name="vector_add")
    with pytest.raises(AssertionError) as e:
        m.assert_faster_than("250us")
    msg = str(e.value)
    assert msg.startswith("vector_add: median 26")
    assert "> budget 250 us on Fake GPU 9000" in msg
    rec = ctx.session.entries[-1]
    assert rec.verdict == FAIL and rec.budget == "250 us" and rec.statistic == "median"
    json.dumps(ctx.session.measurements())  # plain JSON for --gpuenv-json and xdist


def test_straddling_at_cap_is_inconclusive_and_modes_act_on_it():
    # true value sits inside the guard band: never decided
    for mode, expect in (("check", "warn"), ("warn", "warn"), ("strict", "raise")):
        bench, _, ctx = make([101e-6], cv=0.002, mode=mode, max_time=0.2)
        m = bench(noop)
        if expect == "warn":
            with pytest.warns(GpuPerfWarning, match="INCONCLUSIVE: .*budget 100 us"):
                assert m.assert_faster_than("100us") == INCONCLUSIVE
        else:
            with pytest.raises(AssertionError, match="INCONCLUSIVE.*strict"):
                m.assert_faster_than("100us")
        assert ctx.session.entries[-1].verdict == INCONCLUSIVE


def test_warn_mode_turns_fail_into_warning():
    bench, _, ctx = make([300e-6], mode="warn")
    m = bench(noop)
    with pytest.warns(GpuPerfWarning, match="FAIL"):
        assert m.assert_faster_than("250us") == FAIL


def test_throttled_clocks_make_fail_inconclusive():
    mon = FakeMonitor(mhz=[1000.0], max_mhz=1980.0)  # every batch at 50 % of the maximum
    bench, _, ctx = make([300e-6], monitor=mon, max_time=0.3)
    m = bench(noop)
    assert any("clocks dropped" in p for p in m.problems)
    with pytest.warns(GpuPerfWarning, match="clocks dropped"):
        assert m.assert_faster_than("250us") == INCONCLUSIVE
    assert ctx.session.entries[-1].clocks.discarded_batches >= 1
    assert ctx.session.measurements()[-1]["clocks"]["discarded_batches"] >= 1


def test_some_low_clock_batches_are_discarded_but_do_not_block():
    mon = FakeMonitor(mhz=[1980.0, 1980.0, 1980.0, 1980.0, 1200.0], max_mhz=1980.0)
    bench, _, _ = make([100e-6], monitor=mon)
    m = bench(noop)
    assert m.sampler.discarded_batches <= m.sampler.batches // 4 + 1
    assert m.problems == []
    assert m.assert_faster_than("120us") == PASS


def test_foreign_process_makes_fail_inconclusive():
    mon = FakeMonitor(foreign=[{"pid": 4242, "name": "python"}])
    bench, _, _ = make([300e-6], monitor=mon)
    m = bench(noop)
    with pytest.warns(GpuPerfWarning, match=r"another process used the GPU.*pid 4242 \(python\)"):
        assert m.assert_faster_than("250us") == INCONCLUSIVE


def test_foreign_of_ignores_self_ancestors_and_xdist_siblings():
    parents = {100: 1, 200: 50, 300: 50, 400: 7}
    got = foreign_of([100, 200, 300, 400], related={100, 1}, me=100, name_of=lambda p: "x",
                     ppid_of=lambda p: parents.get(p, 50 if p == 100 else None))
    # 100 is us; 200 and 300 share our parent (50)? our parent is parents[100] = 1 -> 200/300 foreign
    assert [p["pid"] for p in got] == [200, 300, 400]
    got = foreign_of([555, 556], related={10}, me=10, name_of=lambda p: None, ppid_of=lambda p: None)
    assert [p["pid"] for p in got] == [556]  # another PID namespace: one entry is taken to be us


def test_empty_callable_is_named_and_inconclusive():
    bench, _, _ = make([1.3e-6], floor=1.31e-6)
    with pytest.warns(GpuPerfWarning, match="enqueue no GPU work"):
        m = bench(noop, name="nothing")
        assert m.assert_faster_than("1ms") == INCONCLUSIVE


def test_torch_synchronize_inside_is_named(monkeypatch):
    import sys
    import types

    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda *a: None))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    bench, _, _ = make([1e-4])
    with pytest.warns(GpuPerfWarning, match=r"called torch.cuda.synchronize\(\) 1 time"):
        bench(lambda: sys.modules["torch"].cuda.synchronize(), name="syncs")
