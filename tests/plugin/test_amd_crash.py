"""A GPU fault that aborts the process on ROCm: what was collected is kept, and the test is named
(issue 10 item 1).

ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp ``Runtime::VMFaultHandler`` (ROCm/rocm-systems
projects/rocr-runtime at 1b1610fc, lines 1826-1942) calls ``std::abort()`` after printing "Memory access
fault by GPU node-N" unless a system event handler returns HSA_STATUS_SUCCESS, and clr
rocclr/device/rocm/rocdevice.cpp ``callbackQueue`` (tag rocm-6.2.0, lines 2967-2990) calls ``abort()``
on a queue error: the process dies of SIGABRT while the kernel runs, after the launch returned. Here
the stand-in binding (tests/_hip_standin.py) calls ``os.abort()`` inside ``hipModuleLaunchKernel``,
the last point a real fault could come; everything above the binding is real. The machine tree is the
MI300X scenario (ROCm 6.4.1: the runtime aborts, so the guard is needed). pytest-xdist's
``handle_crashitem`` (xdist/dsession.py) reports "worker 'gwN' crashed while running ..." and replaces
the worker (``-n`` is the recovery).
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from _checkout import REPO, TESTS

CONFTEST = f"""
import sys
sys.path.insert(0, {TESTS!r})
from _hip_standin import HipStandin
from pytest_gpuenv import runtime
from pytest_gpuenv.runtime.hip import HipRuntime

runtime._RUNTIMES[("rocm", 0)] = HipRuntime(0, hip=HipStandin(abort_on_launch=True))
"""

TESTS_PY = """
import os
from pytest_gpuenv import runtime
from pytest_gpuenv.session.state import get_session
from pytest_gpuenv.perf._entries import PerfEntry
from pytest_gpuenv.runtime._common import Function


def test_measured(request):
    get_session(request.config).perf.add(PerfEntry(nodeid=request.node.nodeid, name="kept"))


def test_faults():
    runtime.get("rocm", 0).launch(Function(object(), None, "k"), (1, 1, 1), (64, 1, 1), 0, stream=0)


def test_after():
    print("SKIP_ABORT=" + str(os.environ.get("HIP_SKIP_ABORT_ON_GPU_ERROR")))
"""


@pytest.fixture
def suite(pytester, roots, tmp_path, monkeypatch):
    pytest.importorskip("hip")
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x=TESTS_PY)
    cache = tmp_path / "cache"
    args = [f"--gpuenv-root={roots('mi300x_linux')}", f"--gpuenv-cache-dir={cache}", "-p", "no:cacheprovider",
            "--gpuenv-json=out.json"]
    return pytester, args, cache


def _running(cache):
    return sorted(cache.glob("crash/*/running-*.json"))


@pytest.mark.slow
def test_abort_keeps_the_report_and_the_next_run_names_the_test(suite, monkeypatch):
    pytester, args, cache = suite
    monkeypatch.delenv("HIP_SKIP_ABORT_ON_GPU_ERROR", raising=False)
    first = pytester.runpytest_subprocess(*args, "-p", "no:xdist", "-s")
    assert first.ret in (-signal.SIGABRT, 128 + signal.SIGABRT), first.outlines[-20:]
    first.stdout.fnmatch_lines(["*gpuenv: a GPU fault aborts the process: ROCm 6.4.1 aborts the whole process*"])
    # the JSON report was flushed before the launch, with what the earlier test measured
    report = json.loads((pytester.path / "out.json").read_text())
    assert [m["name"] for m in report["measurements"]] == ["kept"]
    assert report["environment"]["rocm"]["version"] == "6.4.1"
    (marker,) = _running(cache)
    assert json.loads(marker.read_text())["nodeid"] == "test_x.py::test_faults"

    second = pytester.runpytest_subprocess(*args, "-p", "no:xdist", "-k", "not faults", "-s")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["*gpuenv: an earlier run died while test_x.py::test_faults had launched a HIP "
                                 "kernel*", "*SKIP_ABORT=1*", "*gpuenv: crashes*"])
    assert _running(cache) == []  # named once, then forgotten
    third = pytester.runpytest_subprocess(*args, "-p", "no:xdist", "-k", "not faults")
    assert "earlier run died" not in third.stdout.str()


def test_a_finished_test_leaves_no_record(suite):
    pytester, args, cache = suite
    result = pytester.runpytest_subprocess(*args, "-p", "no:xdist", "-k", "measured or after")
    result.assert_outcomes(passed=2)
    assert _running(cache) == []


def test_users_setting_wins(suite, monkeypatch):
    pytester, args, _ = suite
    monkeypatch.setenv("HIP_SKIP_ABORT_ON_GPU_ERROR", "0")
    result = pytester.runpytest_subprocess(*args, "-p", "no:xdist", "-k", "after", "-s")
    result.stdout.fnmatch_lines(["*SKIP_ABORT=0*"])


def test_xdist_controller_names_the_test_and_keeps_the_workers_records(suite):
    pytester, args, cache = suite
    result = pytester.runpytest_subprocess(*args, "-p", "xdist", "-n", "1")
    result.stdout.fnmatch_lines([
        "*worker 'gw0' crashed while running 'test_x.py::test_faults'*",
        "*gpuenv: test_x.py::test_faults had launched a HIP kernel when the process died*",
    ])
    result.assert_outcomes(passed=2, failed=1)
    assert "replacing crashed worker gw0" in result.stdout.str()
    report = json.loads((pytester.path / "out.json").read_text())
    assert [m["name"] for m in report["measurements"]] == ["kept"]  # flushed by the worker, merged here
    assert _running(cache) == [] and sorted(cache.glob("crash/*/records-*.json")) == []


def test_rocm7_header_says_a_fault_returns_an_error(pytester, roots, tmp_path, monkeypatch):
    # clr CHANGELOG.md "HIP 7.0": exceptions during a kernel no longer abort the process (core dumps off);
    # the RX 7900 XTX tree has ROCm 7.2.0. The record is still written; the report is not flushed early.
    pytest.importorskip("hip")
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("HIP_SKIP_ABORT_ON_GPU_ERROR", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x=TESTS_PY)
    cache = tmp_path / "cache"
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('rx7900xtx_wsl2')}", f"--gpuenv-cache-dir={cache}",
                                           "-p", "no:cacheprovider", "-p", "no:xdist", "--gpuenv-json=out.json", "-s")
    result.stdout.fnmatch_lines(["*gpuenv: a GPU fault returns an error: ROCm 7.2.0*HIP_SKIP_ABORT_ON_GPU_ERROR in "
                                 "effect*"])
    assert not (pytester.path / "out.json").exists()
    (marker,) = _running(cache)
    assert json.loads(marker.read_text())["nodeid"] == "test_x.py::test_faults"


@pytest.mark.slow
def test_no_guard_where_no_hip_kernel_can_run(pytester, roots, monkeypatch):
    # xdist workers on an NVIDIA machine without ROCm: no guard there, so no state dir is made and no
    # per-test hook of it runs (the controller keeps one: its workers might run where ROCm is)
    pytest.importorskip("xdist")
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(test_y="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('h100_linux')}", "-p", "xdist", "-n", "1")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".pytest_cache" / "d" / "gpuenv-crash").exists()
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('mi300x_linux')}", "-p", "xdist", "-n", "1")
    result.assert_outcomes(passed=1)
    assert (pytester.path / ".pytest_cache" / "d" / "gpuenv-crash").is_dir()  # the control: ROCm makes it


def test_no_guard_where_rocm_is_installed_without_a_gpu(pytester, roots):
    """ROCm's packages without the amdgpu driver (this CI machine): nothing can fault, so no guard runs."""
    pytester.makepyfile(test_y="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('rocm_installed_no_gpu')}")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".pytest_cache" / "d" / "gpuenv-crash").exists()
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('rocm_no_permission')}")
    result.assert_outcomes(passed=1)  # an AMD GPU kept out by a permission problem: the guard stays
    assert (pytester.path / ".pytest_cache" / "d" / "gpuenv-crash").is_dir()


