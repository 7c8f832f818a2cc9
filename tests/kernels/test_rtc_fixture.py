"""The ``hip_kernel`` fixture through pytest itself (pytester), on this CPU machine and on a GPU.

GPU tests carry ``requires_cuda``: they skip on CPU CI and, on the GPU machine, run their inner
suite in a subprocess (``runpytest_subprocess``) so the CUDA context, and any fault in it, stays there.
"""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import REPO, plugin_installed

from pytest_gpuenv import requires_cuda
from pytest_gpuenv.rtc import compilers
from pytest_gpuenv.runtime import sticky
from pytest_gpuenv.runtime._common import launch_error


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One compile cache for this module's inner runs (each kernel builds once)."""
    return str(tmp_path_factory.mktemp("rtc-cache") / "cache")


@pytest.fixture
def project(pytester, shared_cache, monkeypatch):
    shutil.copytree(os.path.join(REPO, "kernels"), pytester.path / "kernels")
    pytester.makeini("[pytest]\n")
    # these tests are about the compile-only path (and the GPU path on the GPU machine); the CPU executor,
    # the default on a runner without a GPU, has its own tests (test_cpu_exec*.py)
    monkeypatch.setenv("GPUENV_KERNELS", "compile")
    if not plugin_installed():  # a checkout on sys.path without `pip install -e .`
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    return pytester


def installed_archs(*archs: str) -> list[str]:
    out = []
    for a in archs:
        try:
            c = compilers.for_arch(a)
        except Exception:
            continue
        if c.supports(a):
            out.append(a)
    if not out:
        pytest.skip(f"requires a HIP compiler for one of {archs}: looked for {compilers.looked_for()}")
    return out


CPU = ("--gpuenv-backend=cpu",)


def test_compiles_for_each_arch_then_skips(project, shared_cache):
    archs = installed_archs("gfx90a", "gfx1030", "sm_90")
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
            raise AssertionError("not reached without a GPU")
    """)
    result = project.runpytest_subprocess(*CPU, "-rs", f"--gpuenv-cache-dir={shared_cache}",
                                          f"--gpuenv-compile-archs={','.join(archs)}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for {', '.join(archs)}; no GPU to launch on"])


def test_compile_archs_from_ini(project, shared_cache):
    arch = installed_archs("sm_90", "gfx90a")[0]
    project.makeini(f"[pytest]\ngpuenv_compile_archs = {arch}\n")
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("matmul_tiled.hip", "matmul_tiled")
    """)
    result = project.runpytest_subprocess(*CPU, "-rs", f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for {arch}; no GPU to launch on"])


def test_default_archs_are_what_the_compilers_support(project, shared_cache):
    installed_archs("gfx90a", "sm_90")
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("reduce_sum.hip", "reduce_sum")
    """)
    result = project.runpytest_subprocess(*CPU, "-rs", f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(skipped=1)
    expect = ", ".join(compilers.default_archs(shared_cache))
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for {expect}; no GPU to launch on"])


def test_broken_kernel_fails_on_cpu_runner_and_the_run_goes_on(project, shared_cache):
    archs = installed_archs("gfx90a", "sm_90")
    (project.path / "kernels" / "broken.hip").write_text(
        '#include <hip/hip_runtime.h>\nextern "C" __global__ void broken(float* o) {\n    o[0] = undefined_value;\n}\n'
    )
    project.makepyfile(test_k="""
        def test_broken(hip_kernel):
            hip_kernel("broken.hip", "broken")

        def test_missing_file(hip_kernel):
            hip_kernel("no_such.hip", "k")

        def test_unknown_kernel(hip_kernel):
            hip_kernel("vector_add.hip", "vector_sub")

        def test_bad_option(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add", blocksize=3)

        def test_ok(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest_subprocess(*CPU, "-rsf", f"--gpuenv-cache-dir={shared_cache}",
                                          f"--gpuenv-compile-archs={','.join(archs)}")
    result.assert_outcomes(failed=4, skipped=1)
    broken = str(project.path / "kernels" / "broken.hip")
    result.stdout.fnmatch_lines([
        f"hip_kernel: {broken}:3: *undefined_value*",
        "*kernel file 'no_such.hip' not found (searched: *kernels/no_such.hip*",
        "*kernel 'vector_sub' not found in *vector_add.hip (__global__ kernels there: vector_add)*",
        "*hip_kernel() got unexpected options ?'blocksize'?*",
    ])
    if len(archs) > 1:
        result.stdout.fnmatch_lines([f"(also failed for {', '.join(archs[1:])})"])


def test_no_compiler_skips_naming_what_it_looked_for(project, monkeypatch, shared_cache):
    for cls in (compilers.Hiprtc, compilers.Hipcc, compilers.Nvrtc, compilers.Nvcc):
        monkeypatch.setattr(cls, "available", lambda self: False)
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest(*CPU, "-rs", f"--gpuenv-cache-dir={shared_cache}", "-p", "no:cacheprovider",
                               "-p", "no:benchmark")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "SKIPPED * hip_kernel requires a GPU or a HIP compiler: found no GPU*, and none of "
        "hiprtc (libhiprtc.so, libamdhip64.so), hipcc, NVRTC (cuda.bindings.nvrtc), nvcc"
    ])


def test_unsafe_cache_dir_fails_with_the_reason(project, tmp_path):
    installed_archs("sm_90", "gfx90a")
    bad = tmp_path / "shared-cache"
    bad.mkdir()
    os.chmod(bad, 0o777)
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest_subprocess(*CPU, f"--gpuenv-cache-dir={bad}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*refusing the compile cache *shared-cache: it is writable by group and others*"])


