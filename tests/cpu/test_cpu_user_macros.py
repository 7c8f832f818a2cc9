"""A kernel file's own macros never reach the executor's code: every name in what the build appends (name-expression
markers, the dispatch over a module's kernels, the entry point) and in the executor's macros that expand in the
file is reserved (``__gpuenv_...``, ``_Gpuenv_...``, attributes spelled ``__used__``). HeCBench romberg defines
``A`` and ``B``, which once broke the generated marker template."""

from __future__ import annotations

import shutil

import pytest

np = pytest.importorskip("numpy")

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
#: plain names the executor's generated code used once (template parameters, members, helpers, attributes)
NAMES = ("A", "B", "D", "F", "I", "L", "N", "S", "T", "U", "V", "M", "f", "a", "v", "n", "s", "type", "call", "args",
         "next_inline", "lo", "hi", "used", "unused", "aligned", "section", "visibility", "no_sanitize",
         "always_inline", "noinline", "may_alias")
SOURCE = "#include <hip/hip_runtime.h>\n" + "".join(f"#define {n} 0\n" for n in NAMES) + """
extern __shared__ float dyn_file[];
__device__ float table[4] = {1, 2, 3, 4};
template <typename X, int K> __global__ void scale(X* out) {
    extern __shared__ float dyn[];
    __shared__ float tile[64];
    tile[threadIdx.x] = table[threadIdx.x % 4];
    dyn[threadIdx.x] = K;
    __syncthreads();
    out[threadIdx.x] = (X)(tile[threadIdx.x] * dyn[threadIdx.x] + dyn_file[threadIdx.x] * 0);
}
__global__ void plain(int* out) { out[threadIdx.x] = threadIdx.x; }
"""


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_a_files_macros_do_not_reach_the_executors_code(cpu_kernel, check):
    out = np.zeros(64, np.float32)
    cpu_kernel("scale<float, 2>", SOURCE, check=check)(1, 64, out, shared_mem=256)
    assert out.tolist() == [2.0 * (1 + i % 4) for i in range(64)]


def test_in_a_module_of_several_kernels(cpu_cache, warp):
    from pytest_gpuenv.rtc import compile_module

    m = compile_module(SOURCE, names=["scale<float, 3>", "plain"], arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    out = np.zeros(64, np.int32)
    m.kernel("plain")(1, 64, out)
    assert out.tolist() == list(range(64))
