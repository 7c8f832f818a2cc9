"""The perf session's entries: their JSON keys by kind, merging what workers send, the JSON file and the
summary table.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
from _perf_fake import make, noop

from pytest_gpuenv.perf import PerfEntry
from pytest_gpuenv.perf.report import summary_lines
from pytest_gpuenv.perf.session import PerfSession


def test_summary_table():
    bench, _, ctx = make([262.1e-6, 262.1e-6], mode="warn", name="NVIDIA H200")
    m = bench(noop, name="vector_add", bytes=8e8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.assert_faster_than("250us")
    bench.assert_ratio(noop, noop, at_most=2.0)
    merged = PerfSession()  # through the JSON a worker sends its controller
    merged.merge(ctx.session.dump())
    lines = merged.summary_lines()
    assert lines == summary_lines(ctx.session.entries)
    assert lines[0].split() == ["test", "device", "median", "interval", "n", "budget", "verdict"]
    text = "\n".join(lines)
    assert "test_k: vector_add" in text and "NVIDIA H200" in text and "250 us" in text
    assert "FAIL" in text and re.search(r"[01]\.\d{3}x", text) and "<= 2x" in text and "PASS" in text
    assert summary_lines([]) == [] and PerfSession().summary_lines() == []


COMMON_KEYS = {
    "nodeid", "name", "device", "arch", "device_key", "uuid", "timer", "mode", "repeat", "flush_bytes", "n", "clocks",
    "foreign_processes", "problems", "warnings", "stop_reason", "spent_s", "host_enqueue_s", "kind", "statistic",
    "unit", "median_s", "ci_low_s", "ci_high_s", "value", "ci_low", "ci_high", "samples_s", "bandwidth_Bps", "flops",
    "budget", "verdict",
}


KIND_KEYS = {  # the "measurements" keys of --gpuenv-json beyond COMMON_KEYS, by kind (and regression outcome)
    "measure": {"bytes", "flops_count"},
    "time": {"bytes", "flops_count", "message"},
    "copy": {"bytes", "flops_count"},
    "bandwidth": {"bytes", "flops_count", "message", "reference", "reference_Bps", "fraction"},
    "ratio": {"message", "reference", "reference_median_s", "reference_samples_s"},
    "regression recorded": {"bytes", "flops_count", "message", "baseline_path"},
    "regression decided": {"bytes", "flops_count", "message", "baseline_median_s", "ratio", "ratio_ci"},
    "regression": {"bytes", "flops_count", "message"},
}


def test_entry_json_keys_by_kind(tmp_path):
    path = str(tmp_path / "baselines.json")
    bench, _, ctx = make([100e-6, 120e-6], mode="warn", name="NVIDIA H200", baselines=path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = bench(noop, bytes=4.4e8, flops=1e9, name="k")  # a size no other test copies (copies are cached)
        m.assert_faster_than("250us")
        m.assert_bandwidth(0.5, of="copy")
        bench.assert_ratio(noop, noop, at_most=2)
        bench(noop, name="none").assert_no_regression("10%")  # no baseline: INCONCLUSIVE
        make([100e-6], mode="record", baselines=path, ctx=ctx)[0](noop, name="r").assert_no_regression()
        make([100e-6], baselines=path, ctx=ctx)[0](noop, name="r").assert_no_regression()
    seen = {}
    for d in ctx.session.measurements():
        kind = d["kind"]
        if kind == "regression" and "baseline_path" in d:
            kind = "regression recorded"
        elif kind == "regression" and "ratio" in d:
            kind = "regression decided"
        seen[kind] = set(d)
    assert seen == {k: COMMON_KEYS | v for k, v in KIND_KEYS.items()}
    by_kind = {r.kind: r for r in ctx.session.entries}
    bw, ratio, t = by_kind["bandwidth"], by_kind["ratio"], by_kind["time"]
    # value/ci_* is the judged statistic, *_s the time: equal for time entries, not for bandwidth or ratio
    assert (t.value, t.ci_low, t.ci_high) == (t.median_s, t.ci_low_s, t.ci_high_s) and t.unit == "s"
    assert bw.unit == "B/s" and bw.value == pytest.approx(4.4e8 / bw.median_s) and bw.ci_low == 4.4e8 / bw.ci_high_s
    assert ratio.unit == "x" and ratio.value < 1 and ratio.median_s == pytest.approx(100e-6, rel=0.02)
    assert all(PerfEntry.from_dict(d) == r for d, r in zip(ctx.session.measurements(), ctx.session.entries))


def test_entry_from_dict_tolerates_unknown_and_missing_keys():
    r = PerfEntry.from_dict({"kind": "time", "name": "k", "median_s": 1e-4, "from_the_future": {"x": 1},
                              "clocks": {"batches": 3, "new_clock_field": 1}})
    assert (r.kind, r.name, r.median_s, r.clocks.batches, r.value, r.problems) == ("time", "k", 1e-4, 3, None, [])
    assert "from_the_future" not in r.to_dict() and r.to_dict()["clocks"]["sm_mhz_min"] is None
    assert PerfEntry.from_dict({}) == PerfEntry()
    for bad in ([], "x", {"n": "many"}, {"problems": "one"}, {"clocks": 3}, {"value": True}):
        with pytest.raises(ValueError):
            PerfEntry.from_dict(bad)


def test_session_merge_ignores_malformed_payloads_and_writes_json(tmp_path):
    bench, _, ctx = make([100e-6])
    bench(noop, name="a")
    controller = PerfSession()
    for bad in (None, b"\xff", "not json", "{}", '{"a": 1}', "3", '[1, "x", {"n": "many"}]'):
        controller.merge(bad)
    assert controller.entries == []
    controller.merge(ctx.session.dump())
    controller.merge('[{"kind": "measure", "name": "b", "n": 3}, 7]')  # the bad entry alone is dropped
    assert [r.name for r in controller.entries] == ["a", "b"]
    target = tmp_path / "sub" / "report.json"
    controller.write_json(str(target), {"backend": "fake"}, [{"nodeid": "t", "category": "c", "cause": "x"}])
    data = json.loads(target.read_text())
    assert data == {"environment": {"backend": "fake"}, "measurements": controller.measurements(),
                    "skips": [{"nodeid": "t", "category": "c", "cause": "x"}]}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]  # written through a temporary file
