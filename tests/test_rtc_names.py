"""Kernels named as C++ names them (name expressions), modules with globals, by-value vectors and structs.

The CPU executor compiles and launches here (both wavefront widths, results against numpy); hiprtc,
hipcc, NVRTC and nvcc compile and lower here (Debian's ROCm has no device, this machine no NVIDIA GPU:
their launches are in tests/test_gpu_names.py, run on a GPU by scripts/gpu-check.sh). Each compiler's
tests skip, naming it, where it is not installed.
"""

from __future__ import annotations

import ctypes
import os
import shutil

import numpy as np
import pytest

from pytest_gpuenv.rtc import KernelCompileError, Module, Param, _compilers, compile_kernel, compile_module
from pytest_gpuenv.rtc._args import pack_args
from pytest_gpuenv.rtc._cpu_kernel import pack_host_args
from pytest_gpuenv.rtc._names import _marker, check_expr, param_of
from pytest_gpuenv.rtc._source import load_source, vector_type

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


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("src") / "names.hip"
    p.write_bytes(SOURCE)
    return str(p)


# ------------------------------------------------------------------------------------------ pure Python
def test_latin1_source_is_read_as_bytes(path):
    src = load_source(path)
    assert src.data == SOURCE and "apply" in src.text


@pytest.mark.parametrize("bad", ["k; system(0)", "a{", "k<3", "", "k // c", '"k"'])
def test_bad_name_expressions_are_refused(bad):
    with pytest.raises(KernelCompileError, match="is not a kernel name"):
        check_expr(bad)


def test_marker_parse_and_demangled_types():
    d = ("void __gpuenv_lower<1, &(void reduce<float, 256u>(float*, float const*, unsigned long, HIP_vector_type<float, "
         "4u>, Params)), __gpuenv_sig<void (float*, float const*, unsigned long, HIP_vector_type<float, 4u>, Params), "
         "8ull, 8ull, 8ull, 16ull, 16ull, 8ull, 8ull, 8ull, 16ull, 8ull> >()")
    idx, fn, types, nums = _marker(d)
    assert (idx, fn) == (1, "void reduce<float, 256u>(float*, float const*, unsigned long, HIP_vector_type<float, 4u>, Params)")
    assert types == ["float*", "float const*", "unsigned long", "HIP_vector_type<float, 4u>", "Params"]
    assert nums == [8, 8, 8, 16, 16, 8, 8, 8, 16, 8]
    assert param_of("Mode", "m", 2, 2, enum=True).code == "h"  # an enum by value packs as an integer of its size
    assert _marker(d + " [clone .kd]") is None
    p = param_of("float const*", "in", 8, 8)
    assert (p.type, p.pointer, p.decl, p.code) == ("float", True, "const float* in", "P")
    p = param_of("HIP_vector_type<unsigned char, 4u>", "c", 4, 4)
    assert (p.decl, p.vector) == ("uchar4 c", ("B", 4))
    assert vector_type("float4") == ("f", 4) and vector_type("ulonglong2") == ("Q", 2) and vector_type("Params") is None


VEC4 = Param("v", "HIP_vector_type<float, 4u>", False, "float4 v", 16, 16)
VEC3 = Param("w", "HIP_vector_type<float, 3u>", False, "float3 w", 12, 4)
STRUCT = Param("p", "Params", False, "Params p", 16, 8)
UINT = param_of("unsigned int", "n", 4, 4)


def test_by_value_vectors_structs_and_typedefs_pack():
    packed = pack_args("k", [VEC4, VEC3, STRUCT, UINT], [(1, 2, 3, 4.5), [7, 8, 9], P(1.5, 2, 3.25), 5])
    v, w, s, n = packed.values
    assert (ctypes.sizeof(v), ctypes.sizeof(w), ctypes.sizeof(s), ctypes.sizeof(n)) == (16, 12, 16, 4)
    assert ctypes.addressof(v) % 16 == 0 and ctypes.addressof(s) % 8 == 0
    assert (ctypes.alignment(v), ctypes.alignment(w)) == (16, 4)  # the type says it too, for a copy elsewhere
    assert list(v.v) == [1.0, 2.0, 3.0, 4.5] and list(w.v) == [7.0, 8.0, 9.0]
    assert (s.a, s.b, s.c, n.value) == (1.5, 2, 3.25, 5) and isinstance(s, P)
    cpu_values, regions = pack_host_args("k", [VEC4, STRUCT], [(0, 0, 0, 1), P()])
    assert bytes(cpu_values.values[0])[12:] == np.float32(1).tobytes() and regions == []


