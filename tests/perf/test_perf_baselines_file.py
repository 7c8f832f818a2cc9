"""Baselines files that are valid JSON but not what ``--gpuenv-perf=record`` writes.

A missing key, a zero or non-finite baseline, a list where an object belongs: ``assert_no_regression``
raises ``ValueError`` naming the file, the entry and the problem (never KeyError, ZeroDivisionError or
AttributeError); recording replaces a malformed entry of the test; other devices' garbage is ignored.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from _perf_fake import FakeBackend, FakeClock

from pytest_gpuenv.perf import INCONCLUSIVE, PASS, GpuBench, GpuPerfWarning, PerfContext

TEST_KEY = "tests/t.py::test_k::k"


def bench(path, mode="check", seconds=100e-6):
    clock = FakeClock()
    fb = FakeBackend([seconds], clock=clock)
    ctx = PerfContext(backend_factory=lambda: fb, nodeid="tests/t.py::test_k", perf_mode=mode, baselines=str(path),
                      clock=clock, lock=lambda info: contextlib.nullcontext())
    return GpuBench(ctx)


@pytest.fixture
def recorded(tmp_path):
    """(path, device key, the file's data) after recording one good baseline."""
    path = tmp_path / "baselines.json"
    assert bench(path, "record")(lambda: None, name="k").assert_no_regression() == "RECORDED"
    data = json.loads(path.read_text())
    (dkey,) = data["devices"]
    return path, dkey, data


def _corrupt(recorded, change):
    path, dkey, data = recorded
    change(data["devices"], dkey)
    path.write_text(json.dumps(data))
    return path, dkey


def _set(key, value):
    def change(devices, dkey):
        devices[dkey][TEST_KEY][key] = value
    return change


def _drop(key):
    def change(devices, dkey):
        del devices[dkey][TEST_KEY][key]
    return change


@pytest.mark.parametrize(
    "change,problem",
    [
        (_drop("median_s"), "has no 'median_s'"),
        (_drop("ci_low_s"), "has no 'ci_low_s'"),
        (_drop("mode"), "has no 'mode'"),
        (_set("median_s", 0), "median_s is 0, expected a positive number of seconds"),
        (_set("ci_low_s", 0.0), "ci_low_s is 0.0, expected a positive number of seconds"),
        (_set("ci_high_s", -1), "ci_high_s is -1, expected a positive number of seconds"),
        (_set("median_s", float("nan")), "median_s is nan"),
        (_set("median_s", float("inf")), "median_s is inf"),
        (_set("median_s", "fast"), "median_s is 'fast'"),
        (_set("median_s", True), "median_s is True"),
        (_set("median_s", 10**400), "median_s is 1000000000"),  # too large for a float: OverflowError
        (_set("ci_low_s", 1.0), "ci_low_s 1.0 is above ci_high_s"),
        (_set("mode", ["cold"]), "mode is a list, expected a string"),
        (lambda devices, dkey: devices[dkey].__setitem__(TEST_KEY, [1, 2]), "is a list, expected an object"),
        (lambda devices, dkey: devices[dkey].__setitem__(TEST_KEY, 0.0001), "is a number, expected an object"),
    ],
)
def test_malformed_entry_names_file_entry_and_problem(recorded, change, problem):
    path, dkey = _corrupt(recorded, change)
    with pytest.raises(ValueError) as e:
        bench(path)(lambda: None, name="k").assert_no_regression()
    text = str(e.value)
    assert f"performance baselines {path}: entry {TEST_KEY!r} of device {dkey!r}" in text
    assert problem in text
    assert "--gpuenv-perf=record" in text


def test_device_that_is_not_an_object_is_named(recorded):
    path, dkey = _corrupt(recorded, lambda devices, dkey: devices.__setitem__(dkey, ["a", "list"]))
    with pytest.raises(ValueError, match=r"baselines .*: device '.*' holds a list, expected an object of test entries"):
        bench(path)(lambda: None, name="k").assert_no_regression()
    with pytest.raises(ValueError, match="holds a list"):  # recording does not throw the list away unasked
        bench(path, "record")(lambda: None, name="k").assert_no_regression()


def test_recording_replaces_a_malformed_entry(recorded):
    path, _dkey = _corrupt(recorded, _set("median_s", 0))
    assert bench(path, "record")(lambda: None, name="k").assert_no_regression() == "RECORDED"
    assert bench(path)(lambda: None, name="k").assert_no_regression() == PASS


def test_other_devices_garbage_is_not_looked_at(recorded):
    path, _dkey = _corrupt(recorded, lambda devices, dkey: devices.update({"Other GPU": 5, "Third GPU": [TEST_KEY]}))
    assert bench(path)(lambda: None, name="k").assert_no_regression() == PASS
    _corrupt((path, _dkey, json.loads(path.read_text())), lambda devices, dkey: devices.pop(dkey))
    with pytest.warns(GpuPerfWarning, match="no baseline for"):
        assert bench(path)(lambda: None, name="k").assert_no_regression() == INCONCLUSIVE


@pytest.mark.parametrize("content", ["[]", '{"devices": []}', '{"devices": 1}', "null", "1e400"])
def test_file_that_is_not_a_baselines_file(tmp_path, content):
    path = tmp_path / "baselines.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=f"performance baselines {path} is not a pytest-gpuenv baselines file"):
        bench(path)(lambda: None, name="k").assert_no_regression()


@pytest.mark.parametrize("plant, problem", [
    ("fifo", "not a regular file"), ("deep", "not JSON (nested too deeply)"), ("huge", "larger than the 128 MiB"),
])
def test_a_baselines_file_that_cannot_be_read_is_named_unread(tmp_path, fifo, plant, problem):
    path = tmp_path / "baselines.json"
    if plant == "fifo":
        fifo(path)  # opened for reading, it would block the test
    elif plant == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        with open(path, "wb") as f:
            f.truncate(128 * 2**20 + 1)
    with pytest.raises(ValueError) as e:
        bench(path)(lambda: None, name="k").assert_no_regression()
    assert f"cannot read performance baselines {path}: {problem}" in str(e.value)


def test_recording_never_writes_through_a_planted_link(tmp_path):
    """The file is written by ``base.paths.write_atomically`` (a new temporary file with a random name, renamed
    over it): a symbolic link planted where a predictable temporary name would be (``baselines.json.<pid>.tmp``,
    the old writer's) is never written through, and stays a link."""
    import os

    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    path = tmp_path / "baselines.json"
    planted = tmp_path / f"baselines.json.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    assert bench(path, "record")(lambda: None, name="k").assert_no_regression() == "RECORDED"
    assert victim.read_text() == "someone else's file\n" and planted.is_symlink() and not path.is_symlink()
    assert TEST_KEY in next(iter(json.loads(path.read_text())["devices"].values()))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["baselines.json", "baselines.json.lock",
                                                                 planted.name, "victim.txt"])
