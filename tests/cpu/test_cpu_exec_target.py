"""A CPU run stands for an AMD target and a ROCm version (rtc/target.py): the macros hipcc defines for that
target, its wave size and shared-memory limit, ``warpSize``'s rule of that ROCm; generic targets are
accepted wherever an arch is."""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import REPO, plugin_installed  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402
from pytest_gpuenv.base import capabilities  # noqa: E402
from pytest_gpuenv.base.model import ArchPattern  # noqa: E402
from pytest_gpuenv.rtc import compilers, target  # noqa: E402

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                               reason="no C++ compiler")

GENERIC = ("gfx9-generic", "gfx9-4-generic", "gfx10-1-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic")

#: what the kernel sees of its target: a code per family macro, the wave size macro, warpSize, HIP's version
IDENTITY = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void identity(int* out) {
    int family = 0, proc = 0;
#if defined(__GFX9__)
    family = 9;
#elif defined(__GFX11__)
    family = 11;
#elif defined(__GFX12__)
    family = 12;
#elif defined(__GFX10__)
    family = 10;
#endif
#if defined(__gfx90a__)
    proc = 0x90a;
#elif defined(__gfx942__)
    proc = 0x942;
#elif defined(__gfx950__)
    proc = 0x950;
#elif defined(__gfx1100__)
    proc = 0x1100;
#elif defined(__gfx1201__)
    proc = 0x1201;
#elif defined(__gfx9_4_generic__)
    proc = -94;
#elif defined(__gfx11_generic__)
    proc = -11;
#endif
#if defined(__AMDGCN__) && defined(__AMDGPU__) && defined(__HIP_DEVICE_COMPILE__) && defined(__HIP_PLATFORM_AMD__)
    out[0] = family;
#else
    out[0] = -1;
#endif
    out[1] = proc;
    out[2] = __AMDGCN_WAVEFRONT_SIZE;
    out[3] = warpSize;
    out[4] = HIP_VERSION_MAJOR * 100 + HIP_VERSION_MINOR;
    out[5] = __AMDGCN_CUMODE__;
    out[6] = __amdgcn_processor__[3];
}
"""


def identity(cache: str, **kw) -> tuple[rtc.Kernel, list[int]]:
    k = rtc.compile_kernel(IDENTITY, "identity", arch="cpu", cache_dir=cache, **kw)
    out = np.zeros(7, np.int32)
    k(1, 1, out)
    return k, out.tolist()


@needs_cxx
@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_a_run_at_each_width_stands_for_its_default_target(cpu_cache, warp, check):
    """Code that picks its wave width by __GFX9__ & co. takes the path of the target the run stands for."""
    k, out = identity(cpu_cache, warp_size=warp, check=check, rocm_version="7.0")
    want = (9, 0x90a, 64, 64, 700, 1) if warp == 64 else (11, 0x1100, 32, 32, 700, 0)
    assert tuple(out[:6]) == want
    assert (k.target, k.warp_size, k.rocm_version) == ("gfx90a" if warp == 64 else "gfx1100", warp, "7.0.0")
    assert k.arch == "cpu" and k.backend == "cpu"


@needs_cxx
@pytest.mark.parametrize("name, want", [
    ("gfx942", (9, 0x942, 64, 64)), ("gfx950", (9, 0x950, 64, 64)), ("gfx1201", (12, 0x1201, 32, 32)),
    ("gfx9-4-generic", (9, -94, 64, 64)), ("gfx11-generic", (11, -11, 32, 32)),
])
def test_a_named_target(cpu_cache, name, want):
    k, out = identity(cpu_cache, target=name, rocm_version="6.4")
    assert tuple(out[:4]) == want and out[4] == 604 and chr(out[6]) == name[3]
    assert k.target == name and k.warp_size == want[2]


@needs_cxx
def test_rdna_runs_wave64_when_asked_and_cdna_never_wave32(cpu_cache):
    k, out = identity(cpu_cache, target="gfx1100", warp_size=64)
    assert out[2:4] == [64, 64] and k.warp_size == 64
    with pytest.raises(rtc.KernelCompileError, match=r"target 'gfx90a' runs wave64, not warp_size=32"):
        identity(cpu_cache, target="gfx90a", warp_size=32)
    with pytest.raises(rtc.KernelCompileError, match=r"target='sm_90' is not an AMD target"):
        identity(cpu_cache, target="sm_90")
    with pytest.raises(rtc.KernelCompileError, match=r"rocm_version='seven' is not a ROCm version"):
        identity(cpu_cache, rocm_version="seven")


STATIC_ASSERT = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void wave(int* out) {
    static_assert(warpSize == __AMDGCN_WAVEFRONT_SIZE, "a constant before ROCm 7");  // CONSTANT-WARPSIZE
    out[threadIdx.x] = warpSize;
}
"""


@needs_cxx
@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_warpsize_is_a_constant_expression_only_before_rocm_7(cpu_cache, warp, check):
    out = np.zeros(4, np.int32)
    rtc.compile_kernel(STATIC_ASSERT, "wave", arch="cpu", warp_size=warp, check=check, rocm_version="6.4",
                       cache_dir=cpu_cache)(1, 4, out)
    assert out.tolist() == [warp] * 4
    with pytest.raises(rtc.KernelCompileError) as info:
        rtc.compile_kernel(STATIC_ASSERT, "wave", arch="cpu", warp_size=warp, check=check, rocm_version="7.0",
                           cache_dir=cpu_cache)
    msg = str(info.value)
    assert "<source>.hip:4" in msg and "stands for ROCm 7.0.0, where warpSize is no constant expression" in msg
    assert "rocm_version='6.4'" in msg and "gpuenv_cpu_rocm_version" in msg