@pytest.mark.parametrize("param, value, message", [
    (VEC4, (1, 2, 3), r"argument 'v' \(float4 v\) is a float4 by value: pass a tuple of 4 numbers, got 3 numbers"),
    (VEC4, 1.0, r"argument 'v' \(float4 v\) is a .* by value: pass a tuple of 4 numbers, got float"),
    (VEC4, (1, 2, 3, "x"), r"argument 'v' \(float4 v\) expects a number, got str"),
    (Param("c", "HIP_vector_type<unsigned char, 4u>", False, "uchar4 c", 4, 4), (1, 2, 3, 256),
     r"argument 'c' \(uchar4 c\): 256 does not fit"),
    (STRUCT, (1, 2), r"argument 'p' \(Params p\) is a Params by value \(16 bytes\): pass a ctypes.Structure of that size, got tuple"),
    (STRUCT, ctypes.c_int * 2, r"argument 'p' \(Params p\) is a Params of 16 bytes by value, got a ctypes c_int_Array_2 of 8 bytes"),
    (UINT, -1, r"argument 'n' \(unsigned int n\): -1 does not fit unsigned int"),
])
def test_by_value_mismatch_is_a_type_error_naming_the_argument(param, value, message):
    if isinstance(value, type):
        value = value()
    with pytest.raises(TypeError, match=message):
        pack_args("k", [param], [value])
    with pytest.raises(TypeError, match=message):
        pack_host_args("k", [param], [value])


def test_pointer_to_vector_takes_scalar_arrays_in_whole_vectors():
    p = Param("x", "HIP_vector_type<float, 4u>", True, "float4* x", 8, 8)
    _, regions = pack_host_args("k", [p], [np.zeros(8, np.float32)])
    assert regions[0][1] == 32
    with pytest.raises(TypeError, match=r"argument 'x' \(float4\* x\) points to float4 \(4 scalars each\): an array of shape \(6,\) has 6 "
                       r"scalars, not a whole number of float4"):
        pack_host_args("k", [p], [np.zeros(6, np.float32)])
    with pytest.raises(TypeError, match=r"argument 'x' \(float4\* x\) expects .* elements, got an array of typestr '<f8'"):
        pack_host_args("k", [p], [np.zeros(8, np.float64)])


