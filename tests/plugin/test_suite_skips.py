"""GPU skips a suite wrote itself are counted as hardware skips (category "suite")."""

import json

import pytest

from pytest_gpuenv.marks.skip_patterns import cause_of, is_hardware_reason, reason_of

#: skip reasons of published GPU-aware suites (and the forms pytest gives them): hardware skips
HARDWARE_REASONS = [
    "test requires a GPU",  # transformers-style unittest.skipUnless(torch.cuda.is_available(), ...)
    "test requires multiple GPUs",  # diffusers require_torch_multi_gpu
    "CUDA not available",  # PyTorch common_cuda TEST_CUDA
    "CUDA unavailable",
    "only one GPU detected",  # PyTorch skipIfNoMultiGpu
    "multi-GPU not supported",  # PyTorch TEST_MULTIGPU
    "Need at least 2 CUDA devices",  # PyTorch common_distributed TEST_SKIPS["multi-gpu"]
    "Need at least 4 GPUs",
    "Test skipped for ROCm",  # PyTorch TEST_SKIPS["skipIfRocm"]
    "test doesn't currently work on the ROCm stack",  # PyTorch skipIfRocm
    "Insufficient cuda:0 memory",  # PyTorch largeTensorTest
    "CUDNN not available",  # PyTorch skipIfNoCudnn
    "c10d was not compiled with the NCCL backend",  # PyTorch requires_nccl
    "2 GPUs required",  # CuPy testing.multi_gpu
    "HIP uses hsaco, not cubin",  # CuPy
    "CuPy or CUDA driver not available",
    "FP8 not supported on this GPU",  # Triton kernels
    "requires compute capability >= 8.0",
    "Does not support SDPA or pre-SM80 hardware",  # PyTorch SDPA tests
    "not supported on gpu.",  # JAX skip_on_devices
    "Not enough devices (1)",  # JAX-based suites' skip_if_not_enough_devices
    "requires 2 GPUs",
    "This test needs at least 2 CUDA-enabled GPUs",
    "CUDA is required",  # bitsandbytes requires_cuda fixture
    "CUBLASLT not available",  # bitsandbytes
    "Torch not compiled with CUDA enabled",
    "condition: not torch.cuda.is_available()",  # skipif with a string condition
    "condition: torch.cuda.device_count() < 2",
    "Skipping all tests, since no GPU available",
    "not enough GPU memory",
    "insufficient device memory",
    "requires an accelerator",
    "TPU not available",
    "MPS not available",
    "requires gfx90a",
    "requires MI300X",
    "needs Hopper (sm_90)",
    "nvcc not found",
    "Not running GPU tests",  # Kaggle docker-python gpu_test
]

#: reasons that are not hardware skips, though some name a GPU word
OTHER_REASONS = [
    "could not import 'cupy': No module named 'cupy'",  # pytest.importorskip
    "could not import 'pycuda': No module named 'pycuda'",
    "could not import 'numba.cuda': No module named 'numba'",
    "could not import 'torch': No module named 'torch'",
    "No module named 'cupy_backends.cuda'",
    "cannot import name 'cuda' from 'numba'",
    "ImportError: libcudart.so.12: cannot open shared object file",
    "pip install cupy-cuda12x to run these",
    "not supported on Windows",
    "ROCm is not supported on Windows",
    "requires Linux",
    "CUDA is not available on macOS",
    "test requires darwin",
    "sys.platform == 'win32'",
    "requires Python 3.10 or newer",
    "slow test; use --runslow",
    "network access required",
    "torch not installed",
    "requires scipy",
    "flaky on CI, see #1234",
    "performance test skipped by --gpuenv-perf=off",
    "needs a tty",
    "requires a block device",
    "requires docker",
    "",
]


@pytest.mark.parametrize("reason", HARDWARE_REASONS)
def test_published_gpu_skip_reasons_are_hardware_skips(reason):
    assert is_hardware_reason(reason)


@pytest.mark.parametrize("reason", OTHER_REASONS)
def test_package_os_and_other_skips_are_not(reason):
    assert not is_hardware_reason(reason)


