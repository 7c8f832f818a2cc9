"""Cooperative launches on a real NVIDIA GPU (skipped elsewhere; scripts/gpu-check.sh runs them).

A HIP source with ``cooperative_groups::this_grid().sync()`` is compiled for the device by ``compile_kernel``
(NVRTC through the shipped HIP-on-CUDA headers: pytest_gpuenv/rtc/include/hip/hip_cooperative_groups.h
includes CUDA's own cooperative_groups.h, whose grid sync reads the driver's grid workspace from
``%envreg1``/``%envreg2`` inline (cooperative_groups/details/driver_abi.h, CUDA 13): no ``-rdc``, no device
runtime to link). Each block writes its number, the grid syncs, then each block reads its neighbour's number;
later blocks write later, so without a grid-wide barrier a block reads the neighbour's -1. A grid larger than
the device holds at once is refused before it runs, as a ``KernelLaunchError`` that does not poison the context.

The checks run pytest in a subprocess (``runpytest_subprocess``), so no GPU runtime starts in this process.
"""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import REPO, plugin_installed

from pytest_gpuenv import requires_cuda

pytestmark = requires_cuda


SUITE = r'''
import numpy as np
import pytest
import torch

from pytest_gpuenv.rtc import KernelLaunchError, compile_kernel

SRC = """
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

extern "C" __global__ void neighbour(int* ids, int* seen, int n) {
    const int b = blockIdx.x;
    if (threadIdx.x == 0 && b < n) {
        // later blocks write later: without a grid-wide barrier block b reads block b+1's -1
        const long long t0 = clock64();
        while (clock64() - t0 < 200000LL * (b + 1)) {}
        ids[b] = b + 1;
    }
    cg::this_grid().sync();
    const int i = b * blockDim.x + threadIdx.x;
    if (b < n) seen[i] = ids[(b + 1) % n];
}
"""


@pytest.fixture(scope="module")
def k():
    return compile_kernel(SRC, "neighbour", sync=True)


def _run(k, blocks, threads):
    ids = torch.full((blocks,), -1, dtype=torch.int32, device="cuda")
    seen = torch.full((blocks * threads,), -1, dtype=torch.int32, device="cuda")
    k(blocks, threads, ids, seen, blocks, cooperative=True)
    return ids.cpu().numpy(), seen.cpu().numpy()


@pytest.mark.parametrize("blocks,threads", [(8, 64), (8, 1024), (2, 32)])
def test_each_block_reads_its_neighbours_write_after_grid_sync(k, blocks, threads):
    assert k.backend == "cuda" and k.compiler in ("nvrtc", "nvcc")
    ids, seen = _run(k, blocks, threads)
    np.testing.assert_array_equal(ids, np.arange(1, blocks + 1, dtype=np.int32))
    want = np.repeat((np.arange(blocks, dtype=np.int32) + 1) % blocks + 1, threads)
    np.testing.assert_array_equal(seen, want)


def test_a_grid_larger_than_the_device_holds_is_refused_and_the_context_stays_usable(k):
    ids = torch.zeros(1, dtype=torch.int32, device="cuda")
    with pytest.raises(KernelLaunchError) as e:
        k(1_000_000, 1024, ids, ids, 0, cooperative=True)  # n=0: nothing would be written
    msg = str(e.value)
    print(msg)
    assert e.value.code == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE" and e.value.sticky is False
    assert msg.startswith("cuLaunchCooperativeKernel: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: ")
    assert "grid 1000000x1x1 has 1000000 blocks of 1024 threads" in msg
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert f" per multiprocessor x {sms} multiprocessors) blocks" in msg, msg
    ids, seen = _run(k, 8, 64)  # nothing ran, the context is fine
    assert seen[0] == 2 and seen[-1] == 1


def test_cooperative_must_be_a_bool(k):
    x = torch.zeros(8, dtype=torch.int32, device="cuda")
    with pytest.raises(TypeError, match="cooperative must be True or False, got 1"):
        k(1, 8, x, x, 8, cooperative=1)


def test_hip_kernel_fixture_launches_cooperatively(hip_kernel):
    k = hip_kernel(SRC, "neighbour")
    ids, seen = _run(k, 4, 128)
    np.testing.assert_array_equal(seen, np.repeat(np.array([2, 3, 4, 1], np.int32), 128))
'''


def test_cooperative_launch_on_the_gpu(pytester, monkeypatch, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("numpy")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    pytester.makeini("[pytest]\n")
    if not plugin_installed():  # a checkout on sys.path without `pip install -e .`
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_coop=SUITE)
    cache = tmp_path / "cache"
    try:
        result = pytester.runpytest_subprocess("-rsf", "-v", "-s", f"--gpuenv-cache-dir={cache}", timeout=600)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    result.assert_outcomes(passed=6)
