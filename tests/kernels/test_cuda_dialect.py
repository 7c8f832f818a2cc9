"""CUDA-dialect kernels: NVIDIA's cuda-samples as written, on the CPU executor and compiled for AMD.

The kernels are in tests/data/cuda_samples (device code verbatim from NVIDIA/cuda-samples, the first line
names repo, commit and path); inputs and numpy references in tests/_cuda_samples.py. On the CPU executor
they run at wave64 and wave32, checked and unchecked; for AMD they are compiled with the installed ROCm
(hiprtc, hipcc) for gfx90a and gfx1030. The GPU run as CUDA is ``scripts/published_check.py --cuda``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil

import pytest

np = pytest.importorskip("numpy")

from _cuda_samples import CASES, CUDA_SAMPLES  # noqa: E402
from _published import check_on_cpu  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402
from pytest_gpuenv.rtc import _cuda  # noqa: E402
from pytest_gpuenv.rtc import compilers as _compilers  # noqa: E402

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                               reason="no C++ compiler")


@needs_cxx
@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cuda_sample_on_cpu(case, warp, check, cpu_cache):
    check_on_cpu(case, warp, check, cpu_cache)


def test_every_cuda_sample_names_its_origin():
    files = sorted(f for f in os.listdir(CUDA_SAMPLES) if f.endswith(".cu"))
    assert files == sorted(c.name + ".cu" for c in CASES)
    for f in files:
        with open(os.path.join(CUDA_SAMPLES, f), "rb") as fh:
            first = fh.readline().decode()
        assert first.startswith("// origin: NVIDIA/cuda-samples@"), f
        commit, path = first.split("@", 1)[1].split(" ", 1)[0].split(":", 1)
        assert len(commit) == 40 and int(commit, 16) >= 0 and path.endswith("/" + f), f
    with open(os.path.join(CUDA_SAMPLES, "histogram_common.h"), "rb") as fh:
        first = fh.readline().decode()
    assert first.startswith("// origin: NVIDIA/cuda-samples@") and first.rstrip().endswith("histogram_common.h (verbatim)")


def _amd(compiler):
    c = _compilers.get(compiler)
    if not c.available():
        pytest.skip(f"{compiler} is not installed")
    return c


@contextlib.contextmanager
def _libc_headers(compiler):
    """The samples include <stdio.h>: Debian's hiprtc 5.2.3 finds the C library's headers, the hiprtc of a
    ROCm 5.7 install (the H200 machine's) does not ('stddef.h' not found): a skip naming that, not a failure."""
    try:
        yield
    except rtc.KernelCompileError as exc:
        if compiler == "hiprtc" and re.search(r"header '\w+\.h' not found", str(exc).splitlines()[0]):
            pytest.skip(f"this hiprtc finds no C library headers: {str(exc).splitlines()[0]}")
        raise


# hiprtc 5.2.3 cannot take HIP's cooperative groups header at all (its built-in runtime clashes with the
# installed headers: "redefinition of 'integral_constant'", for HIP sources as much as CUDA ones): transpose
# and histogram256, which use cooperative groups, are compiled with hipcc
AMD_BUILDS = [(c.name, arch, comp) for c in CASES if c.name != "reduction_kernel" for arch in ("gfx90a", "gfx1030")
              for comp in (("hipcc",) if c.name in ("transpose", "histogram256") else ("hiprtc", "hipcc"))]


#: the default set builds vectorAdd with each compiler, and each cooperative-groups sample once (gfx90a); the
#: other archs are slow
FAST_AMD_BUILDS = {b for b in AMD_BUILDS if b[1] == "gfx90a" and (b[0] == "vectorAdd" or b[2] == "hipcc")}


@pytest.mark.parametrize(("name", "arch", "compiler"),
                         [pytest.param(*b, marks=() if b in FAST_AMD_BUILDS else pytest.mark.slow) for b in AMD_BUILDS],
                         ids=["-".join(b) for b in AMD_BUILDS])
def test_cuda_sample_compiles_for_amd(name, arch, compiler, tmp_path):
    _amd(compiler)
    case = next(c for c in CASES if c.name == name)
    with _libc_headers(compiler):
        mod = rtc.compile_module(case.path, case.names(64), arch=arch, compiler=compiler, cache_dir=str(tmp_path))
    assert mod.compiler == compiler and mod.arch == arch
    assert mod.binary[:4] == b"\x7fELF" or mod.binary.startswith(b"__CLANG_OFFLOAD_BUNDLE__")  # hipcc: a bundle
    assert mod.names == case.names(64)  # each kernel's symbol was found in the code object


def test_reduction_on_amd_needs_tile_meta_group(tmp_path):
    """cuda-samples' cg_reduce calls a tile's meta_group_size()/meta_group_rank(), which HIP 5.2.3's
    thread_block_tile lacks (the CPU executor has them); the call is not template-dependent, so with that HIP
    no kernel of the file builds: the error names the member and the line. A HIP that has them builds it."""
    _amd("hipcc")
    from _cuda_samples import BY_NAME

    case = BY_NAME["reduction_kernel"]
    try:
        mod = rtc.compile_module(case.path, case.names(64), arch="gfx90a", compiler="hipcc", cache_dir=str(tmp_path))
    except rtc.KernelCompileError as exc:
        assert "no member named 'meta_group_size'" in str(exc)
        assert exc.line == 547 and str(exc.file).endswith("reduction_kernel.cu")
    else:
        assert mod.names == case.names(64)


SHFL = """
extern "C" __global__ void warp_sum(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    if (threadIdx.x % warpSize == 0) out[threadIdx.x / warpSize] = v;
}
"""


@needs_cxx
def test_inline_source_takes_dialect(warp, cpu_cache):
    """A string source has no extension: dialect="cuda" says it is CUDA (__shfl_down_sync with a mask)."""
    k = rtc.compile_kernel(SHFL, "warp_sum", arch="cpu", warp_size=warp, dialect="cuda", cache_dir=cpu_cache)
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128 // warp, np.float32)
    k(1, 128, x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, warp).sum(axis=1))