def test_project_patterns_come_first():
    assert not is_hardware_reason("needs the lab box")
    assert is_hardware_reason("needs the lab box", [r"lab box"])
    # a project may claim even a reason the built-in table rules out
    assert is_hardware_reason("could not import 'cupy': No module named 'cupy'", [r"'cupy'"])


def test_reason_and_cause_helpers():
    assert reason_of(("f.py", 3, "Skipped: CUDA not available")) == "CUDA not available"
    assert reason_of(("f.py", 3, "raw")) == "raw"
    assert reason_of("a failure text") is None
    assert cause_of("x" * 300).endswith("...") and len(cause_of("x" * 300)) == 100
    assert cause_of("first line\nsecond") == "first line"
    assert cause_of("  ") == "(no reason given)"


#: a suite written without the plugin, gating its GPU tests in all the usual ways
OWN_SKIPS_SUITE = """
import unittest
import pytest

needs_two = pytest.mark.skipif(True, reason="requires multiple GPUs")

@needs_two
def test_skipif(): pass

def test_skip_in_body():
    pytest.skip("CUDA not available")

@pytest.fixture
def cuda():
    pytest.skip("CUDA is required")

def test_fixture(cuda): pass

def test_missing_package():
    pytest.importorskip("cupy_not_installed_here")

@pytest.mark.skipif(True, reason="not supported on Windows")
def test_os(): pass

@pytest.mark.skip(reason="slow")
def test_slow(): pass

@pytest.mark.xfail(reason="CUDA graphs are flaky")
def test_xfail(): assert 0

def test_plain(): pass

class TestUnit(unittest.TestCase):
    @unittest.skipUnless(False, "test requires a GPU")
    def test_unit(self): pass

@unittest.skip("only one GPU detected")
class TestWholeClass(unittest.TestCase):
    def test_one(self): pass
    def test_two(self): pass
"""

MODULE_SKIP = """
import pytest
pytest.skip("CUDA is not available on this machine.", allow_module_level=True)
def test_never(): pass
"""

MODULE_IMPORTORSKIP = """
import pytest
cupy = pytest.importorskip("cupy_not_installed_here")
def test_never(): pass
"""


def _suite(pytester):
    pytester.makepyfile(test_own=OWN_SKIPS_SUITE, test_module_skip=MODULE_SKIP,
                        test_module_imp=MODULE_IMPORTORSKIP)


def test_suite_skips_are_counted_in_the_summary(pytester):
    _suite(pytester)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=11, xfailed=1)
    result.stdout.fnmatch_lines([
        "*gpuenv: hardware skips*",
        "7 test(s) skipped for hardware reasons:",
    ])
    out = result.stdout.str()
    summary = out.split("gpuenv: hardware skips")[1].split("short test summary")[0]
    for cause in ("requires multiple GPUs", "CUDA not available", "CUDA is required", "test requires a GPU",
                  "CUDA is not available on this machine."):
        assert f"suite          {cause}" in summary
    assert "   2  suite          only one GPU detected" in summary
    for other in ("cupy_not_installed_here", "Windows", "slow", "flaky"):
        assert other not in summary


def test_suite_skips_go_into_the_json_report(pytester):
    _suite(pytester)
    result = pytester.runpytest("--gpuenv-json=report.json")
    result.assert_outcomes(passed=1, skipped=11, xfailed=1)
    skips = json.loads((pytester.path / "report.json").read_text())["skips"]
    suite = sorted((s["nodeid"], s["cause"]) for s in skips if s["category"] == "suite")
    assert suite == [
        ("test_module_skip.py", "CUDA is not available on this machine."),
        ("test_own.py::TestUnit::test_unit", "test requires a GPU"),
        ("test_own.py::TestWholeClass::test_one", "only one GPU detected"),
        ("test_own.py::TestWholeClass::test_two", "only one GPU detected"),
        ("test_own.py::test_fixture", "CUDA is required"),
        ("test_own.py::test_skip_in_body", "CUDA not available"),
        ("test_own.py::test_skipif", "requires multiple GPUs"),
    ]


