"""An access past a static ``__shared__`` array made through a pointer is reported on that array, by the first lane
that makes it, in lockstep mode too (HeCBench bscan at wave64: ``warp_scan`` writes ``sdata[64..127]`` of
``__shared__ int sdata[64]`` through a ``volatile int*``; lockstep mode let the wave's later lanes run first and
blamed lane 24's write, past the red zones, on a kernel argument)."""

from __future__ import annotations

import shutil

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv.rtc import KernelBoundsError  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = """#include <hip/hip_runtime.h>
__device__ void scan(volatile int* s, int past) { s[threadIdx.x + past] = 1; }
__global__ void over(int* out, const int* in, int past) {
    __shared__ int sdata[64];
    sdata[threadIdx.x % 64] = in[threadIdx.x];
    scan(sdata, past);
    out[threadIdx.x] = sdata[threadIdx.x % 64];
}
"""


@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "free"])
@pytest.mark.parametrize("past", [64, 100])
def test_a_write_past_a_shared_array_is_reported_on_it_by_lane_0(cpu_kernel, warp, lockstep, past):
    k = cpu_kernel("over", SOURCE, lockstep=lockstep)
    with pytest.raises(KernelBoundsError) as info:
        k(1, warp, np.zeros(warp, np.int32), np.ones(warp, np.int32), past)
    text = str(info.value)
    assert "thread (0,0,0)" in text and f"__shared__ variable 'sdata' element {past}" in text, text
