"""Kernels run as the GPU runs them, at warpSize 64 and 32, checked and unchecked: a barrier that threads which
returned never reach releases the others (a ``KernelBarrierWarning`` in checked mode); dynamic shared memory
declared at namespace scope; ``*_sync`` masks as ROCm's amd_warp_sync_functions.h takes and checks them."""

from __future__ import annotations

import shutil
import warnings

import pytest

np = pytest.importorskip("numpy")

from _cpu_exec_fixtures import CHECK  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")

SOURCE = r"""
#include <hip/hip_runtime.h>

// the shape of HeCBench bsearch's kernel_BS4: the last, partial block returns before the barrier
extern "C" __global__ void guarded_then_barrier(const int* in, int* out, int n) {
    __shared__ int buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    buf[threadIdx.x] = in[i] * 2;
    __syncthreads();  // BARRIER-AFTER-RETURN
    int j = threadIdx.x ^ 1;
    out[i] = blockIdx.x * blockDim.x + j < n ? buf[j] : -1;
}

// live threads at two different barriers: a real divergence, reported whatever returned
extern "C" __global__ void divergent_after_return(int* out, int n) {
    int i = threadIdx.x;
    if (i >= n) return;
    if (i < 8) __syncthreads();  // DIVERGENT-A
    else __syncthreads();  // DIVERGENT-B
    out[i] = i;
}

// __syncthreads_count counts the threads that reach it
extern "C" __global__ void count_after_return(int* out, int n) {
    if ((int)threadIdx.x >= n) return;
    int c = __syncthreads_count(threadIdx.x % 2 == 0);
    out[threadIdx.x] = c;
}

// dynamic shared memory declared at namespace scope, as amd_device_functions.h's HIP_DYNAMIC_SHARED allows
extern __shared__ float file_scope_dyn[];
namespace ns {
HIP_DYNAMIC_SHARED(int, file_scope_macro)
}

extern "C" __global__ void reverse_file_scope(float* out) {
    file_scope_dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = file_scope_dyn[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void reverse_file_scope_macro(int* out) {
    ns::file_scope_macro[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = ns::file_scope_macro[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void dyn_shared_at(float* out, int off) {
    HIP_DYNAMIC_SHARED(float, tile)
    tile[(int)threadIdx.x + off] = 1.0f;  // DYN-OOB
    out[threadIdx.x] = 0.0f;
}
"""


def line_of(tag: str) -> str:
    for i, line in enumerate(SOURCE.splitlines(), 1):
        if f"// {tag}" in line:
            return f":{i}"
    raise AssertionError(tag)


def build(warp: int, cache: str, name: str, **kw):
    return rtc.compile_kernel(SOURCE, name, arch="cpu", warp_size=warp, cache_dir=cache, **kw)


# ------------------------------------------------------------------ barriers after threads that returned
@CHECK
@pytest.mark.parametrize("n", [100, 64, 1])
def test_a_barrier_releases_without_the_threads_that_returned(cpu_cache, warp, check, n):
    """AMD GPUs do not wait for wavefronts that ended; NVIDIA GPUs since Volta count exited threads as arrived."""
    x = np.arange(n, dtype=np.int32)
    out = np.full(n, -7, np.int32)
    k = build(warp, cpu_cache, "guarded_then_barrier", check=check)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        k(((n + 63) // 64,), (64,), x, out, n)
    j = np.arange(n) ^ 1
    np.testing.assert_array_equal(out, np.where(j < n, 2 * j, -1))
    barrier = [w for w in seen if issubclass(w.category, rtc.KernelBarrierWarning)]
    if check and n % 64:
        assert len(barrier) == 1
        msg = str(barrier[0].message)
        assert line_of("BARRIER-AFTER-RETURN") in msg and f"block ({n // 64},0,0)" in msg
        assert f"threads {n % 64}-63" in msg and "returned before the __syncthreads()" in msg
        assert issubclass(rtc.KernelBarrierWarning, UserWarning)
    else:
        assert barrier == []


def test_the_warning_is_an_error_under_w_error(cpu_cache, warp):
    k = build(warp, cpu_cache, "guarded_then_barrier")
    with warnings.catch_warnings():
        warnings.simplefilter("error", rtc.KernelBarrierWarning)
        with pytest.raises(rtc.KernelBarrierWarning):
            k((2,), (64,), np.arange(100, dtype=np.int32), np.zeros(100, np.int32), 100)


@CHECK
def test_syncthreads_count_counts_the_threads_that_reach_it(cpu_cache, warp, check):
    out = np.full(64, -1, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rtc.KernelBarrierWarning)
        build(warp, cpu_cache, "count_after_return", check=check)((1,), (64,), out, 40)
    np.testing.assert_array_equal(out[:40], 20)
    np.testing.assert_array_equal(out[40:], -1)


@CHECK
def test_live_threads_at_different_barriers_are_still_reported(cpu_cache, warp, check):
    with pytest.raises(rtc.KernelBarrierError) as info:
        build(warp, cpu_cache, "divergent_after_return", check=check)((1,), (64,), np.zeros(64, np.int32), 40)
    msg = str(info.value)
    assert line_of("DIVERGENT-A") in msg and line_of("DIVERGENT-B") in msg
    assert "different barriers" in msg and "threads 40-63 already returned" in msg


# ------------------------------------------------------------------ dynamic shared memory at namespace scope
@CHECK
@pytest.mark.parametrize("name, dtype", [("reverse_file_scope", np.float32), ("reverse_file_scope_macro", np.int32)])
def test_dynamic_shared_memory_at_namespace_scope(cpu_cache, warp, check, name, dtype):
    out = np.zeros(96, dtype)
    build(warp, cpu_cache, name, check=check)((1,), (96,), out, shared_mem=96 * 4)
    np.testing.assert_array_equal(out, np.arange(95, -1, -1).astype(dtype))


@pytest.mark.parametrize("off, element", [(-1, -1), (64, 64), (20000, 20000)])
def test_an_out_of_bounds_dynamic_shared_access_names_the_dynamic_shared_memory(cpu_cache, warp, off, element):
    with pytest.raises(rtc.KernelBoundsError) as info:
        build(warp, cpu_cache, "dyn_shared_at")((1,), (64,), np.zeros(64, np.float32), off, shared_mem=256)
    msg = str(info.value)
    assert line_of("DYN-OOB") in msg
    assert "dynamic shared memory (" in msg and "'tile'" in msg and f"element {element} " in msg
    assert "argument" not in msg