def test_inline_source_dialect_on_hiprtc(tmp_path):
    """ROCm 5.2.3's HIP has no __shfl_down_sync: as HIP the source fails, as CUDA it builds."""
    _amd("hiprtc")
    k = rtc.compile_kernel(SHFL, "warp_sum", arch="gfx90a", dialect="cuda", cache_dir=str(tmp_path))
    assert k.compiler == "hiprtc" and k.size > 0
    with pytest.raises(rtc.KernelCompileError, match="__shfl_down_sync"):
        rtc.compile_kernel(SHFL, "warp_sum", arch="gfx90a", cache_dir=str(tmp_path))


def test_a_cu_file_that_includes_the_hip_runtime_is_hip(tmp_path):
    """hipcc compiles a ``.cu`` file as HIP: one that includes ``hip/hip_runtime.h`` (HeCBench's ``*-hip/main.cu``)
    is HIP without ``dialect=``; a comment that names the header does not make a CUDA file HIP."""
    from pytest_gpuenv.rtc.source import load_source

    hip = tmp_path / "main.cu"
    hip.write_text("#include <cstdio>\n#include <hip/hip_runtime.h>\n__global__ void k(int* o) { o[0] = 1; }\n")
    cuda = tmp_path / "cuda.cu"
    cuda.write_text("// ported from #include <hip/hip_runtime.h>\n#include <cuda_runtime.h>\n__global__ void k() {}\n")
    api = tmp_path / "api.cuh"
    api.write_text('#include "hip/hip_runtime_api.h"\n')
    assert load_source(str(hip)).dialect == "hip" and load_source(str(api)).dialect == "hip"
    assert load_source(str(cuda)).dialect == "cuda"
    assert load_source(str(hip), dialect="cuda").dialect == "cuda"  # dialect= still decides


