"""Real compiles on this machine: hiprtc/hipcc for gfx targets, NVRTC/nvcc for sm targets.

Each compiler's tests skip, saying which compiler is missing, where it is not installed. Anything that
starts a GPU runtime runs in a child process.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from _checkout import REPO

from pytest_gpuenv.rtc import KernelCompileError, compile_command, compile_kernel
from pytest_gpuenv.rtc import compilers as _compilers

KERNELS = os.path.join(REPO, "kernels")
LIBRARY = {
    "vector_add": ["out", "a", "b", "n"],
    "matmul_tiled": ["C", "A", "B", "M", "N", "K"],
    "reduce_sum": ["out", "in", "n"],
}


def needs(name: str, arch: str):
    """Skip unless compiler ``name`` is installed and builds ``arch`` (a hiprtc without ROCm's device
    libraries, say, is installed but cannot)."""
    c = _compilers.get(name)
    if not c.available():
        return pytest.mark.skipif(True, reason=f"requires {c.looked_for}: not installed here")
    ok = c.supports(arch, cache_dir=None)  # hip compilers: probed once, remembered in the user's cache
    return pytest.mark.skipif(not ok, reason=f"requires {c.name} able to build {arch}: {c.identity()} cannot")


needs_hiprtc, needs_hipcc = needs("hiprtc", "gfx90a"), needs("hipcc", "gfx90a")
needs_nvrtc, needs_nvcc = needs("nvrtc", "sm_90"), needs("nvcc", "sm_90")


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "cache")


@needs_hiprtc
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1030"])
@pytest.mark.parametrize("kernel", sorted(LIBRARY))
def test_library_builds_with_hiprtc(kernel, arch, cache):
    k = compile_kernel(f"{kernel}.hip", kernel, arch=arch, kernel_dirs=[KERNELS], cache_dir=cache)
    assert (k.name, k.arch, k.backend, k.compiler, k.cache_hit) == (kernel, arch, "rocm", "hiprtc", False)
    assert k.binary[:4] == b"\x7fELF" and k.size == len(k.binary) > 1000
    assert [p.name for p in k.params] == LIBRARY[kernel]
    assert k.compile_seconds > 0


@needs_hiprtc
def test_reduce_sum_builds_for_wave64_and_wave32(cache):
    """gfx90a runs 64-wide wavefronts, gfx1030 32-wide: the code-object metadata says which."""
    k64 = compile_kernel(os.path.join(KERNELS, "reduce_sum.hip"), "reduce_sum", arch="gfx90a", cache_dir=cache)
    k32 = compile_kernel(os.path.join(KERNELS, "reduce_sum.hip"), "reduce_sum", arch="gfx1030", cache_dir=cache)
    assert b".wavefront_size\x40" in k64.binary  # msgpack 64
    assert b".wavefront_size\x20" in k32.binary  # msgpack 32


@needs_nvrtc
@pytest.mark.parametrize("kernel", sorted(LIBRARY))
def test_library_builds_with_nvrtc(kernel, cache):
    k = compile_kernel(f"{kernel}.hip", kernel, arch="sm_90", kernel_dirs=[KERNELS], cache_dir=cache)
    assert (k.backend, k.compiler, k.arch) == ("cuda", "nvrtc", "sm_90")
    assert k.binary[:4] == b"\x7fELF"
    assert [p.name for p in k.params] == LIBRARY[kernel]


@needs_nvrtc
def test_nvrtc_compile_leaves_interpreter_constants_alone(cache):
    """NVRTC writes its log and cubin into the buffers it is given. With ``b" " * n`` (cuda-python's
    examples) an empty log (n == 1) is written into CPython's shared one-byte object: after that
    b" " == b"\0" in the whole process, and " " constants of modules compiled later came out as "\0"
    (seen on the H200: "CPU-only0/11", "46.62us"). Runs in a child: a failure would poison this process."""
    code = textwrap.dedent(f"""
        from pytest_gpuenv.rtc import compile_kernel
        src = 'extern "C" __global__ void f(float* p) {{ p[0] = 1.0f; }}'
        k = compile_kernel(src, "f", arch="sm_90", cache_dir={cache!r}, use_cache=False)
        assert k.binary[:4] == b"\\x7fELF"
        print(b" "[0], " "[0] == chr(32))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["32", "True"]


