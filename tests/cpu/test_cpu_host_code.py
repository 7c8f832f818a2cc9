"""A kernel file whole, host code included (tests/data/cpu_kernels/host_code.hip): the CPU executor's build declares
HIP's host runtime API (hipMalloc, hipMemcpy, hipError_t, hipEvent_t, hipPitchedPtr, ...) and rewrites host-code
``<<<...>>>`` launches, so that the file compiles as hipcc compiles it; it runs the file's kernels, never its host
code: a host function called anyway stops the launch, naming it."""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS  # noqa: E402

from pytest_gpuenv.rtc._cpu_rewrite import host_launches  # noqa: E402
from pytest_gpuenv.runtime.cpu.errors import KernelAssertError  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "host_code.hip")


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_the_kernels_of_a_whole_file_run(cpu_kernel, check):
    out = np.zeros(300, np.int32)
    cpu_kernel("fill", check=check)(2, 256, out, 300)
    assert out.tolist() == list(range(300))
    x = np.arange(300, dtype=np.float32)
    y = np.zeros(300, np.float32)
    cpu_kernel("scale<float, 2>", check=check)(2, 256, y, x, np.float32(2), 300)
    assert (y == 2 * x + 2).all()


#: a kernel that calls host code (hipcc refuses it; the executor compiles it, and the call stops the launch)
CALLS_HOST = """#include <hip/hip_runtime.h>
__global__ void calls_host(int* out) { out[threadIdx.x] = (int)hipDeviceSynchronize(); }
"""


def test_host_code_called_from_a_kernel_stops_the_launch(cpu_kernel):
    with pytest.raises(KernelAssertError, match="hipDeviceSynchronize: HIP host code, which the CPU executor never runs"):
        cpu_kernel("calls_host", CALLS_HOST)(1, 1, np.zeros(1, np.int32))


def test_launches_are_rewritten_outside_comments_and_strings_with_lines_kept():
    src = ('k<T, 2><<<g, b, 0, s>>>(x, f(y));  // k<<<1, 1>>>(z)\n'
           'const char* t = "k<<<1, 1>>>(z)";\n'
           'ns::k2<<<dim3(1,\n 2), 64>>>\n  (a);\n'
           'hipLaunchKernelGGL(k, 1, 1, 0, 0, a);\n')
    out = host_launches(src)
    assert out.count("\n") == src.count("\n")
    assert out.splitlines() == [
        '(::__gpuenv_host::launch(g, b, 0, s), k<T, 2>(x, f(y)));  // k<<<1, 1>>>(z)',
        'const char* t = "k<<<1, 1>>>(z)";',
        '(::__gpuenv_host::launch(dim3(1,',
        ' 2), 64), ns::k2',
        '  (a));',
        'hipLaunchKernelGGL(k, 1, 1, 0, 0, a);']