def test_poisoned_context_later_users_skip_naming_the_culprit(project, shared_cache):
    project.makepyfile(test_p="""
        from pytest_gpuenv.runtime._common import launch_error

        def test_fault(hip_kernel):
            # what a real fault records (see test_gpu_fault_poisons_then_explains)
            err = launch_error("cuda", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered",
                               "kernel execution (cuStreamSynchronize)")
            assert err.sticky and err.code == "CUDA_ERROR_ILLEGAL_ADDRESS"
            raise err

        def test_after(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest_subprocess(*CPU, "-rsf", f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*KernelLaunchError: kernel execution (cuStreamSynchronize): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal*",
        "SKIPPED * CUDA context poisoned by test_p.py::test_fault (CUDA_ERROR_ILLEGAL_ADDRESS); *subprocess*",
    ])


def test_context_found_broken_does_not_blame_the_finder(no_poison):
    with sticky.running("t.py::test_victim"):
        launch_error("cuda", "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered",
                     "cuModuleLoadData")
    poison = sticky.poisoned("cuda")
    assert poison is not None and poison.reason().startswith(
        "CUDA context found poisoned in t.py::test_victim (by GPU work in or before it) (CUDA_ERROR_ILLEGAL_ADDRESS)"
    )


def test_non_sticky_errors_do_not_poison(no_poison):
    err = launch_error("cuda", "CUDA_ERROR_INVALID_VALUE", "invalid argument", "cuLaunchKernel")
    assert not err.sticky and sticky.poisoned() is None
    assert str(err) == "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE: invalid argument"


# ---------------------------------------------------------------------------------------- on a GPU
GPU_SUITE = '''
import pytest
import torch

from pytest_gpuenv.rtc import KernelLaunchError


def test_compiled_for_this_device(hip_kernel, gpu_device):
    k = hip_kernel("vector_add.hip", "vector_add")
    assert (k.arch, k.backend, k.device) == (gpu_device.arch, "cuda", gpu_device.index)
    assert k.compiler in ("nvrtc", "nvcc")


def test_cpu_tensor_is_refused_before_launch(hip_kernel):
    k = hip_kernel("vector_add.hip", "vector_add")
    a = torch.rand(8, device="cuda")
    with pytest.raises(TypeError, match=r"argument 'b' .* is a tensor on the CPU"):
        k(1, 8, a, a, torch.rand(8), 8)


def test_launches_on_torch_current_stream(hip_kernel):
    k = hip_kernel("vector_add.hip", "vector_add")
    n = 1 << 20
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.rand(n, device="cuda")
        b = torch.rand(n, device="cuda")
        out = torch.empty_like(a)
        k((n + 255) // 256, 256, out, a, b, n)
        torch.testing.assert_close(out, a + b)


def test_hip_spellings_and_half(hip_kernel):
    src = """
    #include <hip/hip_runtime.h>
    extern "C" __global__ void warp_sum(float* out, const float* in) {
        float v = in[hipThreadIdx_x];
        for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_xor(v, o);
        out[hipThreadIdx_x] = v;
    }
    """
    k = hip_kernel(src, "warp_sum")
    x = torch.arange(32, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    k(1, 32, out, x)
    torch.testing.assert_close(out, torch.full_like(x, float(x.sum())))
'''

FAULT_SUITE = '''
import torch

FAULT = """
extern "C" __global__ void fault(float* p, long long offset) { p[offset] = 1.0f; }
"""


def test_fault(hip_kernel):
    k = hip_kernel(FAULT, "fault")
    x = torch.zeros(4, device="cuda")
    k(1, 1, x, 1 << 40)  # far outside any allocation


def test_after_fault(hip_kernel):
    hip_kernel("vector_add.hip", "vector_add")
'''


@requires_cuda
def test_gpu_kernels_match_torch(project, shared_cache):
    pytest.importorskip("torch")
    shutil.copy(os.path.join(REPO, "examples", "test_kernels_example.py"), project.path / "test_examples.py")
    project.makepyfile(test_gpu=GPU_SUITE)
    result = project.runpytest_subprocess("-rsf", "-v", f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(passed=13)


@requires_cuda
def test_gpu_fault_poisons_then_explains(project, shared_cache):
    pytest.importorskip("torch")
    project.makepyfile(test_fault=FAULT_SUITE)
    result = project.runpytest_subprocess("-rsf", f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*KernelLaunchError: kernel execution (cuStreamSynchronize): CUDA_ERROR_ILLEGAL_ADDRESS: *",
        "SKIPPED * CUDA context poisoned by test_fault.py::test_fault (CUDA_ERROR_ILLEGAL_ADDRESS)*",
    ])
