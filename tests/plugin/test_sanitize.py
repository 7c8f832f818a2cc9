"""``--gpuenv-sanitize`` and ``@gpuenv_sanitize`` where no GPU is: the options' values, the selection, a bad
marker argument, the CPU runner's meaning (the CPU executor's checked mode, ``check=False`` included), and the
reading of compute-sanitizer's and AddressSanitizer's text (in the formats NVIDIA's Compute Sanitizer manual and
ROCm's "Using AddressSanitizer" page show). The runs under the real tool: tests/plugin/test_gpu_sanitize.py."""

from __future__ import annotations

import pytest

from pytest_gpuenv.guards import findings
from pytest_gpuenv.guards.sanitize import tools_for
from pytest_gpuenv.guards.sanitize_child import carried_args, results

OOB = r'''
import numpy as np
import pytest
from pytest_gpuenv.rtc import compile_kernel

SRC = """
#include <hip/hip_runtime.h>
extern "C" __global__ void past_end(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 1.0f;
}
"""

def test_unchecked_build():
    k = compile_kernel(SRC, "past_end", arch="cpu", check=False)
    k((1,), (128,), np.zeros(64, dtype=np.float32), 64)

@pytest.mark.gpuenv_sanitize
def test_marked():
    k = compile_kernel(SRC, "past_end", arch="cpu", check=False)
    k((1,), (128,), np.zeros(64, dtype=np.float32), 64)

def test_after_marked():
    k = compile_kernel(SRC, "past_end", arch="cpu", check=False)
    k((1,), (128,), np.zeros(64, dtype=np.float32), 64)
'''


@pytest.fixture
def cpu_run(pytester, monkeypatch):
    monkeypatch.delenv("GPUENV_SANITIZE", raising=False)
    pytester.makepyfile(test_oob=OOB)

    def run(*args):
        return pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-rA",
                                             *args)
    return run


def test_cpu_runner_option_checks_every_build(cpu_run):
    result = cpu_run("--gpuenv-sanitize=memcheck")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["gpuenv: sanitize memcheck: no GPU here: kernels run on the CPU executor's checked "
                                 "mode*compile_kernel(check=False) included; no child process"])
    result.stdout.fnmatch_lines(["*KernelBoundsError: out-of-bounds access in kernel 'past_end'*thread (64,0,0)*"])


def test_cpu_runner_marker_checks_that_test_only(cpu_run):
    result = cpu_run()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_oob.py::test_marked - *KernelBoundsError*"])
    assert "gpuenv: sanitize" not in result.stdout.str()  # the option is off: no header line


@pytest.mark.parametrize(("args", "env", "ini", "where"), [
    (["--gpuenv-sanitize=leakcheck"], {}, None, "command line (--gpuenv-sanitize)"),
    ([], {"GPUENV_SANITIZE": "leakcheck"}, None, "environment variable GPUENV_SANITIZE"),
    ([], {}, "gpuenv_sanitize = leakcheck", "ini option gpuenv_sanitize in tox.ini"),
])
def test_bad_tool_is_a_usage_error(pytester, monkeypatch, args, env, ini, where):
    monkeypatch.delenv("GPUENV_SANITIZE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", *args)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*gpuenv: invalid --gpuenv-sanitize value 'leakcheck' from {where}; expected one of: "
                                 "off, memcheck, racecheck, synccheck, initcheck"])


@pytest.mark.parametrize("option", ["--gpuenv-sanitize-select=some", "--gpuenv-sanitize-foreign=ignore"])
def test_bad_companion_values(pytester, option):
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", option)
    assert result.ret == 4
    flag, value = option.split("=")
    result.stderr.fnmatch_lines([f"*gpuenv: invalid {flag} value '{value}' from command line ({flag}); "
                                 "expected one of*"])


