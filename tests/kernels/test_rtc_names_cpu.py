"""Kernels named as C++ names them (name expressions), modules with globals, by-value vectors and structs on
the CPU executor: compiled and launched here (both wavefront widths, results against numpy), directly and
through the hip_kernel fixture.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _checkout import REPO
from _rtc_names import ENUMS, MODULE_TEST, SOURCE, P, needs_cxx

from pytest_gpuenv.rtc import KernelCompileError, Module, compile_kernel, compile_module
from pytest_gpuenv.rtc.source import load_source


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("src") / "names.hip"
    p.write_bytes(SOURCE)
    return str(p)


def test_latin1_source_is_read_as_bytes(path):
    src = load_source(path)
    assert src.data == SOURCE and "apply" in src.text


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


@needs_cxx
@pytest.mark.slow  # a child run building the module at both warp sizes (compile_module on the CPU: the tests above)
def test_hip_kernel_names_returns_a_module_on_the_cpu_executor(pytester, tmp_path_factory, monkeypatch):
    pytest.importorskip("torch")
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "names.hip").write_bytes(SOURCE)
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    pytester.makepyfile(test_names=MODULE_TEST)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-p", "no:gpuenv", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_module?wave64-cpu? PASSED*", "*test_module?wave32-cpu? PASSED*"])


@needs_cxx
def test_kernel_declared_through_a_macro_is_compiled_by_its_name(cpu_cache):
    """The parser does not read ``KERNEL void fill(...)``; the name is in the source, so the compiler decides."""
    src = "#include <hip/hip_runtime.h>\n#define KERNEL __global__\ntemplate <int N> KERNEL void fill(float* o) { o[threadIdx.x] = N; }\n"
    k = compile_kernel(src, "fill<3>", arch="cpu", warp_size=64, cache_dir=cpu_cache)
    assert [p.decl for p in k.params] == ["float* arg0"]  # types from the compiler, the name unknown
    out = np.zeros(4, np.float32)
    k(1, 4, out)
    assert out.tolist() == [3.0] * 4


def test_get_global_takes_numpy_types_and_names_a_size_mismatch(path, cpu_cache):
    """``get_global(name, dtype=np.float32)`` raised TypeError (``np.dtype(str(np.float32))``), and a dtype whose
    size does not divide the variable's gave numpy's message without the variable's name."""
    m = compile_module(path, ["apply<2>", "bump"], arch="cpu", cache_dir=cpu_cache)
    for dtype in (np.float32, np.dtype("float32"), "float32"):
        assert m.get_global("coeffs", dtype=dtype).dtype == np.float32
    m2 = compile_module(path, ["apply<2>", "bump"], arch="cpu", cache_dir=cpu_cache)  # a fresh view cache
    with pytest.raises(ValueError, match=r"get_global\('ns::counter'\): the variable has 4 bytes, not a whole number of "
                                         r"float64 \(8 bytes each\)"):
        m2.get_global("ns::counter", dtype=np.float64)
    with pytest.raises(TypeError, match=r"get_global\('coeffs'\): dtype 'no such type' is no numpy or torch dtype"):
        m2.get_global("coeffs", dtype="no such type")


def test_the_executor_s_own_symbols_are_not_globals(path, cpu_cache):
    """``get_global("__gpuenv_kernel_index")`` was writable, and after writing it a launch ran nothing and returned
    success; internal symbols are neither found nor listed."""
    m = compile_module(path, ["apply<2>", "bump"], arch="cpu", cache_dir=cpu_cache)
    with pytest.raises(KeyError, match=r"no __constant__ or __device__ variable '__gpuenv_kernel_index'") as info:
        m.get_global("__gpuenv_kernel_index")
    assert "gpuenv" not in str(info.value).split("variables there:")[1]
    a = np.ones(256, np.float32)
    out = np.zeros_like(a)
    m.get_global("coeffs")[:] = 1
    m.kernel("apply<2>")(2, 128, out, a, a.size)
    assert (out == 2).all()


def test_a_source_s_own_gpuenv_named_variable_is_found(cpu_cache):
    """Only the executor's own names are hidden: a kernel's ``__device__ int gpuenv_hits[4]`` is its own."""
    src = ('#include <hip/hip_runtime.h>\n__device__ int gpuenv_hits[4];\n'
           'extern "C" __global__ void k() { gpuenv_hits[threadIdx.x] += 1; }\n')
    m = compile_module(src, ["k"], arch="cpu", cache_dir=cpu_cache)
    hits = m.get_global("gpuenv_hits")
    m.kernel("k")(1, 4)
    assert hits.tolist() == [1, 1, 1, 1]
    with pytest.raises(KeyError, match=r"variables there: gpuenv_hits\)"):
        m.get_global("__gpuenv_state")


def test_get_global_again_with_another_dtype_reads_the_same_memory_as_it(path, cpu_cache):
    """A second ``get_global`` with another dtype returned the first view, the dtype ignored."""
    m = compile_module(path, ["apply<2>", "bump"], arch="cpu", cache_dir=cpu_cache)
    coeffs = m.get_global("coeffs")
    bits = m.get_global("coeffs", dtype=np.int32)
    assert coeffs.dtype == np.float32 and bits.dtype == np.int32 and m.get_global("coeffs") is coeffs
    coeffs[:] = [1.0, 2.0, 3.0, 4.0]
    assert bits.tolist() == np.float32([1, 2, 3, 4]).view(np.int32).tolist()


def test_get_global_keeps_the_declared_type_whatever_was_asked_first(path, cpu_cache):
    """Asking first for bytes made every later plain call return bytes: the declared view is what is kept."""
    m = compile_module(path, ["apply<2>", "bump"], arch="cpu", cache_dir=cpu_cache)
    assert m.get_global("coeffs", dtype=np.uint8).shape == (16,)
    coeffs = m.get_global("coeffs")
    assert coeffs.dtype == np.float32 and coeffs.shape == (4,)


#: a ``__constant__`` variable template, as HeCBench convolution1D declares its mask
VARIABLE_TEMPLATE = """#include <hip/hip_runtime.h>
#include <stdint.h>
#define WIDTH 10
template <typename T> __constant__ T mask [WIDTH];
template <typename T, int K = 2> __device__ T scaled[4];
template <typename T> __global__ void apply(T* out) { out[threadIdx.x] = mask<T>[threadIdx.x] + scaled<T>[0]; }
"""


@needs_cxx
def test_get_global_of_a_variable_template_has_its_instance_s_type(cpu_cache):
    m = compile_module(VARIABLE_TEMPLATE, ["apply<float>", "apply<int16_t>"], arch="cpu", cache_dir=cpu_cache)
    mask = m.get_global("mask<float>")
    assert mask.dtype == np.float32 and mask.shape == (10,)
    assert m.get_global("mask<int16_t>").dtype == np.int16 and m.get_global("mask<int16_t>").shape == (10,)
    assert m.get_global("scaled<float, 2>").dtype == np.float32
    mask[:] = np.arange(10)
    out = np.zeros(10, np.float32)
    m.kernel("apply<float>")(1, 10, out)
    assert out.tolist() == list(range(10))