def test_bad_dialect_is_a_value_error():
    with pytest.raises(ValueError, match="'fortran'"):
        rtc.compile_kernel(SHFL, "warp_sum", arch="cpu", dialect="fortran")


UNMAPPABLE = [
    ('    asm volatile("mov.u32 %0, %%laneid;" : "=r"(v));', "inline PTX assembly (asm volatile) has no HIP counterpart"),
    ("    v = __nv_fast_log2f(1.0f);", "the NVIDIA-only name __nv_fast_log2f"),
    ("    v = tex1Dfetch<float>(t, 0);", "a texture or surface (tex1Dfetch"),
]


@pytest.mark.parametrize(("line", "what"), UNMAPPABLE, ids=["asm", "nv-intrinsic", "texture"])
@pytest.mark.parametrize("arch", ["cpu", "gfx90a"])
def test_unmappable_construct_names_itself_and_its_line(line, what, arch, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(f"// a CUDA kernel\n__global__ void k(unsigned* o, unsigned long long t) {{\n    unsigned v = 0;\n"
                   f"{line}\n    o[0] = v;\n}}\n")
    with pytest.raises(rtc.KernelCompileError) as info:
        rtc.compile_kernel(str(src), "k", arch=arch, cache_dir=str(tmp_path))
    msg = str(info.value)
    assert f"{src}:4: {what}" in msg and "no HIP counterpart" in msg and arch in msg
    assert info.value.line == 4


@pytest.mark.parametrize(("arch", "compiler"), [("cpu", None), ("gfx90a", "hiprtc"), ("gfx90a", "hipcc")])
def test_compile_error_points_at_the_cu_file(arch, compiler, tmp_path):
    """The CUDA-to-HIP header goes before the source, and the source keeps its name and line numbers."""
    if compiler:
        _amd(compiler)
    elif shutil.which("g++") is None and shutil.which("clang++") is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "broken.cu"
    src.write_text("// line 1\n__global__ void k(float* o) {\n    o[0] = undeclared_name;\n}\n")
    kw = dict(compiler=compiler) if compiler else {}
    with pytest.raises(rtc.KernelCompileError, match="undeclared_name") as info:
        rtc.compile_kernel(str(src), "k", arch=arch, cache_dir=str(tmp_path), **kw)
    assert info.value.line == 3 and str(info.value.file) == str(src)


@pytest.mark.parametrize("arch", ["cpu", "gfx90a"])
def test_unmappable_construct_in_an_own_header(arch, tmp_path):
    (tmp_path / "lane.cuh").write_text('// helpers\n__device__ unsigned lane() {\n    unsigned v;\n'
                                       '    asm("mov.u32 %0, %%laneid;" : "=r"(v));\n    return v;\n}\n')
    src = tmp_path / "k.cu"
    src.write_text('#include "lane.cuh"\n__global__ void k(unsigned* o) { o[threadIdx.x] = lane(); }\n')
    with pytest.raises(rtc.KernelCompileError, match="inline PTX assembly") as info:
        rtc.compile_kernel(str(src), "k", arch=arch, cache_dir=str(tmp_path))
    assert str(info.value).startswith(f"{tmp_path / 'lane.cuh'}:4: ") and info.value.line == 4


GUARDED = """
__global__ void lane(unsigned* o) {
    unsigned v;
#ifdef __CUDA_ARCH__
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(v));
#else
    v = threadIdx.x % warpSize;
#endif
    o[threadIdx.x] = v;
}
"""


@needs_cxx
def test_ptx_kept_for_nvidia_is_left_out_on_amd(warp, cpu_cache):
    k = rtc.compile_kernel(GUARDED, "lane", arch="cpu", warp_size=warp, dialect="cuda", cache_dir=cpu_cache)
    out = np.zeros(128, np.uint32)
    k(1, 128, out)
    np.testing.assert_array_equal(out, np.arange(128) % warp)


def test_false_on_amd_branches():
    lines = ["#ifdef __CUDA_ARCH__", "a", "#if X", "b", "#endif", "c", "#else", "d", "#endif",
             "#if __CUDA_ARCH__ >= 800", "e", "#endif", "#ifndef __HIP_PLATFORM_AMD__", "f", "#endif",
             "#if !defined(__CUDA_ARCH__)", "g", "#endif"]
    dead = dict(zip(range(len(lines)), _cuda._false_on_amd_lines(lines)))
    assert [lines[i] for i, d in dead.items() if d and not lines[i].startswith("#")] == ["a", "b", "c", "e", "f"]


def test_elif_branches_false_on_amd():
    # an arch ladder keeps PTX for each NVIDIA arch in #elif branches: all of them are false on AMD
    lines = ["#if __CUDA_ARCH__ >= 800", "a", "#elif __CUDA_ARCH__ >= 700", "b", "#elif defined(X)", "c", "#else",
             "d", "#endif", "#if defined(Y)", "e", "#elif defined(__CUDA_ARCH__)", "f", "#else", "g", "#endif"]
    dead = _cuda._false_on_amd_lines(lines)
    assert [line for line, d in zip(lines, dead) if d and not line.startswith("#")] == ["a", "b", "f"]


def test_a_condition_that_may_hold_on_amd_is_kept():
    # another alternative (||), or a condition continued on the next line, may make the branch live on AMD
    lines = ["#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)", "a", "#endif",
             "#if defined(__CUDA_ARCH__) \\", "    || defined(X)", "b", "#endif", "#ifdef __CUDA_ARCH__", "c", "#endif"]
    dead = _cuda._false_on_amd_lines(lines)
    assert [line for line, d in zip(lines, dead) if d and not line.lstrip().startswith(("#", "||"))] == ["c"]


@needs_cxx
@pytest.mark.parametrize(("arch", "compiler"), [("cpu", None), ("gfx90a", "hiprtc"),
                                               pytest.param("gfx90a", "hipcc", marks=pytest.mark.slow)])
def test_cache_key_covers_the_cuda_headers(arch, compiler, tmp_path, monkeypatch):
    """Editing a shipped CUDA-to-HIP header changes the kernel's cache key: the next compile is a miss."""
    if compiler:
        _amd(compiler)
    inc = tmp_path / "include_cuda"
    shutil.copytree(_cuda.CUDA_INCLUDE, inc)
    monkeypatch.setattr(_cuda, "CUDA_INCLUDE", str(inc))
    path = os.path.join(CUDA_SAMPLES, "vectorAdd.cu")
    cache = str(tmp_path / "cache")
    kw = dict(arch=arch, compiler=compiler) if compiler else dict(arch=arch)
    with _libc_headers(compiler):
        assert not rtc.compile_kernel(path, "vectorAdd", cache_dir=cache, **kw).cache_hit
    assert rtc.compile_kernel(path, "vectorAdd", cache_dir=cache, **kw).cache_hit
    with open(inc / "cuda_runtime.h", "a") as f:
        f.write("/* edited */\n")
    os.utime(inc / "cuda_runtime.h", (1, 1))  # an old timestamp: the header scan must still see the change
    assert not rtc.compile_kernel(path, "vectorAdd", cache_dir=cache, **kw).cache_hit


def _nvidia(compiler):
    c = _compilers.get(compiler)
    if not c.available() or not c.supports("sm_90"):
        pytest.skip(f"{compiler} is not installed or does not know sm_90")
    return c


# a HIP name the HIP-on-CUDA header defines: a CUDA source may define it for itself
OWN_NAMES = """
__device__ unsigned __lane_id() { return threadIdx.x & 31; }
extern "C" __global__ void own(unsigned* o) { o[threadIdx.x] = __lane_id(); }
"""


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_cuda_source_compiles_as_cuda_on_nvidia(compiler, tmp_path):
    """On NVIDIA a CUDA source is compiled as written: the HIP-on-CUDA header (pre-included for HIP sources)
    defines nothing, so a name it would take (__lane_id) stays the source's."""
    _nvidia(compiler)
    k = rtc.compile_kernel(OWN_NAMES, "own", arch="sm_90", compiler=compiler, dialect="cuda", cache_dir=str(tmp_path))
    assert k.compiler == compiler and k.size > 0
    with pytest.raises(rtc.KernelCompileError, match="__lane_id"):  # as HIP, the header's __lane_id clashes
        rtc.compile_kernel(OWN_NAMES, "own", arch="sm_90", compiler=compiler, cache_dir=str(tmp_path))


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c.name == "vectorAdd" else pytest.mark.slow)
                                  for c in CASES], ids=[c.name for c in CASES])
