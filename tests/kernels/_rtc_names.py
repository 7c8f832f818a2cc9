"""The sources and markers the test_rtc_names_* modules share (and tests/kernels/test_gpu_names.py, which launches
them on a GPU).
"""

from __future__ import annotations

import ctypes
import shutil

import pytest

from pytest_gpuenv.rtc import compilers as _compilers

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                               reason="no C++ compiler")


# the vector types come from the executor's or HIP's headers; this source brings its own (in a namespace,
# so it builds whatever those headers define) to test the packing on the CPU executor
SOURCE = b"""\
// Copyright \xa9 2026 -- a licence comment in Latin-1, as HIP-Examples' Histogram has
#include <hip/hip_runtime.h>
typedef unsigned int uint;
struct Params { float a; int b; double c; };
namespace v { template <class T, unsigned N> struct alignas(N == 3 ? sizeof(T) : N * sizeof(T)) HIP_vector_type { T d[N]; };
              using float4 = HIP_vector_type<float, 4>; using float3 = HIP_vector_type<float, 3>; }
__constant__ float coeffs[4];
namespace ns { __device__ int counter = 7; }

template <int S>
__global__ void apply(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * coeffs[i % 4] * S;
    if (i == 0) ns::counter += 1;
}
template <typename T, unsigned B>
__global__ void addb(T* out, const T* in, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + T(B);
}
namespace ns {
__global__ void scale(float* x, float s, uint n) {
    uint i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
}
extern "C" __global__ void bump(int* seen) {
    if (threadIdx.x == 0) { seen[0] = ns::counter; ns::counter *= 10; }
}
__global__ void byval(float* out, v::float4 a, Params p, v::float3 w, uint u) {
    if (threadIdx.x == 0) { out[0] = a.d[0] + a.d[3]; out[1] = p.a + p.b + (float)p.c; out[2] = w.d[2]; out[3] = (float)u; }
}
__global__ void vec_ptr(v::float4* x) { x[threadIdx.x].d[3] = x[threadIdx.x].d[0]; }
"""

#: the same for the GPU compilers, with HIP's own vector types (on NVIDIA: CUDA's float4, float3)
GPU_SOURCE = (SOURCE.replace(b"v::float", b"float")
              .replace(b"x[threadIdx.x].d[3] = x[threadIdx.x].d[0]", b"x[threadIdx.x].w = x[threadIdx.x].x")
              .replace(b"a.d[0] + a.d[3]", b"a.x + a.w").replace(b"w.d[2]", b"w.z"))


class P(ctypes.Structure):
    _fields_ = [("a", ctypes.c_float), ("b", ctypes.c_int), ("c", ctypes.c_double)]


ENUMS = """#include <hip/hip_runtime.h>
enum class Mode : short { a, b, c };
enum Plain { P0, P1 };
template <int N> __global__ void k(int* out, Mode m, Plain p) { out[threadIdx.x] = N * 100 + (int)m * 10 + (int)p; }
"""


def _needs(name: str, arch: str):
    c = _compilers.get(name)
    if not c.available():
        return pytest.mark.skipif(True, reason=f"requires {c.looked_for}: not installed here")
    return pytest.mark.skipif(not c.supports(arch, cache_dir=None), reason=f"{c.name} cannot build {arch}")


MODULE_TEST = """\
import ctypes, torch
OPTS = {}

class P(ctypes.Structure):
    _fields_ = [("a", ctypes.c_float), ("b", ctypes.c_int), ("c", ctypes.c_double)]

def test_module(hip_kernel, torch_device):
    m = hip_kernel("names.hip", names=["apply<2>", "bump", "byval"], **OPTS)
    coeffs = m.get_global("coeffs")  # a numpy array on the CPU executor, a torch tensor on a GPU
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0]):
        coeffs[i] = v
    out = torch.zeros(8, device=torch_device)
    m.kernel("apply<2>")(1, 64, out, torch.ones(8, device=torch_device), 8)
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0] * 2
    seen = torch.zeros(1, dtype=torch.int32, device=torch_device)
    m.kernel("bump")(1, 64, seen)
    assert seen.tolist() == [8] and m.get_global("ns::counter").tolist() == [80]
    m.kernel("byval")(1, 64, out, (1, 2, 3, 4), P(1.5, 2, 3.25), (7, 8, 9), 11)
    assert out[:4].tolist() == [5.0, 6.75, 9.0, 11.0]

def test_template_kernel(hip_kernel, torch_device):
    k = hip_kernel("names.hip", "addb<float, 256>", **OPTS)
    x = torch.arange(100, dtype=torch.float32, device=torch_device)
    out = torch.zeros_like(x)
    k(1, 128, out, x, x.numel())
    assert torch.equal(out, x + 256)
"""
