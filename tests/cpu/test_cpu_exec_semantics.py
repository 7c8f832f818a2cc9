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


# ------------------------------------------------------------------ *_sync masks (ROCm's amd_warp_sync_functions.h)
MASKS = r"""
#include <hip/hip_runtime.h>

extern "C" __global__ void full_mask(int* out) {
    int v = __shfl_sync(0xffffffffffffffffull, (int)threadIdx.x, 0);
    unsigned long long b = __ballot_sync(__activemask(), threadIdx.x % 2);
    out[threadIdx.x] = v + 1000 * __popcll(b) + 100000 * __all_sync(~0ull, 1) + 200000 * __any_sync(~0ull, 0);
}

// each half of the wave passes its own mask: disjoint masks that cover the active lanes are correct
extern "C" __global__ void disjoint_masks(int* out) {
    unsigned lane = threadIdx.x % warpSize, half = warpSize / 2;
    unsigned long long m = ((1ull << half) - 1) << (lane < half ? 0 : half);
    out[threadIdx.x] = __shfl_sync(m, (int)threadIdx.x, 0, half) + 1000 * __popcll(__ballot_sync(m, 1));
}

// a full mask under a condition that leaves lanes out: ROCm traps
extern "C" __global__ void mask_names_inactive_lanes(int* out) {
    if (threadIdx.x % warpSize < 16) out[threadIdx.x] = __shfl_sync(~0ull, (int)threadIdx.x, 3);  // MASK-INACTIVE
}

extern "C" __global__ void zero_mask(int* out) {
    out[threadIdx.x] = __shfl_xor_sync(0ull, (int)threadIdx.x, 1);  // MASK-ZERO
}
"""

MASK32 = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void mask32(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0); }
"""

MASK32_CUDA = r"""
extern "C" __global__ void mask32(int* out) {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0) + 1000 * __all_sync(0xffffffffu, 1);
}
"""


def masked(warp: int, cache: str, name: str, **kw):
    return rtc.compile_kernel(MASKS, name, arch="cpu", warp_size=warp, cache_dir=cache, rocm_version="7.0", **kw)


def mask_line(tag: str) -> str:
    return next(f":{i}" for i, line in enumerate(MASKS.splitlines(), 1) if f"// {tag}" in line)


@CHECK
def test_masks_that_name_the_active_lanes_run(cpu_cache, warp, check):
    out = np.zeros(64, np.int32)
    masked(warp, cpu_cache, "full_mask", check=check)((1,), (64,), out)
    base = np.repeat(np.arange(0, 64, warp), warp)
    np.testing.assert_array_equal(out, base + 1000 * (warp // 2) + 100000)
    out = np.zeros(64, np.int32)
    masked(warp, cpu_cache, "disjoint_masks", check=check)((1,), (64,), out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(0, 64, warp // 2), warp // 2) + 1000 * (warp // 2))


@pytest.mark.parametrize("name, tag, what", [
    ("mask_names_inactive_lanes", "MASK-INACTIVE", "but the lanes that pass it there are 0xffff"),
    ("zero_mask", "MASK-ZERO", "passes mask 0 ("),
])
def test_checked_mode_reports_what_rocm_traps_on(cpu_cache, warp, name, tag, what):
    with pytest.raises(rtc.KernelWarpError) as info:
        masked(warp, cpu_cache, name)((1,), (64,), np.zeros(64, np.int32))
    msg = str(info.value)
    assert mask_line(tag) in msg and what in msg and "_sync" in msg


@pytest.mark.parametrize("how", ["unchecked", "NDEBUG"])
def test_no_report_unchecked_or_under_ndebug(cpu_cache, warp, how):
    kw = {"check": False} if how == "unchecked" else {"options": ["-DNDEBUG"]}
    out = np.full(64, -1, np.int32)
    masked(warp, cpu_cache, "mask_names_inactive_lanes", **kw)((1,), (64,), out)
    lanes = np.arange(64) % warp < 16
    np.testing.assert_array_equal(out[lanes], np.repeat(np.arange(0, 64, warp), 16) + 3)


def test_a_32_bit_mask_is_a_compile_error_in_hip_as_on_rocm(cpu_cache, warp):
    with pytest.raises(rtc.KernelCompileError, match="The mask must be a 64-bit integer") as info:
        rtc.compile_kernel(MASK32, "mask32", arch="cpu", warp_size=warp, rocm_version="6.4", cache_dir=cpu_cache)
    assert "stands for ROCm 6.4.0, whose *_sync functions take a 64-bit mask" in str(info.value)
    assert "gpuenv_cpu_rocm_version" in str(info.value)
    if warp == 32:  # the newest clr takes a 32-bit mask on gfx1250
        out = np.zeros(32, np.int32)
        rtc.compile_kernel(MASK32, "mask32", arch="cpu", target="gfx1250", rocm_version="7.0",
                           cache_dir=cpu_cache)((1,), (32,), out)
        np.testing.assert_array_equal(out, 0)


@CHECK
def test_the_cuda_dialect_keeps_cudas_32_bit_mask(cpu_cache, warp, check):
    out = np.zeros(64, np.int32)
    rtc.compile_kernel(MASK32_CUDA, "mask32", arch="cpu", warp_size=warp, check=check, dialect="cuda",
                       rocm_version="7.0", cache_dir=cpu_cache)((1,), (64,), out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(0, 64, warp), warp) + 1000)
