"""gpu_bench through pytest (pytester, subprocess), the GPU lock across processes, import hygiene."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_gpuenv.perf import gpu_lock, lock_dir


def test_gpu_bench_skips_on_a_cpu_only_runner(pytester):
    pytester.makepyfile(
        """
        def test_speed(gpu_bench):
            gpu_bench(lambda: None).assert_faster_than("1ms")
        """
    )
    r = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", "-rs")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*perf test requires a usable GPU: found no GPU*"])


def test_gpu_bench_tests_get_the_perf_marker(pytester):
    pytester.makepyfile(
        """
        def test_speed(gpu_bench):
            pass
        def test_other():
            pass
        """
    )
    r = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", "-m", "not perf")
    r.assert_outcomes(passed=1, deselected=1)


def test_perf_off_skips(pytester):
    pytester.makepyfile("def test_speed(gpu_bench):\n    pass\n")
    r = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-perf=off", "-rs")
    r.assert_outcomes(skipped=1)


def test_importing_the_plugin_side_imports_no_gpu_library():
    code = textwrap.dedent(
        """
        import sys
        import pytest_gpuenv.perf, pytest_gpuenv.plugin, pytest_gpuenv.fixtures.bench, pytest_gpuenv.perf.report
        heavy = [m for m in ("torch", "numpy", "cupy", "triton", "hip", "cuda", "cuda.bindings") if m in sys.modules]
        print(heavy)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


_HOLDER = """
import sys, time
from pytest_gpuenv.perf import gpu_lock
with gpu_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_gpu_lock_is_exclusive_and_a_killed_holder_releases_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(tmp_path / "locks"))
    key = "GPU-0000-test"
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, key], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    try:
        assert p.stdout.readline().strip() == "held"
        t = time.perf_counter()
        with pytest.raises(TimeoutError, match=f"held by pid {p.pid}"), gpu_lock(key, timeout=0.3):
            pass
        assert time.perf_counter() - t >= 0.25
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    with gpu_lock(key, timeout=5) as path:  # the kernel released the dead holder's lock
        assert path.startswith(str(tmp_path))
        with gpu_lock(key, timeout=0.1):  # re-entrant in one process
            pass
    assert oct(os.stat(lock_dir()).st_mode & 0o777) == "0o700"


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX modes")
@pytest.mark.parametrize("mode", [0o1777, 0o2775, 0o777], ids=oct)
def test_a_shared_lock_dir_keeps_its_mode_and_gets_a_private_subfolder(tmp_path, monkeypatch, mode):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(shared))
    with gpu_lock("GPU-shared-test", timeout=5) as path:
        assert os.path.dirname(path) == lock_dir() == str(shared / f"pytest-gpuenv-locks-{os.getuid()}")
    assert os.stat(shared).st_mode & 0o7777 == mode  # a folder we did not make keeps its mode
    assert os.stat(lock_dir()).st_mode & 0o777 == 0o700


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX modes")
def test_a_private_lock_dir_is_used_as_it_is(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    os.chmod(mine, 0o755)
    monkeypatch.setenv("GPUENV_LOCK_DIR", str(mine))
    assert lock_dir() == str(mine) and os.stat(mine).st_mode & 0o777 == 0o755
