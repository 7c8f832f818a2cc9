"""``--gpuenv-sanitize`` under the real compute-sanitizer (scripts/gpu-check.sh, section ``sanitize``): one planted
bug per tool fails its test with that tool, the kernel and the source line (an out-of-bounds global write:
memcheck; a shared-memory race: racecheck; a divergent barrier: synccheck; an uninitialised global read:
initcheck); the same tests without their bug, and a test that only uses torch, pass under every tool; ``-n 4``
gives the same verdicts. Each run is a pytest subprocess, as every GPU run of this suite."""

from __future__ import annotations

import re

import pytest

from pytest_gpuenv import requires_cuda
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.guards.sanitize import compute_sanitizer

#: each planted bug: the kernel file, the line of the bug, the tool that finds it, the head of its report
PLANTED = {
    "memcheck": ("oob.hip", 5, "Invalid __global__ write of size 4 bytes"),
    "racecheck": ("race.hip", 5, "Error: Race reported between"),
    "synccheck": ("barrier.hip", 7, "Barrier error detected"),
    "initcheck": ("uninit.hip", 4, "Uninitialized __global__ memory read of size 4 bytes"),
}

KERNELS = {
    # an out-of-bounds global write: thread n writes out[n], one past the end (FIXED: i < n)
    "oob.hip": """\
#include <hip/hip_runtime.h>
extern "C" __global__ void write_past_end(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i BOUND n)
        out[i] = 2.0f * i;
}
""",
    # a shared-memory race: each thread reads its neighbour's slot without a barrier between (FIXED: one)
    "race.hip": """\
#include <hip/hip_runtime.h>
extern "C" __global__ void shared_race(int* out) {
    __shared__ int tile[256];
    int t = threadIdx.x;
    tile[t] = t;
    BARRIER
    out[t] = tile[(t + 1) % 256];
}
""",
    # a divergent barrier: only the first 16 threads of the block reach __syncthreads (FIXED: all do)
    "barrier.hip": """\
#include <hip/hip_runtime.h>
extern "C" __global__ void divergent_barrier(float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = t;
    if (t < LIMIT)
        __syncthreads();
    out[t] = s[255 - t];
}
""",
    # an uninitialised global read: ``in`` is torch.empty, never written (FIXED: torch.ones)
    "uninit.hip": """\
#include <hip/hip_runtime.h>
extern "C" __global__ void read_uninit(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f;
}
""",
}
FILLS = {"oob.hip": ("<=", "<"), "race.hip": ("", "__syncthreads();"), "barrier.hip": ("16", "256"),
         "uninit.hip": ("", "")}

TESTS = """\
import pytest
import torch

FIXED = {fixed}

def test_oob(hip_kernel):
    k = hip_kernel("oob.hip", "write_past_end")
    out = torch.zeros(1000, device="cuda")
    k((4,), (256,), out, 1000)
    torch.cuda.synchronize()

def test_race(hip_kernel):
    k = hip_kernel("race.hip", "shared_race")
    out = torch.zeros(256, dtype=torch.int32, device="cuda")
    k((1,), (256,), out)
    torch.cuda.synchronize()

def test_barrier(hip_kernel):
    k = hip_kernel("barrier.hip", "divergent_barrier")
    out = torch.zeros(256, device="cuda")
    k((1,), (256,), out)
    torch.cuda.synchronize()

def test_uninit(hip_kernel):
    k = hip_kernel("uninit.hip", "read_uninit")
    src = torch.ones(1000, device="cuda") if FIXED else torch.empty(1000, device="cuda")
    out = torch.zeros(1000, device="cuda")
    k((4,), (256,), src, out, 1000)
    torch.cuda.synchronize()

def test_torch_only():
    a = torch.randn(512, 512, device="cuda")
    assert torch.allclose((a @ a.T).diagonal(), (a * a).sum(1), rtol=1e-3, atol=1e-3)
"""
NAMES = {"memcheck": "test_oob", "racecheck": "test_race", "synccheck": "test_barrier", "initcheck": "test_uninit"}