@needs_nvrtc
def test_shipped_header_hip_spellings_under_nvrtc(cache):
    src = textwrap.dedent(
        """
        #include <hip/hip_runtime.h>
        extern "C" __global__ void __launch_bounds__(128) spell(float* out, unsigned long long* mask, __half* h) {
            HIP_DYNAMIC_SHARED(float, buf)
            int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
            buf[hipThreadIdx_x] = (float)i;
            __syncthreads();
            float v = __shfl_down(buf[hipThreadIdx_x], 1) + __shfl_xor(1.0f, 2, 16) + __shfl_up(0.0f, 1)
                      + __shfl(v, 0) + (float)warpSize + (float)__lane_id();
            unsigned long long b = __ballot(i & 1);
            if (__any(i == 0) && !__all(i < 0)) mask[0] = b;
            atomicAdd(out, v);
            atomicMax((int*)out + 1, i);
        #ifdef PYTEST_GPUENV_HAVE_HALF
            h[i] = __float2half(v);
        #endif
        }
        """
    )
    k = compile_kernel(src, "spell", arch="sm_90", cache_dir=cache)
    assert [p.type for p in k.params] == ["float", "unsigned long long", "__half"]


@needs_hipcc
def test_hipcc_fallback_builds_code_object(cache):
    k = compile_kernel("vector_add.hip", "vector_add", arch="gfx90a", kernel_dirs=[KERNELS], cache_dir=cache,
                       compiler="hipcc")
    assert k.compiler == "hipcc" and k.binary.startswith(b"__CLANG_OFFLOAD_BUNDLE__")


@needs_nvcc
def test_nvcc_fallback_builds_cubin(cache):
    k = compile_kernel("reduce_sum.hip", "reduce_sum", arch="sm_90", kernel_dirs=[KERNELS], cache_dir=cache,
                       compiler="nvcc")
    assert k.compiler == "nvcc" and k.binary[:4] == b"\x7fELF"


def _any_compiler_arch() -> str:
    for name, arch in (("nvrtc", "sm_90"), ("hiprtc", "gfx90a"), ("nvcc", "sm_90"), ("hipcc", "gfx90a")):
        c = _compilers.get(name)
        if c.available() and c.supports(arch):
            return arch
    pytest.skip(f"requires a HIP compiler: looked for {_compilers.looked_for()}")


def test_second_compile_is_a_cache_hit_and_header_change_recompiles(tmp_path, cache):
    arch = _any_compiler_arch()
    (tmp_path / "scale.h").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.hip").write_text(
        '#include <hip/hip_runtime.h>\n#include "scale.h"\n'
        'extern "C" __global__ void k(float* o) { o[threadIdx.x] *= SCALE; }\n'
    )
    first = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    again = compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache)
    assert (first.cache_hit, again.cache_hit) == (False, True) and again.binary == first.binary
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache).cache_hit is False
    assert compile_kernel(str(tmp_path / "k.hip"), "k", arch=arch, cache_dir=cache, defines={"X": 1}).cache_hit is False


BROKEN = 'extern "C" __global__ void k(float* o) {\n    int i = threadIdx.x;\n    o[i] = undefined_value;\n}\n'


