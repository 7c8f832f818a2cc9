"""The CPU executor's round-robin fast path (unchecked launches: threads go from barrier to barrier in order,
and each fiber keeps its thread index from one block to the next) gives the results and reports of the
general path when a block leaves the common case: blocks with and without barriers in one launch, threads
that return early (before a barrier the others wait at) in a block that follows one run on the fast path, warp operations and
``__syncthreads_count`` between barriers, two-dimensional blocks; the next launch after a report works."""

from __future__ import annotations

import shutil
import warnings

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
CHECK = pytest.mark.parametrize("check", [False, True], ids=["unchecked", "checked"])

SOURCE = """#include <hip/hip_runtime.h>

// every third block reverses its part through shared memory (a barrier), the others double it (none)
extern "C" __global__ void mixed(float* out, const float* in) {
    __shared__ float s[256];
    const int t = threadIdx.x, i = blockIdx.x * 256 + t;
    if (blockIdx.x % 3 == 1) {
        s[t] = in[i];
        __syncthreads();
        out[i] = s[255 - t];
    } else {
        out[i] = 2.0f * in[i];
    }
}

// threads [lo, hi) of block `bad` return before the second barrier
extern "C" __global__ void early(float* out, int bad, int lo, int hi) {
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = t;
    __syncthreads();
    if (blockIdx.x == bad && t >= lo && t < hi) return;
    __syncthreads();  // SECOND
    out[blockIdx.x * 256 + t] = s[255 - t];
}

// per block: a wavefront sum by shuffles (before the first barrier, then after one), and how many inputs
// are positive (__syncthreads_count)
extern "C" __global__ void count_and_shuffle(int* counts, float* sums, const float* in) {
    const int t = threadIdx.x, i = blockIdx.x * 256 + t;
    __shared__ float s[256];
    float v = in[i];
    for (int d = warpSize / 2; d > 0; d /= 2) v += __shfl_down(v, d);
    int c = __syncthreads_count(in[i] > 0.0f);
    v = __shfl(v, 0);
    if (t % warpSize == 0) s[t / warpSize] = v;
    __syncthreads();
    if (t == 0) {
        float sum = 0.0f;
        for (int w = 0; w < 256 / warpSize; w++) sum += s[w];
        sums[blockIdx.x] = sum;
        counts[blockIdx.x] = c;
    }
}

// a 16x8 block transposes its tile through shared memory (threadIdx.y after each switch)
extern "C" __global__ void transpose(float* out, const float* in, int w, int h) {
    __shared__ float tile[8][17];
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    int lin = threadIdx.y * 16 + threadIdx.x, ty = lin % 8, tx = lin / 8;
    out[(blockIdx.x * 16 + tx) * h + blockIdx.y * 8 + ty] = tile[ty][tx];
}
"""


@CHECK
def test_blocks_with_and_without_barriers(cpu_kernel, check):
    a = np.arange(12 * 256, dtype=np.float32)
    out = np.zeros_like(a)
    cpu_kernel("mixed", check=check)(12, 256, out, a)
    want = (2 * a).reshape(12, 256)
    want[1::3] = a.reshape(12, 256)[1::3, ::-1]
    assert np.array_equal(out, want.ravel())


@pytest.mark.parametrize("bad, lo, hi, returned", [(0, 0, 10, "threads 0-9"), (3, 0, 1, "threads 0"),
                                                    (2, 100, 256, "threads 100-255"), (1, 255, 256, "threads 255")])
def test_early_return_releases_as_the_general_path_does(cpu_kernel, bad, lo, hi, returned):
    """Threads that return before a barrier do not hold it (as on the GPU), on the fast path as on the general
    one; checked mode warns (KernelBarrierWarning)."""
    want = np.tile(np.arange(255, -1, -1, dtype=np.float32), 4)
    want[bad * 256 + lo:bad * 256 + hi] = 0
    for check in (False, True):  # (checked launches never take the fast path)
        out = np.zeros(4 * 256, np.float32)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            cpu_kernel("early", check=check)(4, 256, out, bad, lo, hi)
        assert np.array_equal(out, want)
        msgs = [str(w.message) for w in seen if issubclass(w.category, rtc.KernelBarrierWarning)]
        if check:
            assert len(msgs) == 1 and f"{returned} of block ({bad},0,0) returned before" in msgs[0], msgs
        else:
            assert msgs == []
    out = np.zeros(4 * 256, np.float32)
    cpu_kernel("early", check=False)(4, 256, out, -1, 0, 0)  # the next launch works
    assert np.array_equal(out, np.tile(np.arange(255, -1, -1, dtype=np.float32), 4))


@CHECK
def test_warp_operations_and_barrier_count_between_barriers(cpu_kernel, check):
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, 16 * 256).astype(np.float32)
    counts, sums = np.zeros(16, np.int32), np.zeros(16, np.float32)
    cpu_kernel("count_and_shuffle", check=check)(16, 256, counts, sums, a)
    assert np.array_equal(counts, (a.reshape(16, 256) > 0).sum(axis=1))
    assert np.array_equal(sums, a.reshape(16, 256).sum(axis=1))


@CHECK
def test_two_dimensional_blocks(cpu_kernel, check):
    w, h = 64, 32
    a = np.arange(w * h, dtype=np.float32)
    out = np.zeros_like(a)
    cpu_kernel("transpose", check=check)((w // 16, h // 8), (16, 8), out, a, w, h)
    assert np.array_equal(out, a.reshape(h, w).T.ravel())