# ------------------------------------------------------------------------------------------ CPU executor
@needs_cxx
def test_cpu_template_and_namespace_kernels_against_numpy(path, cpu_cache, warp):
    a = np.arange(300, dtype=np.float32)
    k = compile_kernel(path, "addb<float, 256>", arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    assert k.name == "addb<float, 256>" and k.lowered_name == "_Z4addbIfLj256EEvPT_PKS0_m"
    assert [p.decl for p in k.params] == ["float* out", "const float* in", "unsigned long n"]
    out = np.zeros_like(a)
    k(3, 128, out, a, a.size)
    np.testing.assert_array_equal(out, a + 256)
    s = compile_kernel(path, "ns::scale", arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    assert [p.decl for p in s.params] == ["float* x", "float s", "unsigned int n"]  # uint resolved
    s(3, 128, out, 0.5, a.size)
    np.testing.assert_array_equal(out, (a + 256) * 0.5)


ENUMS = """#include <hip/hip_runtime.h>
enum class Mode : short { a, b, c };
enum Plain { P0, P1 };
template <int N> __global__ void k(int* out, Mode m, Plain p) { out[threadIdx.x] = N * 100 + (int)m * 10 + (int)p; }
"""


@needs_cxx
def test_cpu_enum_parameters_take_ints_of_their_size(cpu_cache, warp):
    """An enum by value (hip-tests' ``enum class TiledGroupShflTests``) is an integer of its size: the marker
    carries ``__is_enum`` beside sizeof/alignof; the declaration keeps the enum's name."""
    k = compile_kernel(ENUMS, "k<3>", arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    assert [(p.decl, p.type) for p in k.params] == [("int* out", "int"), ("Mode m", "int16_t"), ("Plain p", "int32_t")]
    out = np.zeros(4, np.int32)
    k(1, 4, out, 2, 1)
    np.testing.assert_array_equal(out, 321)
    with pytest.raises(TypeError, match="'m'"):
        k(1, 4, out, 1 << 20, 1)


@needs_cxx
def test_cpu_module_globals_round_trip(path, cpu_cache, warp):
    m = compile_module(path, ["apply<2>", "bump", "byval", "vec_ptr"], arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    assert isinstance(m, Module) and m.names == ["apply<2>", "bump", "byval", "vec_ptr"]
    coeffs, counter = m.get_global("coeffs"), m.get_global("ns::counter")
    assert coeffs.dtype == np.float32 and coeffs.shape == (4,) and counter.tolist() == [7]  # initial value
    coeffs[:] = [1, 2, 3, 4]
    a = np.ones(256, np.float32)
    out = np.zeros_like(a)
    m.kernel("apply<2>")(2, 128, out, a, a.size)
    np.testing.assert_array_equal(out, np.tile(np.float32([2, 4, 6, 8]), 64))
    assert counter.tolist() == [8]  # the kernel's write, read back
    seen = np.zeros(1, np.int32)
    counter[0] = 3
    m.kernel("bump")(1, 64, seen)  # the host's write, seen by another kernel of the module
    assert seen.tolist() == [3] and counter.tolist() == [30] and m.get_global("ns::counter") is counter
    out[:] = 0
    m.kernel("byval")(1, 64, out, (1, 2, 3, 4), P(1.5, 2, 3.25), (7, 8, 9), 11)
    assert out[:4].tolist() == [5.0, 6.75, 9.0, 11.0]
    x = np.arange(16, dtype=np.float32)
    m.kernel("vec_ptr")(1, 4, x)
    assert x.reshape(4, 4)[:, 3].tolist() == [0, 4, 8, 12]
    with pytest.raises(KeyError, match=r"no __constant__ or __device__ variable 'nope' in this module \(variables there: .*coeffs"):
        m.get_global("nope")
    with pytest.raises(KeyError, match=r"kernel 'addb<int, 1>' is not in this module"):
        m.kernel("addb<int, 1>")


@needs_cxx
def test_cpu_bad_instantiation_names_the_expression(path, cpu_cache):
    with pytest.raises(KernelCompileError, match=r"name expression 'apply<float>' does not name one kernel instantiation "
                       r"\(apply<int S> declared at line 11\)"):
        compile_kernel(path, "apply<float>", arch="cpu", warp_size=64, cache_dir=cpu_cache)
    with pytest.raises(KernelCompileError, match=r"name expression 'apply' does not name one kernel instantiation"):
        compile_kernel(path, "apply", arch="cpu", warp_size=64, cache_dir=cpu_cache)  # a template needs its arguments
    with pytest.raises(KernelCompileError, match=r"kernel 'transpose<16>' not found in .*names.hip \(__global__ kernels "
                       r"there: addb<typename T, unsigned B> declared at line 17, apply<int S> declared at line 11, bump,"):
        compile_kernel(path, "transpose<16>", arch="cpu", warp_size=64, cache_dir=cpu_cache)


# ------------------------------------------------------------------------------------------ GPU compilers
def _needs(name: str, arch: str):
    c = _compilers.get(name)
    if not c.available():
        return pytest.mark.skipif(True, reason=f"requires {c.looked_for}: not installed here")
    return pytest.mark.skipif(not c.supports(arch, cache_dir=None), reason=f"{c.name} cannot build {arch}")


@pytest.mark.parametrize("compiler, arch", [
    pytest.param("hiprtc", "gfx90a", marks=_needs("hiprtc", "gfx90a")),
    pytest.param("hipcc", "gfx90a", marks=_needs("hipcc", "gfx90a")),
    pytest.param("nvrtc", "sm_90", marks=_needs("nvrtc", "sm_90")),
    pytest.param("nvcc", "sm_90", marks=_needs("nvcc", "sm_90")),
])
def test_gpu_compilers_lower_name_expressions_and_find_globals(tmp_path, compiler, arch):
    src = tmp_path / "g.hip"
    src.write_bytes(GPU_SOURCE)
    m = compile_module(str(src), ["apply<2>", "addb<float, 256>", "ns::scale", "bump", "byval", "vec_ptr"], arch=arch,
                       compiler=compiler, cache_dir=str(tmp_path / "cache"))
    lowered = {n: m.kernel(n).lowered_name for n in m.names}
    assert lowered == {"apply<2>": "_Z5applyILi2EEvPfPKfi", "addb<float, 256>": "_Z4addbIfLj256EEvPT_PKS0_m",
                       "ns::scale": "_ZN2ns5scaleEPffj", "bump": "bump", "byval": lowered["byval"],
                       "vec_ptr": lowered["vec_ptr"]}
    assert lowered["byval"].startswith("_Z5byvalPf") and lowered["vec_ptr"].startswith("_Z7vec_ptrP")
    by = m.kernel("byval").params
    assert [(p.decl, p.size, p.align) for p in by] == [
        ("float* out", 8, 8), ("float4 a", 16, 16), ("Params p", 16, 8), ("float3 w", 12, 4), ("unsigned int u", 4, 4)]
    assert m.kernel("vec_ptr").params[0].vector == ("f", 4)
    e = compile_kernel(ENUMS, "k<3>", arch=arch, compiler=compiler, cache_dir=str(tmp_path / "cache"))
    assert [p.type for p in e.params] == ["int", "int16_t", "int32_t"]
    assert m._symbol("coeffs") == ("coeffs", 16) and m._symbol("ns::counter") == ("_ZN2ns7counterE", 4)
    with pytest.raises(KernelCompileError, match=r"name expression 'apply<float>' does not name one kernel instantiation"):
        compile_kernel(str(src), "apply<float>", arch=arch, compiler=compiler, cache_dir=str(tmp_path / "cache"))


# ------------------------------------------------------------------------------------------ the fixture
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


@needs_cxx
def test_hip_kernel_names_returns_a_module_on_the_cpu_executor(pytester, tmp_path_factory, monkeypatch):
    pytest.importorskip("torch")
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "names.hip").write_bytes(SOURCE)
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("PYTHONPATH", repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_names=MODULE_TEST)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-p", "no:gpuenv", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_module?wave64-cpu? PASSED*", "*test_module?wave32-cpu? PASSED*"])


# ------------------------------------------------------------------------------------------ ROCm stand-in
@_needs("hiprtc", "gfx90a")
def test_hip_module_loads_once_and_looks_up_lowered_names(tmp_path, monkeypatch):
    """No AMD GPU here: hip-python's module calls answered by a stand-in over the real code object's
    symbols. clr hipamd/src/hip_module.cpp: hipModuleGetFunction and hipModuleGetGlobal answer
    hipErrorNotFound for a name the loaded code object does not define."""
    pytest.importorskip("hip", reason="requires hip-python")
    from _hip_standin import HipStandin

    from pytest_gpuenv import runtime
    from pytest_gpuenv.rtc import _symbols
    from pytest_gpuenv.runtime.hip import HipRuntime

    src = tmp_path / "g.hip"
    src.write_bytes(GPU_SOURCE)
    m = compile_module(str(src), ["apply<2>", "addb<float, 256>", "bump"], arch="gfx90a", compiler="hiprtc",
                       cache_dir=str(tmp_path / "cache"))
    syms = {s.name: s for s in _symbols.symbols(m.binary)}

    class Standin(HipStandin):
        def hipModuleLoadData(self, image):
            self.calls.append("hipModuleLoadData")
            return (self._err("hipSuccess"), "module")

        def hipModuleGetFunction(self, module, name):
            self.calls.append(f"hipModuleGetFunction({name.decode()})")
            found = name.decode() in syms
            return (self._err("hipSuccess" if found else "hipErrorNotFound"), f"fn:{name.decode()}" if found else None)

        def hipModuleGetGlobal(self, module, name):
            s = syms.get(name.decode())
            return (self._err("hipSuccess"), 0x1000, s.size) if s else (self._err("hipErrorNotFound"), 0, 0)

    hip = Standin()
    rt = HipRuntime(0, hip=hip)
    monkeypatch.setattr(runtime, "get", lambda backend, dev: rt)
    fns = [m.kernel(n).load(0) for n in m.names]
    assert [f.handle for f in fns] == ["fn:_Z5applyILi2EEvPfPKfi", "fn:_Z4addbIfLj256EEvPT_PKS0_m", "fn:bump"]
    assert hip.calls.count("hipModuleLoadData") == 1  # one code object for the whole module
    sym, size = m._symbol("ns::counter")
    assert rt.get_global(m._module(0), sym) == (0x1000, 4)
    with pytest.raises(Exception, match="hipErrorNotFound"):
        rt.get_global(m._module(0), "ns::counter")  # the runtime wants the symbol, which Module looks up


@pytest.mark.parametrize("compiler, arch", [
    pytest.param("nvrtc", "sm_90", marks=_needs("nvrtc", "sm_90")),
    pytest.param("nvcc", "sm_90", marks=_needs("nvcc", "sm_90")),
])
def test_extern_c_kernel_with_hip_typedefs_and_vectors_on_nvidia_compilers(tmp_path, compiler, arch):
    """HIP on AMD declares uint/ushort/ulong (ROCm hip/amd_detail/device_library_decls.h): so does the
    shipped HIP-on-CUDA header; by-value float2 and uint of an extern "C" kernel take their sizes from the compiler."""
    src = ('extern "C" __global__ void k(float* out, float2 v, uint n, ushort s, ulong l) '
           "{ if (threadIdx.x < n) out[threadIdx.x] = v.x + v.y + s + l; }\n")
    k = compile_kernel(src, "k", arch=arch, compiler=compiler, cache_dir=str(tmp_path))
    assert k.lowered_name == "k"
    assert [(p.decl, p.size) for p in k.params] == [("float* out", 8), ("float2 v", 8), ("unsigned int n", 4),
                                                    ("unsigned short s", 2), ("unsigned long l", 8)]
    v = k.pack(None, (1, 2), 3, 4, 5).values
    assert list(v[1].v) == [1.0, 2.0] and ctypes.alignment(v[1]) == 8


@pytest.mark.parametrize("arch", [pytest.param("sm_90", marks=_needs("nvrtc", "sm_90")),
                                  pytest.param("gfx90a", marks=_needs("hiprtc", "gfx90a"))])
def test_hip_kernel_names_compile_only_runner(pytester, tmp_path_factory, monkeypatch, arch):
    """--gpuenv-kernels=compile: the module is compiled for each arch, then the test skips."""
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "names.hip").write_bytes(GPU_SOURCE)
    pytester.makeini("[pytest]\n")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("PYTHONPATH", repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_names="""
        def test_module(hip_kernel):
            hip_kernel("names.hip", names=["apply<2>", "ns::scale"])
        def test_missing(hip_kernel):
            hip_kernel("names.hip", names=["apply<2>", "nope<1>"])
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-p", "no:cacheprovider",
                                           "-p", "no:gpuenv", f"--gpuenv-compile-archs={arch}",
                                           f"--gpuenv-cache-dir={tmp_path_factory.mktemp('cache')}", "-rs")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(["*hip_kernel: kernel 'nope<1>' not found in *names.hip (__global__ kernels there: addb*",
                                 f"SKIPPED * compiled for {arch}; no GPU to launch on"])


@needs_cxx
def test_kernel_declared_through_a_macro_is_compiled_by_its_name(cpu_cache):
    """The parser does not read ``KERNEL void fill(...)``; the name is in the source, so the compiler decides."""
    src = "#include <hip/hip_runtime.h>\n#define KERNEL __global__\ntemplate <int N> KERNEL void fill(float* o) { o[threadIdx.x] = N; }\n"
    k = compile_kernel(src, "fill<3>", arch="cpu", warp_size=64, cache_dir=cpu_cache)
    assert [p.decl for p in k.params] == ["float* arg0"]  # types from the compiler, the name unknown
    out = np.zeros(4, np.float32)
    k(1, 4, out)
    assert out.tolist() == [3.0] * 4


COOPERATIVE = """#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>
#include <hip/device_functions.h>
namespace cg = cooperative_groups;
template <unsigned N> __global__ void tiles(unsigned long long* o, const int* a) {
    cg::thread_block b = cg::this_thread_block();
    auto t = cg::tiled_partition<N>(b);
    o[b.thread_rank()] = __ballot(threadIdx.x & 1) + __any(a[threadIdx.x]) + t.shfl_down((int)t.thread_rank(), 1);
}
"""


@pytest.mark.parametrize("compiler", [
    pytest.param("nvrtc", marks=_needs("nvrtc", "sm_90")),
    pytest.param("nvcc", marks=_needs("nvcc", "sm_90")),
])
def test_hip_cooperative_groups_on_nvidia(tmp_path, compiler):
    """The shipped HIP-on-CUDA headers take hip_cooperative_groups.h and device_functions.h (rocm-examples'
    cooperative_groups, hip-tests' ballot and tile-shuffle kernels include them): CUDA's cooperative_groups.h
    read without hip_runtime.h's vote and shuffle macros, which are there again after it."""
    k = compile_kernel(COOPERATIVE, "tiles<16>", arch="sm_90", compiler=compiler, cache_dir=str(tmp_path))
    assert k.lowered_name == "_Z5tilesILj16EEvPyPKi"