BIG_SHARED = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void big(float* out) {
    __shared__ float tile[24 * 1024];  // 96 KiB: more than 64 KiB of LDS, within gfx950's 160 KiB
    for (int i = threadIdx.x; i < 24 * 1024; i += blockDim.x) tile[i] = (float)i;
    __syncthreads();
    out[threadIdx.x] = tile[24 * 1024 - 1 - threadIdx.x];
}
"""


@needs_cxx
@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_the_shared_memory_limit_is_the_targets(cpu_cache, check):
    out = np.zeros(64, np.float32)
    k = rtc.compile_kernel(BIG_SHARED, "big", arch="cpu", target="gfx950", check=check, cache_dir=cpu_cache)
    k(1, 64, out)
    np.testing.assert_array_equal(out, 24 * 1024 - 1 - np.arange(64))
    assert k.shared_limit == 160 * 1024
    with pytest.raises(rtc.KernelCompileError, match=r"98304 bytes of static __shared__ memory .* 65536-byte "
                                                     r"\(64 KiB\) limit of a block on gfx942"):
        rtc.compile_kernel(BIG_SHARED, "big", arch="cpu", target="gfx942", check=check, cache_dir=cpu_cache)


DYN = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void dyn(float* out, int n) {
    extern __shared__ float s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)i;
    __syncthreads();
    out[threadIdx.x] = s[n - 1 - threadIdx.x];
}
"""


@needs_cxx
def test_dynamic_shared_memory_up_to_the_targets_limit(cpu_cache):
    n = 40 * 1024  # 160 KiB
    out = np.zeros(64, np.float32)
    rtc.compile_kernel(DYN, "dyn", arch="cpu", target="gfx950", cache_dir=cpu_cache)(1, 64, out, n, shared_mem=4 * n)
    np.testing.assert_array_equal(out, n - 1 - np.arange(64))
    k = rtc.compile_kernel(DYN, "dyn", arch="cpu", target="gfx90a", cache_dir=cpu_cache)
    with pytest.raises(TypeError, match=r"shared_mem must be an int of bytes in 0\.\.65536 .* on gfx90a"):
        k(1, 64, out, n, shared_mem=4 * n)


# ------------------------------------------------------------------ generic targets wherever an arch is accepted
@pytest.mark.parametrize("name", GENERIC)
def test_generic_targets_are_known(name):
    assert compilers.check_arch(name) == name and compilers.check_arch(name + ":xnack-") == name + ":xnack-"
    row = capabilities.row(name)
    assert row is not None and row.waves == ((64,) if name.startswith("gfx9") else (32, 64))
    assert ArchPattern.parse(name).matches(name) and ArchPattern.parse("gfx9*").matches("gfx9-4-generic")
    assert target.check_target(name) == name


def test_generic_targets_in_the_compile_archs_option():
    from pytest_gpuenv.session.options import parse_arch_list

    assert parse_arch_list("gfx9-4-generic, gfx11-generic", "ini") == ["gfx9-4-generic", "gfx11-generic"]


def test_a_generic_target_has_what_all_its_processors_have():
    """gfx9-4-generic covers gfx940-gfx950 and has no FP8 or XF32 (LLVM AMDGPUUsage, generic processors)."""
    row = capabilities.row("gfx9-4-generic")
    assert row is not None and row.fp8 == () and row.tf32 is None and row.matrix == "MFMA"


@pytest.mark.parametrize("warp, archs, want", [
    (64, ["gfx942"], "gfx942"), (32, ["gfx942"], "gfx1100"), (32, ["gfx1201", "gfx942"], "gfx1201"),
    (64, ["gfx1100"], "gfx1100"), (64, [], "gfx90a"), (32, [None, "sm_90"], "gfx1100"),
    (64, ["gfx942:sramecc+:xnack-"], "gfx942"), (64, ["gfx9-4-generic"], "gfx9-4-generic"),
])
def test_the_fixtures_default_target(warp, archs, want):
    assert target.default_target(warp, archs) == want


# ------------------------------------------------------------------ through the fixture
FIXTURE_TEST = """\
import numpy as np

def run(k):
    out = np.zeros(7, np.int32)
    k(1, 1, out)
    return out.tolist()

def test_default(hip_kernel, request):
    out = run(hip_kernel("identity.hip", "identity"))
    wave = 64 if "wave64" in request.node.name else 32
    assert out[2] == wave and out[:2] == ([9, 0x942] if wave == 64 else [11, 0x1100])
    assert out[4] == {rocm}

def test_named(hip_kernel):
    out = run(hip_kernel("identity.hip", "identity", target="gfx950", rocm_version="6.4"))
    assert out[1] == 0x950 and out[4] == 604
"""


@needs_cxx
@pytest.mark.slow
def test_the_fixture_takes_target_and_rocm_version(pytester, tmp_path_factory, monkeypatch):
    (pytester.path / "kernels").mkdir()
    (pytester.path / "kernels" / "identity.hip").write_text(IDENTITY)
    pytester.makeini("[pytest]\ngpuenv_compile_archs = gfx942\ngpuenv_cpu_rocm_version = 6.3\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    if not plugin_installed():  # a checkout on sys.path without `pip install -e .`
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    installed = target.detected_rocm()  # the installed ROCm's version comes before the ini's
    rocm = target.parse_rocm(installed) if installed else (6, 3, 0)
    pytester.makepyfile(test_identity=FIXTURE_TEST.format(rocm=rocm[0] * 100 + rocm[1]))
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-v", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * hip_kernel: target 'gfx950' runs wave64, not this test's wave32"])