def test_cuda_sample_compiles_with_nvcc(case, tmp_path):
    """The samples include <stdio.h> (a host header NVRTC does not have): nvcc builds them as they are."""
    _nvidia("nvcc")
    mod = rtc.compile_module(case.path, case.names(32), arch="sm_90", compiler="nvcc", cache_dir=str(tmp_path))
    assert mod.names == case.names(32)


@needs_cxx
def test_reduce7_reads_inactive_lanes(warp, cpu_cache):
    """A real portability bug in cuda-samples' reduce7: its last warp reduction shuffles down over the whole
    warp while only blockSize / warpSize lanes take part (``__shfl_down_sync(ballot, ...)``), so lane 0 reads
    lanes outside the mask. On sm_80+ with int the sample takes ``__reduce_add_sync`` instead and is right;
    the shuffle path (float, older GPUs, AMD) reads undefined values. Checked mode says so at both widths."""
    from _cuda_samples import BY_NAME, REDUCE7

    case = BY_NAME["reduction_kernel"]
    k = rtc.compile_kernel(case.path, REDUCE7, arch="cpu", warp_size=warp, cache_dir=cpu_cache)
    x = np.ones(3000, np.int32)
    out = np.zeros(12, np.int32)
    with pytest.raises(rtc.KernelWarpError, match="not active") as info:
        k(12, 256, x, out, 3000, shared_mem=256 * 4)
    assert "reduction_kernel.cu:" in str(info.value) and f"warpSize {warp}" in str(info.value)


