"""Edges of the CPU executor's round-robin fast path (unchecked launches): a one-thread block reaching a
barrier (the switch would resume the context it is saving), and the watchdog firing while the threads go
from barrier to barrier, or while one spins in kernel code on fibers tied to their thread indices: each
gives the general path's report, and the next launch works."""

from __future__ import annotations

import shutil

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")

SOURCE = """#include <hip/hip_runtime.h>

extern "C" __global__ void one(int* out) {
    __shared__ int s;
    if (threadIdx.x == 0) s = 7;
    __syncthreads();
    out[blockIdx.x] = s + blockIdx.x;
}

extern "C" __global__ void spin(int* out) {
    for (;;) __syncthreads();
}

// block `bad`: thread `who` spins in kernel code (mode 0), or every thread loops on barriers (mode 1)
extern "C" __global__ void hang(int* out, int bad, int who, int mode) {
    __shared__ int s[256];
    const int t = threadIdx.x;
    s[t] = t;
    __syncthreads();
    if (blockIdx.x == bad) {
        if (mode == 0 && t == who) for (volatile int x = 0; x >= 0; x = (x + 1) & 0xffff) {}
        if (mode == 1) for (;;) __syncthreads_count(t == who);
    }
    __syncthreads();
    out[blockIdx.x * 256 + t] = s[255 - t];
}
"""


@pytest.mark.parametrize("check", [False, True], ids=["unchecked", "checked"])
def test_one_thread_blocks_reach_a_barrier(cpu_kernel, check):
    out = np.zeros(3, np.int32)
    cpu_kernel("one", check=check)(3, 1, out)
    assert out.tolist() == [7, 8, 9]


@pytest.mark.parametrize("n", [256, 1024])
def test_watchdog_in_a_barrier_loop(cpu_kernel, monkeypatch, n):
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "0.3")
    for _ in range(3):
        with pytest.raises(rtc.KernelWatchdogError):
            cpu_kernel("spin", check=False)(1, n, np.zeros(1, np.int32))


@pytest.mark.parametrize("mode", [0, 1], ids=["in-kernel-code", "between-barriers"])
def test_watchdog_on_tied_fibers_then_the_next_launch(cpu_kernel, monkeypatch, mode):
    monkeypatch.setenv("GPUENV_CPU_WATCHDOG", "0.3")
    k = cpu_kernel("hang", check=False)
    with pytest.raises(rtc.KernelWatchdogError) as info:
        k(8, 256, np.zeros(8 * 256, np.int32), 5, 77, mode)
    assert "block (5,0,0)" in str(info.value)
    out = np.zeros(8 * 256, np.int32)
    k(8, 256, out, -1, 0, 0)
    assert np.array_equal(out, np.tile(np.arange(255, -1, -1), 8))