def test_bad_marker_argument_errors_that_test(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpuenv_sanitize("leakcheck")
        def test_bad(): pass

        @pytest.mark.gpuenv_sanitize(tool="memcheck")
        def test_keyword(): pass

        def test_fine(): pass
    """)
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--strict-markers", "-rE")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random([
        "invalid marker gpuenv_sanitize('leakcheck'): takes tool names only, each one of memcheck, racecheck, "
        "synccheck, initcheck",
        "invalid marker gpuenv_sanitize(tool='memcheck'): takes tool names only*"])


class _Item:
    """Only what ``tools_for`` reads of an item: its closest gpuenv_sanitize mark and its fixture names."""

    def __init__(self, mark=None, fixtures=()):
        self.mark, self.fixturenames = mark, list(fixtures)

    def get_closest_marker(self, name):
        return self.mark if name == "gpuenv_sanitize" else None


@pytest.mark.parametrize(("mark", "fixtures", "tool", "select", "want"), [
    (None, ["hip_kernel"], "memcheck", "kernels", ["memcheck"]),
    (None, ["torch_device"], "memcheck", "kernels", []),
    (None, ["torch_device"], "racecheck", "all", ["racecheck"]),
    (None, ["hip_kernel"], "off", "kernels", []),
    (pytest.mark.gpuenv_sanitize.mark, [], "off", "kernels", ["memcheck"]),
    (pytest.mark.gpuenv_sanitize.mark, [], "initcheck", "kernels", ["initcheck"]),
    (pytest.mark.gpuenv_sanitize("Racecheck", "synccheck", "racecheck").mark, ["hip_kernel"], "memcheck", "kernels",
     ["racecheck", "synccheck"]),
])
def test_selection(mark, fixtures, tool, select, want):
    assert tools_for(_Item(mark, fixtures), tool, select) == want  # type: ignore[arg-type]


def test_child_gets_plugin_ini_and_warning_arguments():
    args = ["-p", "gpuenv", "-pno:randomly", "tests/x.py", "-k", "abc", "-o", "xfail_strict=true",
            "--import-mode=importlib", "-W", "error", "-n", "4", "--override-ini=a=b"]
    assert carried_args(args) == ["-p", "gpuenv", "-pno:randomly", "-o", "xfail_strict=true", "--import-mode=importlib",
                                  "-W", "error", "--override-ini=a=b"]


# ------------------------------------------------------------------------------------ reading the tools' text
MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at write_past_end(float *, int)+0x90 in /src/kernels/planted.hip:9
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f1c2e000fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c2e000000 of size 4000 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f1b0f] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to \
cuGetProcAddress_v2.
=========     Saved host backtrace up to driver entry point at error
=========
========= Invalid __global__ read of size 4 bytes
=========     at elementwise_kernel+0x1c0
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f1c2e100000 is out of bounds
=========
========= ERROR SUMMARY: 3 errors
"""
RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at void shared_race<256>(int *)+0x120 in /src/race.hip:14
=========     and Read access at void shared_race<256>(int *)+0x180 in /src/race.hip:17 [1016 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
OLD_FORM = """\
========= Barrier error detected. Divergent thread(s) in block
=========     at 0x00000130 in /src/sync.cu:21:divergent_barrier
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
ASAN = """\
=================================================================
==2612==ERROR: AddressSanitizer: heap-buffer-overflow on amdgpu device 0 at pc 0x7f4a1c2012a4 WRITE of size 4 in \
workgroup id (3,0,0)
  #0 0x7f4a1c2012a4 in write_past_end(float*, int) at /src/kernels/planted.hip:9:16

Thread ids and accessed addresses:
00 : 0x7f4a0a200fa0

Address 0x7f4a0a200fa0 is a wild pointer inside of access range of size 0x000000000004.
SUMMARY: AddressSanitizer: heap-buffer-overflow /src/kernels/planted.hip:9:16 in write_past_end(float*, int)
"""


def test_memcheck_log():
    found, counted = findings.compute_sanitizer(MEMCHECK)
    assert counted == 3 and len(found) == 2  # the API error is not a finding
    f = found[0]
    assert (f.what, f.kernel, f.file, f.line) == ("Invalid __global__ write of size 4 bytes",
                                                  "write_past_end(float *, int)", "/src/kernels/planted.hip", 9)
    assert f.where == ("thread (232,0,0) in block (3,0,0); Address 0x7f1c2e000fa0 is out of bounds; and is 1 bytes "
                       "after the nearest allocation at 0x7f1c2e000000 of size 4000 bytes")
    assert f.describe().startswith("Invalid __global__ write of size 4 bytes in kernel write_past_end(float *, int) at "
                                   "/src/kernels/planted.hip:9, thread (232,0,0)")
    assert (found[1].kernel, found[1].file, found[1].line) == ("elementwise_kernel", None, None)
    assert "(no line info)" in found[1].describe()
    assert findings.owned(f, ["write_past_end"]) and not findings.owned(found[1], ["write_past_end"])


def test_racecheck_log_and_templates():
    found, counted = findings.compute_sanitizer(RACECHECK)
    assert counted == 1 and len(found) == 1
    f = found[0]
    assert (f.kernel, f.file, f.line) == ("void shared_race<256>(int *)", "/src/race.hip", 14)
    assert f.what.startswith("Error: Race reported between Write access")
    assert findings.owned(f, ["shared_race<256>"]) and findings.owned(f, ["shared_race"])
    assert not findings.owned(f, ["shared"])


def test_older_at_line_form():
    found, _ = findings.compute_sanitizer(OLD_FORM)
    assert [(f.kernel, f.file, f.line) for f in found] == [("divergent_barrier", "/src/sync.cu", 21)]


def test_clean_log():
    assert findings.compute_sanitizer("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == ([], 0)


def test_asan_report():
    (f,) = findings.asan(ASAN)
    assert (f.what, f.kernel, f.file, f.line) == ("heap-buffer-overflow: WRITE of size 4",
                                                  "write_past_end(float*, int)", "/src/kernels/planted.hip", 9)
    assert f.where == "workgroup (3,0,0) on device 0"
    assert findings.owned(f, ["write_past_end"])


def test_child_records_reports_and_kernels(pytester, monkeypatch, tmp_path):
    """The child side, as a sanitizer run starts it (``GPUENV_SANITIZE_CHILD``): builds get -lineinfo, and each
    report is one JSON line (pytest's own serialization) with the kernels built since the last; the parent reads
    them back into reports."""
    out = tmp_path / "results.jsonl"
    monkeypatch.setenv("GPUENV_SANITIZE_CHILD", f'{{"out": "{out}", "tool": "memcheck", "route": "cuda"}}')
    pytester.makepyfile(test_child=OOB.replace("def test_unchecked_build():", '''def test_flags():
    from pytest_gpuenv.rtc import instrument
    assert instrument.current().nvidia == ("-lineinfo",)

def test_unchecked_build():'''))
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", "-p", "no:cacheprovider",
                                           "test_child.py::test_flags", "test_child.py::test_unchecked_build")
    result.assert_outcomes(passed=2)  # (the child is not checked: only the CPU runner's option forces that)
    lines = results(str(out))
    assert [(d["report"]["nodeid"], d["report"]["when"], d["report"]["outcome"]) for d in lines] == [
        (f"test_child.py::{name}", when, "passed") for name in ("test_flags", "test_unchecked_build")
        for when in ("setup", "call", "teardown")]
    assert [k for d in lines for k in d["kernels"]] == ["past_end"]
    config = pytester.parseconfigure()
    rep = config.hook.pytest_report_from_serializable(config=config, data=lines[4]["report"])
    assert isinstance(rep, pytest.TestReport) and rep.when == "call" and rep.passed


def test_nvidia_machine_without_compute_sanitizer(pytester, monkeypatch):
    """The H100 machine tree has no compute-sanitizer: the option stops the run (exit 4) saying where it looked; a
    test that only its marker selects is skipped with that reason, the others run."""
    from _checkout import GPU_ROOTS

    if not (GPU_ROOTS / "h100_linux").is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS}")
    monkeypatch.setenv("GPUENV_ROOT", str(GPU_ROOTS / "h100_linux"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpuenv_sanitize("racecheck")
        def test_marked(): pass

        def test_plain(): pass
    """)
    result = pytester.runpytest_subprocess("-p", "gpuenv", "-p", "no:cacheprovider", "--gpuenv-sanitize=memcheck")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*gpuenv: --gpuenv-sanitize=memcheck: compute-sanitizer was not found on PATH nor "
                                 "in $CUDA_HOME/bin, $CUDA_PATH/bin or /usr/local/cuda/bin (it comes with the CUDA "
                                 "toolkit)"])
    result = pytester.runpytest_subprocess("-p", "gpuenv", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1] test_nvidia_machine_without_compute_sanitizer.py:3: gpuenv_sanitize: "
                                 "compute-sanitizer was not found on PATH*"])
