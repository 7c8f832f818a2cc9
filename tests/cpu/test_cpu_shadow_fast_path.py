"""Checked mode's fast path for a shared-memory access that finds nothing to report (checks.cpp: quick_access)
leaves every finding to the general path: a write after many reads at one site (the reads the fast path
skipped) is a race naming the last read's line; an int whose bytes have different histories (one written, three
not) is an uninitialised read; a thread's read of its own write passes, of another thread's is a race. At
warpSize 64 and 32."""

from __future__ import annotations

import shutil

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")

SOURCE = """#include <hip/hip_runtime.h>

extern "C" __global__ void many_reads_then_write(int* out) {
    __shared__ int s[2];
    if (threadIdx.x == 0) s[0] = 7;
    __syncthreads();
    out[threadIdx.x] = s[0];  // READ: every thread, one site
    if (threadIdx.x == 200) s[0] = 1;  // WRITE: no barrier since the reads
}

extern "C" __global__ void partly_written(int* out) {
    __shared__ int s[1];
    if (threadIdx.x == 0) ((volatile char*)s)[0] = 1;  // one byte of four
    __syncthreads();
    if (threadIdx.x == 1) out[0] = s[0];  // PARTLY
}

extern "C" __global__ void own_write_then_neighbour(int* out) {
    __shared__ int s[256];
    s[threadIdx.x] = threadIdx.x;
    int own = s[threadIdx.x];  // its own write: no race
    out[threadIdx.x] = own + s[(threadIdx.x + 255) % 256];  // NEIGHBOUR: no barrier before it
}
"""


def line_of(tag: str) -> str:
    for i, line in enumerate(SOURCE.splitlines(), 1):
        if f"// {tag}" in line:
            return f":{i}"
    raise AssertionError(tag)


def test_a_write_after_reads_the_fast_path_skipped_is_a_race(cpu_kernel, warp):
    with pytest.raises(rtc.KernelRaceError) as info:
        cpu_kernel("many_reads_then_write")(1, 256, np.zeros(256, np.int32))
    msg = str(info.value)
    assert "'s' element 0" in msg and "several other threads" in msg
    assert line_of("WRITE") in msg and line_of("READ") in msg


def test_a_partly_written_int_is_an_uninitialised_read(cpu_kernel, warp):
    with pytest.raises(rtc.KernelUninitializedError) as info:
        cpu_kernel("partly_written")(1, 64, np.zeros(1, np.int32))
    assert line_of("PARTLY") in str(info.value) and "'s' element 0" in str(info.value)


def test_own_write_passes_a_neighbours_is_a_race(cpu_kernel, warp):
    with pytest.raises(rtc.KernelRaceError) as info:
        cpu_kernel("own_write_then_neighbour")(1, 256, np.zeros(256, np.int32))
    msg = str(info.value)
    assert f"'s' element {warp - 1}" in msg and line_of("NEIGHBOUR") in msg