def test_plugin_skips_keep_their_own_category(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.requires_cuda
        def test_marker(): pass
        def test_fixture(gpu_device): pass
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", "--gpuenv-json=r.json")
    result.assert_outcomes(skipped=2)
    categories = [s["category"] for s in json.loads((pytester.path / "r.json").read_text())["skips"]]
    assert categories == ["backend-option", "backend-option"]  # the fixture's own skip is not taken for the suite's


def test_gpu_fixture_skips_are_counted_as_hardware_skips(pytester, roots):
    """A test that asks for ``gpu_device`` (or a GPU ``torch_device``) where no GPU is usable is counted,
    in the summary and in the JSON ``skips``, under the cause ``requires_gpu`` would give."""
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.requires_gpu
        def test_marker(): pass
        def test_device(gpu_device): pass
        def test_torch(torch_device): pass
        """
    )
    result = pytester.runpytest(f"--gpuenv-root={roots('cpu_only_container')}", "--gpuenv-devices=gpu",
                                "--gpuenv-json=r.json", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["3 test(s) skipped for hardware reasons:", "*   3  no-gpu * no GPU found*",
                                 "*test_*.py:4: gpu_device requires a usable GPU: found no GPU*"])
    skips = json.loads((pytester.path / "r.json").read_text())["skips"]
    assert sorted((s["nodeid"].split("::")[1], s["category"]) for s in skips) == [
        ("test_device", "no-gpu"), ("test_marker", "no-gpu"), ("test_torch[gpu-none]", "no-gpu")]


def test_ini_patterns_extend_the_table(pytester):
    pytester.makeini("[pytest]\ngpuenv_skip_patterns =\n    lab box\n    ^needs (the )?A100 pool$\n")
    pytester.makepyfile(
        """
        import pytest
        def test_a(): pytest.skip("lab box unreachable")
        def test_b(): pytest.skip("needs the A100 pool")
        def test_c(): pytest.skip("needs the A100 pool today")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["2 test(s) skipped for hardware reasons:"])


def test_toml_list_of_patterns(pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngpuenv_skip_patterns = ["lab box", "A100"]\n')
    pytester.makepyfile("import pytest\ndef test_a(): pytest.skip('A100 busy')\n")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["1 test(s) skipped for hardware reasons:"])


def test_bad_pattern_is_a_usage_error_naming_it(pytester):
    pytester.makeini("[pytest]\ngpuenv_skip_patterns =\n    lab (box\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: invalid gpuenv_skip_patterns entry 'lab (box' from ini option "
                                 "gpuenv_skip_patterns in tox.ini: missing ), unterminated subpattern*"])


@pytest.mark.slow
def test_suite_skips_counted_once_under_xdist(pytester):
    pytest.importorskip("xdist")
    _suite(pytester)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=1, skipped=11, xfailed=1)
    result.stdout.fnmatch_lines(["7 test(s) skipped for hardware reasons:"])


#: what pytest-forked does: each test runs in a forked child, whose reports the parent logs
FORKED_CONFTEST = """
import os, pickle, pytest
from _pytest.runner import runtestprotocol

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        data = [item.config.hook.pytest_report_to_serializable(config=item.config, report=x) for x in reports]
        os.write(w, pickle.dumps(data))
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for d in pickle.loads(b"".join(chunks)):
        item.ihook.pytest_runtest_logreport(report=item.config.hook.pytest_report_from_serializable(
            config=item.config, data=d))
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


def test_skips_of_tests_run_in_a_forked_child_are_counted(pytester, roots):
    """The skip travels in the report, and the process that logs it counts it (pytest-forked)."""
    pytester.makeconftest(FORKED_CONFTEST)
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.requires_gpu
        def test_marker(): pass
        def test_suite(): pytest.skip("CUDA not available")
        def test_plain(): pass
        """
    )
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('cpu_only_container')}", "--gpuenv-json=r.json")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["2 test(s) skipped for hardware reasons:"])
    skips = json.loads((pytester.path / "r.json").read_text())["skips"]
    assert sorted((s["nodeid"].split("::")[1], s["category"]) for s in skips) == [
        ("test_marker", "no-gpu"), ("test_suite", "suite")]