@pytest.mark.parametrize("compiler, arch", [
    pytest.param("hiprtc", "gfx90a", marks=needs_hiprtc),
    pytest.param("nvrtc", "sm_90", marks=needs_nvrtc),
    pytest.param("hipcc", "gfx90a", marks=needs_hipcc),
    pytest.param("nvcc", "sm_90", marks=needs_nvcc),
])
def test_compile_error_points_at_file_and_line(tmp_path, cache, compiler, arch):
    path = tmp_path / "broken.hip"
    path.write_text(BROKEN)
    with pytest.raises(KernelCompileError) as info:
        compile_kernel(str(path), "k", arch=arch, cache_dir=cache, compiler=compiler)
    e = info.value
    assert (e.file, e.line, e.arch, e.compiler) == (str(path), 3, arch, compiler)
    assert str(e).startswith(f"{path}:3: ")
    assert "undefined_value" in str(e) and "comgr" not in str(e)


@pytest.mark.parametrize("compiler, arch", [
    pytest.param("hiprtc", "gfx90a", marks=needs_hiprtc),
    pytest.param("nvrtc", "sm_90", marks=needs_nvrtc),
])
def test_missing_header_is_named(tmp_path, cache, compiler, arch):
    path = tmp_path / "k.hip"
    path.write_text('#include "not_there.h"\nextern "C" __global__ void k(float* o) { o[0] = 1; }\n')
    with pytest.raises(KernelCompileError, match=rf"{path}:1: header 'not_there.h' not found") as info:
        compile_kernel(str(path), "k", arch=arch, cache_dir=cache, compiler=compiler)
    assert info.value.line == 1


def test_unknown_arch_spelling(cache):
    with pytest.raises(KernelCompileError, match=r"unknown arch 'cuda9': expected an AMD target such as gfx90a"):
        compile_kernel(BROKEN, "k", arch="cuda9", cache_dir=cache)


@needs_nvrtc
def test_arch_nvrtc_does_not_know(cache):
    with pytest.raises(KernelCompileError, match=r"NVRTC does not know arch 'sm_99' \(it supports .*sm_90"):
        compile_kernel(os.path.join(KERNELS, "vector_add.hip"), "vector_add", arch="sm_99", cache_dir=cache)


@needs_hiprtc
def test_arch_hiprtc_does_not_know_is_an_error_not_a_crash(cache):
    """Debian's ROCm 5.2 hiprtc aborts its process on gfx9999; the child process takes the blow."""
    with pytest.raises(KernelCompileError, match=r"gfx9999"):
        compile_kernel(os.path.join(KERNELS, "vector_add.hip"), "vector_add", arch="gfx9999", cache_dir=cache)


def test_no_compiler_for_vendor_named(monkeypatch, cache):
    monkeypatch.setattr(_compilers.Nvrtc, "available", lambda self: False)
    monkeypatch.setattr(_compilers.Nvcc, "available", lambda self: False)
    with pytest.raises(KernelCompileError, match=r"no compiler for sm_90: looked for NVRTC \(cuda.bindings.nvrtc\), nvcc"):
        compile_kernel(os.path.join(KERNELS, "vector_add.hip"), "vector_add", arch="sm_90", cache_dir=cache)


def test_default_archs_are_what_compilers_support(cache):
    archs = _compilers.default_archs(cache)
    assert set(archs) <= set(_compilers.DEFAULT_ARCHS)
    if _compilers.get("hiprtc").available():
        assert "gfx90a" in archs and "gfx1030" in archs
    if _compilers.get("nvrtc").available():
        assert "sm_90" in archs and "sm_80" in archs
    assert _compilers.default_archs(cache) == archs  # second time from the probe file


def test_compile_command_prints_size_and_time(cache):
    arch = _any_compiler_arch()
    out = io.StringIO()
    rc = compile_command([os.path.join(KERNELS, "vector_add.hip"), "--arch", arch, "--cache-dir", cache], out=out)
    assert rc == 0, out.getvalue()
    assert f"ok   vector_add {arch}" in out.getvalue() and "bytes" in out.getvalue()


def test_compile_command_fails_with_file_and_line(tmp_path, cache):
    arch = _any_compiler_arch()
    path = tmp_path / "broken.hip"
    path.write_text(BROKEN)
    out = io.StringIO()
    rc = compile_command([str(path), "--arch", arch, "--kernel", "k", "--cache-dir", cache], out=out)
    assert rc == 1
    assert f"FAIL k {arch}: {path}:3: " in out.getvalue()
    out = io.StringIO()
    assert compile_command([str(tmp_path / "none.hip"), "--cache-dir", cache], out=out) == 2
    assert "kernel file" in out.getvalue() and "none.hip' not found" in out.getvalue()


