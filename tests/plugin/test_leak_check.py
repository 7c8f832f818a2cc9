"""``--gpuenv-leak-check`` / ``@gpuenv_leak_check`` without a GPU: the options and marker checks, the
arithmetic of a leak, and that nothing is measured (nor torch imported) where CUDA was never started.
The GPU half (a torch leak and a raw cuMemAlloc leak caught on the H200): tests/plugin/test_gpu_leak_check.py."""

from __future__ import annotations

import sys

import pytest

from pytest_gpuenv.guards.leak import Leak, leaks, message

MiB = 2**20


def test_leak_arithmetic():
    before = {0: (1000, 50 * MiB), 1: (0, 10 * MiB)}
    after = {0: (5096, 50 * MiB), 1: (0, 90 * MiB)}
    assert leaks(before, after, 16 * MiB) == [Leak(0, 4096, 0), Leak(1, 0, 80 * MiB)]
    assert leaks(before, before, 16 * MiB) == []
    # freed memory is no leak; driver growth under the threshold is noise
    assert leaks(before, {0: (0, 60 * MiB), 1: (0, 10 * MiB)}, 16 * MiB) == []
    # CUDA started during the test: its torch allocations count, its context does not
    assert leaks(None, {0: (512, 500 * MiB)}, 16 * MiB) == [Leak(0, 512, 0)]
    text = message("t.py::test_x", [Leak(0, 4096, 0), Leak(1, 0, 80 * MiB)], 16 * MiB)
    assert text == ("gpuenv leak check: t.py::test_x leaked GPU memory: cuda:0: 4.0 KiB (4096 bytes) still "
                    "allocated through torch | cuda:1: 80.0 MiB more in use outside torch (driver memory info; "
                    "threshold 16.0 MiB)")


SUITE = """
import sys
import pytest

def test_plain():
    assert "torch" not in sys.modules

@pytest.mark.gpuenv_leak_check
def test_marked():
    pass

@pytest.mark.gpuenv_leak_check(mode="loud")
def test_bad_marker():
    pass
"""


@pytest.mark.parametrize("args", [(), ("--gpuenv-leak-check",), ("--gpuenv-leak-check=warn",),
                                  ("--gpuenv-leak-check=off", "--gpuenv-leak-threshold=1MiB")])
def test_options_and_marker_without_cuda(pytester, args):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("--strict-markers", "-p", "no:xdist", *args)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*invalid marker gpuenv_leak_check(mode='loud'): mode must be one of off, fail, warn, got 'loud'"])


@pytest.mark.parametrize("args, text", [
    (("--gpuenv-leak-check=sometimes",), "invalid --gpuenv-leak-check value 'sometimes' from command line (--gpuenv-leak-check)"),
    (("--gpuenv-leak-check", "--gpuenv-leak-threshold=lots"), "invalid --gpuenv-leak-threshold 'lots'"),
])
def test_bad_options_are_usage_errors(pytester, args, text):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", *args)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{text}*"])


PATH_SUITE = """
def test_top():
    pass
"""
SUB_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--sub-flag", action="store_true")
"""
SUB_SUITE = """
def test_sub(pytestconfig):
    assert pytestconfig.getoption("sub_flag")
    assert pytestconfig.getoption("gpuenv_leak_check") == {mode!r}
"""


@pytest.mark.parametrize("args, mode", [(("--gpuenv-leak-check", "sub"), "fail"),
                                        (("--gpuenv-leak-check", "WARN", "sub"), "WARN"),
                                        (("--gpuenv-leak-check=warn", "sub"), "warn"),
                                        (("sub", "--gpuenv-leak-check"), "fail")])
def test_the_bare_option_leaves_the_next_path(pytester, args, mode):
    """The bare option is ``fail``: it takes the next argument only when that is one of its values, so a test
    path after it stays a test path (and its folder's conftest.py an initial one, whose options the line may
    use)."""
    pytester.makepyfile(PATH_SUITE)
    pytester.mkdir("sub")
    pytester.path.joinpath("sub", "conftest.py").write_text(SUB_CONFTEST)
    pytester.path.joinpath("sub", "test_sub.py").write_text(SUB_SUITE.format(mode=mode))
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", *args, "--sub-flag")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*pytest took this existing path*")


def test_a_bare_option_in_addopts_leaves_the_command_line_s_path(pytester):
    """``addopts = --gpuenv-leak-check`` in the ini file, then ``pytest sub``: the ini file's options come first,
    so the path follows the bare option (run as a user types it: pytester's runpytest puts its own option
    first)."""
    pytester.makeini("[pytest]\naddopts = -p no:xdist -p no:cacheprovider --gpuenv-leak-check\n")
    pytester.makepyfile(PATH_SUITE)
    pytester.mkdir("sub")
    pytester.path.joinpath("sub", "conftest.py").write_text(SUB_CONFTEST)
    pytester.path.joinpath("sub", "test_sub.py").write_text(SUB_SUITE.format(mode="fail"))
    result = pytester.run(sys.executable, "-m", "pytest", "sub", "--sub-flag", f"--basetemp={pytester.path / 'tmp'}")
    result.assert_outcomes(passed=1)


def test_ini_twin(pytester):
    pytester.makeini("[pytest]\ngpuenv_leak_check = always\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*invalid --gpuenv-leak-check value 'always' from ini option gpuenv_leak_check*"])


PLUMBING_CONFTEST = """
# the measurement replaced (no GPU here): 'device 0' holds what the tests append to HELD; the real
# snapshot (torch's allocator and cudaMemGetInfo) runs in tests/plugin/test_gpu_leak_check.py on a GPU
from pytest_gpuenv.guards import leak

HELD = []
leak.snapshot = lambda: {0: (sum(HELD), 0)}
"""
PLUMBING_SUITE = """
import conftest

def test_leaks():
    conftest.HELD.append(4096)

def test_clean():
    conftest.HELD.append(512)
    conftest.HELD.pop()
"""


@pytest.mark.parametrize("mode", ["fail", "warn"])
def test_teardown_error_or_warning_names_device_and_bytes(pytester, mode):
    pytester.makeconftest(PLUMBING_CONFTEST)
    pytester.makepyfile(PLUMBING_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--gpuenv-leak-check={mode}")
    line = ("*gpuenv leak check: test_teardown_error_or_warning_names_device_and_bytes.py::test_leaks leaked GPU "
            "memory: cuda:0: 4.0 KiB (4096 bytes) still allocated through torch*")
    if mode == "fail":
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaks*", line])
    else:
        result.assert_outcomes(passed=2, warnings=1)
        result.stdout.fnmatch_lines([line])
