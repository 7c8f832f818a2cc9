"""Name expressions and module globals through hiprtc, hipcc, NVRTC and nvcc: compiled and lowered here.

Debian's ROCm has no device and this machine no NVIDIA GPU: the launches are in tests/kernels/test_gpu_names.py,
run on a GPU by scripts/gpu-check.sh. Each compiler's tests skip, naming it, where it is not installed.
"""

from __future__ import annotations

import ctypes
import os

import pytest
from _checkout import REPO
from _rtc_names import ENUMS, GPU_SOURCE, _needs

from pytest_gpuenv.rtc import KernelCompileError, compile_kernel, compile_module


@pytest.mark.parametrize("compiler, arch", [
    pytest.param("hiprtc", "gfx90a", marks=_needs("hiprtc", "gfx90a")),
    pytest.param("hipcc", "gfx90a", marks=[_needs("hipcc", "gfx90a"), pytest.mark.slow]),  # a compile of seconds
    pytest.param("nvrtc", "sm_90", marks=_needs("nvrtc", "sm_90")),
    pytest.param("nvcc", "sm_90", marks=[_needs("nvcc", "sm_90"), pytest.mark.slow]),
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
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
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