def test_gpuenv_compile_cli_subprocess(cache):
    arch = _any_compiler_arch()
    p = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "compile", os.path.join(KERNELS, "matmul_tiled.hip"),
                        "--arch", arch, "--cache-dir", cache], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "matmul_tiled" in p.stdout


_HIP_LOAD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    try:
        from hip import hip
    except Exception as exc:  # hip-python without a HIP runtime library
        print("NO-HIP", exc)
        sys.exit(0)
    from pytest_gpuenv.rtc import compile_kernel, KernelLaunchError
    k = compile_kernel({path!r}, "vector_add", arch="gfx90a", cache_dir={cache!r}, device=0)
    packed = k.pack(0x1000, 0x2000, 0x3000, 1000, device=0)
    assert [v.value for v in packed.values] == [0x1000, 0x2000, 0x3000, 1000]
    try:
        k((4,), (256,), 0x1000, 0x2000, 0x3000, 1000)
    except KernelLaunchError as exc:
        print("LAUNCH-ERROR", exc.code, "|", exc)
    else:
        print("LAUNCHED")
    # the module loader itself, on the real code object (what load() calls after hipSetDevice)
    from pytest_gpuenv.runtime.hip import HipRuntime
    rt = object.__new__(HipRuntime)
    rt.hip, rt.device, rt._hip_major = hip, 0, None
    try:
        rt.load_module(k.binary)
    except KernelLaunchError as exc:
        print("LOAD-ERROR", exc.code, "|", exc)
    """
)


@needs_hiprtc
def test_hip_launch_path_up_to_the_runtime(tmp_path, cache):
    """No AMD GPU here: hipModuleLoadData gets a real code object and its answer becomes KernelLaunchError."""
    pytest.importorskip("hip", reason="requires hip-python")
    script = tmp_path / "load.py"
    script.write_text(_HIP_LOAD.format(repo=REPO, path=os.path.join(KERNELS, "vector_add.hip"), cache=cache))
    env = dict(os.environ)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    if "NO-HIP" in p.stdout:
        pytest.skip(f"requires hip-python with a HIP runtime: {p.stdout.strip()}")
    if "LAUNCHED" in p.stdout:
        pytest.skip("an AMD GPU answered: the launch path ran for real")
    assert "LAUNCH-ERROR hipError" in p.stdout
    assert "hipSetDevice(0): hipError" in p.stdout or "hipModuleLoadData: hipError" in p.stdout
    assert "LOAD-ERROR hipError" in p.stdout and "hipModuleLoadData: hipError" in p.stdout


def test_compile_command_takes_a_cuda_file_and_names_kernel_option(tmp_path, cache):
    """A .cu kernel without extern "C" (as CUDA code is written): the command says to name it with --kernel,
    and with --kernel it builds for the CPU executor."""
    if not shutil.which("g++") and not shutil.which("clang++"):
        pytest.skip("no host C++ compiler")
    path = tmp_path / "warp_sum.cu"
    path.write_text("__global__ void warp_sum(const float* x, float* total) {\n"
                    "    if (threadIdx.x == 0) atomicAdd(total, x[blockIdx.x]);\n}\n")
    out = io.StringIO()
    assert compile_command([str(path), "--arch", "cpu", "--cache-dir", cache], out=out) == 2
    assert "no extern \"C\" __global__ kernel" in out.getvalue() and "--kernel NAME" in out.getvalue()
    out = io.StringIO()
    rc = compile_command([str(path), "--arch", "cpu", "--kernel", "warp_sum", "--cache-dir", cache], out=out)
    assert rc == 0, out.getvalue()
    assert "ok   warp_sum cpu" in out.getvalue()