def _suite(pytester: pytest.Pytester, fixed: bool) -> None:
    for name, text in KERNELS.items():
        placeholder = {"oob.hip": "BOUND", "race.hip": "BARRIER", "barrier.hip": "LIMIT", "uninit.hip": None}[name]
        body = text if placeholder is None else text.replace(placeholder, FILLS[name][1 if fixed else 0])
        (pytester.path / "kernels").mkdir(exist_ok=True)
        (pytester.path / "kernels" / name).write_text(body)
    pytester.makepyfile(test_planted=TESTS.format(fixed=fixed))


@pytest.fixture
def tool_here():
    pytest.importorskip("torch")
    if compute_sanitizer(Fs(None)) is None:
        pytest.skip("compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "gpuenv", "-p", "no:cacheprovider", "-rA", *args, timeout=420)


@requires_cuda
@pytest.mark.parametrize("tool", list(PLANTED))
def test_planted_bug_fails_with_tool_kernel_and_line(pytester, tool_here, tool):
    _suite(pytester, fixed=False)
    name = NAMES[tool]
    result = _run(pytester, f"--gpuenv-sanitize={tool}", "-k", name)
    print(result.stdout.str()[-6000:])
    result.assert_outcomes(failed=1)
    file, line, head = PLANTED[tool]
    out = result.stdout.str()
    assert re.search(rf"gpuenv sanitize \({tool}\): \d+ finding\(s\) in kernels this test built", out), out
    assert head in out
    assert re.search(rf"in kernel \S+ at \S*kernels/{re.escape(file)}:{line}\b", out) or \
        re.search(rf"kernels/{re.escape(file)}:{line}\b", out), out  # the line (racecheck: the write's or the read's)
    assert re.search(rf"^-+ gpuenv sanitize: {tool} -+$", out, re.M), out  # the tool's own text, as a section
    assert "cuGetProcAddress" not in out  # host API errors are not findings, and not shown
    result.stdout.fnmatch_lines([f"{tool}: 1 test(s), 1 with findings; * s under the tool against * s plain*"])


@requires_cuda
@pytest.mark.parametrize("tool", list(PLANTED))
def test_clean_kernels_and_torch_pass(pytester, tool_here, tool):
    _suite(pytester, fixed=True)
    result = _run(pytester, f"--gpuenv-sanitize={tool}", "--gpuenv-sanitize-select=all")
    print(result.stdout.str()[-4000:])
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines([f"{tool}: 5 test(s), 0 with findings; * s under the tool against * s plain*"])
    figures = next(line for line in result.outlines if line.startswith(f"{tool}: 5 test(s)"))
    print(f"figures: {figures}")  # (scripts/gpu-check.sh, section sanitize, shows these lines)


@requires_cuda
def test_markers_and_xdist(pytester, tool_here):
    """Each planted test marked with its tool, the run with -n 4 and --gpuenv-sanitize=memcheck: the four fail,
    each with its own tool (a marker's tools win); the torch test, which uses no hip_kernel, runs in the workers
    as usual; the controller's summary has each tool's figures, the plain times from the workers."""
    pytest.importorskip("xdist")
    _suite(pytester, fixed=False)
    text = (pytester.path / "test_planted.py").read_text()
    for tool, name in NAMES.items():
        text = text.replace(f"def {name}(", f"@pytest.mark.gpuenv_sanitize({tool!r})\ndef {name}(")
    (pytester.path / "test_planted.py").write_text(text)
    result = _run(pytester, "-n", "4", "--gpuenv-sanitize=memcheck")
    print(result.stdout.str()[-6000:])
    result.assert_outcomes(failed=4, passed=1)
    out = result.stdout.str()
    for tool in PLANTED:
        assert f"gpuenv sanitize ({tool}): " in out
        assert re.search(rf"^{tool}: 1 test\(s\), 1 with findings; .* s under the tool against .* s plain", out,
                         re.M), out
