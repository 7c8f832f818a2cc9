"""The CPU executor through the plugin (pytester, in a subprocess): hip_kernel tests run once per warp
size on a runner without a GPU, a wave64 assumption fails at wave32 with the kernel's line, device
printf is shown with the failing test, and --gpuenv-kernels / gpuenv_cpu_warp_sizes select the mode."""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import CPU_KERNELS, REPO, plugin_installed

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
CPU = ("--gpuenv-backend=cpu", "-p", "no:cacheprovider")

WAVE64 = """\
#include <hip/hip_runtime.h>
// assumes 64-wide wavefronts: 256 threads are 4 of them
extern "C" __global__ void block_sum(float* out, const float* in) {
    __shared__ float partial[256 / 64];
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
    if (threadIdx.x % warpSize == 0) partial[threadIdx.x / warpSize] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        printf("block %d sums %f\\n", (int)blockIdx.x, partial[0]);
        out[blockIdx.x] = partial[0] + partial[1] + partial[2] + partial[3];
    }
}
"""

TEST = """\
import torch

def test_block_sum(hip_kernel, torch_device):
    k = hip_kernel("block_sum.hip", "block_sum")
    x = torch.ones(1024, device=torch_device)
    out = torch.zeros(4, device=torch_device)
    k(4, 256, out, x)
    assert out.tolist() == [256.0] * 4
"""


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("torch")
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "block_sum.hip").write_text(WAVE64)
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    if not plugin_installed():  # a checkout on sys.path without `pip install -e .`
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_sum=TEST)
    return pytester


@pytest.mark.slow
def test_runs_once_per_warp_size_and_reports_the_wave64_assumption(project):
    result = project.runpytest_subprocess(*CPU, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test_block_sum?wave64-cpu? PASSED*",
        "*test_block_sum?wave32-cpu? FAILED*",
        "E * pytest_gpuenv.rtc.KernelBoundsError: out-of-bounds access in kernel 'block_sum' at *block_sum.hip:7, block (0,0,0), "
        "thread (128,0,0): write of 4 bytes out of bounds: __shared__ variable 'partial' element 4*",
    ])


@pytest.mark.slow
def test_device_printf_is_shown_with_the_test(project):
    project.makepyfile(test_sum=TEST.replace("== [256.0] * 4", "== [0.0] * 4"))
    result = project.runpytest_subprocess(*CPU, "-k", "wave64")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*Captured stdout call*", "block 0 sums 64.000000", "block 3 sums 64.000000"])


@pytest.mark.slow
def test_ini_warp_sizes(project):
    project.makeini("[pytest]\ngpuenv_cpu_warp_sizes = 64\n")
    result = project.runpytest_subprocess(*CPU, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_block_sum?wave64-cpu? PASSED*"])


def test_bad_warp_sizes_are_a_usage_error(project):
    result = project.runpytest_subprocess(*CPU, "-o", "gpuenv_cpu_warp_sizes=48")
    result.stderr.fnmatch_lines(["*invalid gpuenv_cpu_warp_sizes '48' from ini option*expected 64, 32 or 64,32*"])


@pytest.mark.slow
def test_kernels_off_skips(project):
    result = project.runpytest_subprocess(*CPU, "--gpuenv-kernels=off", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * hip_kernel: --gpuenv-kernels=off and no GPU*"])


@pytest.mark.slow
def test_kernels_compile_keeps_compile_then_skip(project):
    result = project.runpytest_subprocess(*CPU, "--gpuenv-kernels=compile", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") == 1 and not outcomes.get("failed"), result.stdout.str()


def test_bad_kernels_mode_is_a_usage_error(project):
    result = project.runpytest_subprocess(*CPU, "--gpuenv-kernels=sometimes")
    result.stderr.fnmatch_lines(["*invalid --gpuenv-kernels value 'sometimes' from command line*run, compile, off*"])


def test_ucontext_fallback_runs_barriers(tmp_path):
    """The executor's ucontext build (the fallback off x86-64) runs a barrier kernel (own process)."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from pytest_gpuenv.rtc import compile_kernel\n"
        f"k = compile_kernel({os.path.join(REPO, 'kernels', 'matmul_tiled.hip')!r}, 'matmul_tiled', arch='cpu',"
        f" cache_dir={str(tmp_path)!r})\n"
        "a = np.random.rand(40, 40).astype(np.float32); c = np.zeros((40, 40), np.float32)\n"
        "k((3, 3), (16, 16), c, a, a, 40, 40, 40)\n"
        "assert np.allclose(c, a @ a, rtol=1e-4, atol=1e-4)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, GPUENV_CPU_UCONTEXT="1", PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.stdout.strip() == "ok", res.stderr


def _clang() -> str | None:
    import glob

    found = shutil.which("clang++") or next(iter(sorted(glob.glob("/usr/bin/clang++-*"), reverse=True)), None)
    return found


@pytest.mark.skipif(_clang() is None, reason="no clang++")
def test_clang_build_runs_and_reports_with_lines(tmp_path):
    """$CXX=clang++ builds the executor and the kernels; reports still name the kernel's lines."""
    import subprocess
    import sys

    reports = os.path.join(CPU_KERNELS, "reports.hip")
    code = (
        "import numpy as np\n"
        "from pytest_gpuenv.rtc import compile_kernel, KernelBarrierError\n"
        f"k = compile_kernel({reports!r}, 'if_else_barriers', arch='cpu', warp_size=32, cache_dir={str(tmp_path)!r})\n"
        "try:\n"
        "    k(1, 256, np.zeros(256, np.float32))\n"
        "except KernelBarrierError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, CXX=str(_clang()), PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert "reports.hip:42" in res.stdout and "reports.hip:44" in res.stdout, res.stdout + res.stderr


V5 = """\
#include <hip/hip_runtime.h>
// the last wave reduces without barriers: right only where a wavefront runs in lockstep
__device__ void warp_reduce(volatile float* s, unsigned t) {
    s[t] += s[t + 32]; s[t] += s[t + 16]; s[t] += s[t + 8]; s[t] += s[t + 4]; s[t] += s[t + 2]; s[t] += s[t + 1];
}
extern "C" __global__ void reduce_v5(float* out, const float* in) {
    __shared__ float s[64];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    if (t < 32) warp_reduce(s, t);
    if (t == 0) out[blockIdx.x] = s[0];
}
"""

TEST_V5 = """\
import pytest, torch
from pytest_gpuenv.rtc import KernelWarpSyncError

def test_reported(hip_kernel):
    with pytest.raises(KernelWarpSyncError, match="relies on the wavefront's lanes running in lockstep"):
        hip_kernel("v5.hip", "reduce_v5")(2, 64, torch.zeros(2), torch.ones(128))

def test_lockstep(hip_kernel):
    out = torch.zeros(2)
    hip_kernel("v5.hip", "reduce_v5", lockstep=True)(2, 64, out, torch.ones(128))
    assert out.tolist() == [64.0, 64.0]
"""


def test_lockstep_option_of_hip_kernel(project):
    (project.path / "kernels" / "v5.hip").write_text(V5)
    project.makepyfile(test_sum=TEST_V5)
    result = project.runpytest_subprocess(*CPU, "-v")
    result.assert_outcomes(passed=4)