def test_info_lists_hipify_where_installed(tmp_path, gpu_roots):
    """``gpuenv info`` lists hipify-perl / hipify-clang under compilers where a ROCm install has one (a file tree
    with real modes); CUDA sources still build through the shipped headers."""
    from _roots import materialize

    from pytest_gpuenv.detect import detect

    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    env = detect(root=str(root), environ={"ROCM_HOME": "/opt/rocm", "PATH": "/usr/bin:/bin"})
    assert "hipify" not in env.compilers
    tool = root / "opt/rocm/bin/hipify-perl"
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/usr/bin/perl\n")
    tool.chmod(0o755)
    env = detect(root=str(root), environ={"ROCM_HOME": "/opt/rocm", "PATH": "/usr/bin:/bin"})
    assert env.compilers["hipify"] == "/opt/rocm/bin/hipify-perl"


def test_cuda_file_prefers_nvcc_on_nvidia(tmp_path):
    """A .cu file is built for an sm_ arch by nvcc where installed, as it is written to be: NVRTC has no
    <stdio.h>, which vectorAdd.cu includes."""
    _nvidia("nvcc")
    k = rtc.compile_kernel(os.path.join(CUDA_SAMPLES, "vectorAdd.cu"), "vectorAdd", arch="sm_90",
                           cache_dir=str(tmp_path))
    assert k.compiler == "nvcc"
    assert rtc.compile_kernel(SHFL, "warp_sum", arch="sm_90", cache_dir=str(tmp_path)).compiler in ("nvrtc", "nvcc")