# ---------------------------------------------------------------- hostile files where the records are kept
LAUNCHES = CONFTEST.replace("abort_on_launch=True", "abort_on_launch=False")


@pytest.fixture
def planted(pytester, roots, monkeypatch):
    """A project on the MI300X tree (the guard runs) whose ``.pytest_cache`` state dir is ready for plants."""
    pytest.importorskip("hip")
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest(LAUNCHES)
    pytester.makepyfile(test_x=TESTS_PY)
    state = pytester.path / ".pytest_cache" / "d" / "gpuenv-crash"
    state.mkdir(parents=True)
    return pytester, [f"--gpuenv-root={roots('mi300x_linux')}", "-p", "no:xdist"], state


def test_junk_running_records_are_neither_waited_on_nor_read_whole(planted):
    pytester, args, state = planted
    os.mkfifo(state / "running-fifo.json")  # read: hung the header of every run
    (state / "running-zero.json").symlink_to("/dev/zero")  # read: ran out of memory
    (state / "running-deep.json").write_text("[" * 60000)
    (state / "running-big.json").write_text('{"nodeid": "' + "x" * (1 << 20) + '"}')
    (state / "running-dead.json").write_text('{"nodeid": "t.py::dead", "pid": 2147483646}')
    stale, fresh = state / "running-w1.json.0a1b2c.tmp", state / "running-w2.json.3d4e5f.tmp"
    stale.write_text("{")  # left by a process killed before it renamed its record
    os.utime(stale, (time.time() - 3600,) * 2)
    fresh.write_text("{")  # another run's, being written now
    result = pytester.runpytest_subprocess(*args, "-k", "after", timeout=60)
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("an earlier run died") == 2  # the real record, and the header's echo
    result.stdout.fnmatch_lines(["*an earlier run died while t.py::dead had launched*"])
    assert sorted(p.name for p in state.iterdir()) == [fresh.name]  # junk and record alike, forgotten


def test_a_fifo_where_the_running_record_goes_does_not_block_the_launch(planted):
    pytester, args, state = planted
    os.mkfifo(state / "running-main.json")
    result = pytester.runpytest_subprocess(*args, "-k", "faults", timeout=60)
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in state.iterdir()) == []  # replaced by the record, removed when the test ended
