"""A barrier that threads which returned never reach, on a real NVIDIA GPU (skipped elsewhere;
scripts/gpu-check.sh runs it): the GPU releases the others (NVIDIA since Volta counts exited threads as
arrived), with the result the CPU executor gives (tests/cpu/test_cpu_exec_semantics.py). A pytest subprocess,
so no GPU runtime starts in this process."""

from __future__ import annotations

import os

import pytest
from _checkout import REPO

from pytest_gpuenv import requires_cuda

pytestmark = requires_cuda

KERNEL = """\
#include <hip/hip_runtime.h>
extern "C" __global__ void guarded_then_barrier(const int* in, int* out, int n) {
    __shared__ int buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    buf[threadIdx.x] = in[i] * 2;
    __syncthreads();
    int j = threadIdx.x ^ 1;
    out[i] = blockIdx.x * blockDim.x + j < n ? buf[j] : -1;
}
"""

TEST = """\
import torch

def test_guarded_then_barrier(hip_kernel, torch_device):
    n = 100
    k = hip_kernel("guarded.hip", "guarded_then_barrier")
    x = torch.arange(n, dtype=torch.int32, device=torch_device)
    out = torch.full((n,), -7, dtype=torch.int32, device=torch_device)
    k(2, 64, x, out, n)
    j = [i ^ 1 for i in range(n)]
    assert out.cpu().tolist() == [2 * v if v < n else -1 for v in j]
"""


def test_a_barrier_after_returned_threads_on_the_gpu(pytester, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytest.importorskip("torch")
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "guarded.hip").write_text(KERNEL)
    pytester.makeini("[pytest]\n")
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_guarded=TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:gpuenv", "-v")
    result.assert_outcomes(passed=1)
