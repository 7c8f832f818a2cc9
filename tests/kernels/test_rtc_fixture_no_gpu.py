"""The ``hip_kernel`` fixture as a new user meets it without a GPU: an arch the local compiler does not know is
a skip-with-reason of that compile check; in ``run`` mode the kernel is also compile-checked for a GPU arch that
hiprtc or NVRTC knows here (host-only code such as ``std::vector`` fails there, not inside the CPU executor);
a relative kernel path is found beside the test file wherever pytest was started. Real compilers (Debian 12's
ROCm 5.2 hiprtc, NVRTC): each test skips where the compiler it needs is missing."""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import REPO

from pytest_gpuenv.rtc import compilers as _compilers

#: an arch name of valid form that no compiler knows
NO_SUCH_ARCH = "gfx9ff"
#: host-only code in a kernel: g++ takes it, hiprtc and NVRTC do not
HOST_ONLY = """#include <hip/hip_runtime.h>
#include <vector>
extern "C" __global__ void host_only(float* out, int n) {
    std::vector<float> v(4, 1.0f);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = v[i % 4];
}
"""


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("adoption-cache") / "cache")


@pytest.fixture
def project(pytester):
    shutil.copytree(os.path.join(REPO, "kernels"), pytester.path / "kernels")
    pytester.makeini("[pytest]\n")
    return pytester


def _amd_compiler() -> None:
    try:
        c = _compilers.for_arch("gfx90a")
    except Exception:
        pytest.skip(f"requires hiprtc or hipcc: looked for {_compilers.looked_for()}")
    if not c.supports("gfx90a"):
        pytest.skip(f"{c.name} here does not build gfx90a")


def _rtc() -> None:
    if not any(_compilers.get(n).available() for n in ("hiprtc", "nvrtc")):
        pytest.skip("requires hiprtc or NVRTC")


def test_an_arch_the_compiler_does_not_know_is_a_skip_with_reason(project, shared_cache):
    _amd_compiler()
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-rs",
                                          f"--gpuenv-cache-dir={shared_cache}",
                                          f"--gpuenv-compile-archs=gfx90a,{NO_SUCH_ARCH}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for gfx90a; {NO_SUCH_ARCH} (* does not know it; "
                                 "not compile-checked); no GPU to launch on"])


def test_in_run_mode_an_unknown_arch_is_a_warning_and_the_test_runs(project, shared_cache):
    _amd_compiler()
    project.makepyfile(test_va="""
        def test_va(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
    """)
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=run", "-W", "default",
                                          f"--gpuenv-cache-dir={shared_cache}",
                                          f"--gpuenv-compile-archs=gfx90a,{NO_SUCH_ARCH}")
    result.assert_outcomes(passed=2, warnings=1)  # wave64 and wave32; one warning for the arch
    result.stdout.fnmatch_lines([f"*UserWarning: hip_kernel: {NO_SUCH_ARCH} (* does not know it; not compile-checked)"])


def test_run_mode_compile_checks_for_a_gpu_arch(project, shared_cache):
    """``std::vector`` in a kernel: the host compiler builds it for the CPU executor, no GPU compiler does; the
    test fails with the GPU compiler's log, once per warp size, and a good kernel in the same run passes."""
    _rtc()
    (project.path / "kernels" / "host_only.hip").write_text(HOST_ONLY)
    project.makepyfile(test_k="""
        def test_good(hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
        def test_host_only(hip_kernel):
            hip_kernel("host_only.hip", "host_only")
    """)
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=run",
                                          f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*hip_kernel: compile check for * (the kernel would run on the CPU executor*",
                                 "*host_only.hip:*"])
    assert "KernelBoundsError" not in result.stdout.str()


def _any_arch() -> str:
    for arch in ("sm_90", "gfx90a"):
        try:
            if _compilers.for_arch(arch).supports(arch):
                return arch
        except Exception:
            continue
    pytest.skip(f"requires a HIP compiler: looked for {_compilers.looked_for()}")


def test_kernel_beside_the_tests_is_found_from_anywhere(pytester, shared_cache, monkeypatch):
    """No ini file; pytest started from another folder: ``kernels/`` beside the test file (and a kernel in a
    parent's ``kernels/`` up to the rootdir) is found."""
    tests = pytester.path / "proj" / "tests"
    (tests / "kernels").mkdir(parents=True)
    (tests / "unit").mkdir()
    shutil.copy(os.path.join(REPO, "kernels", "vector_add.hip"), tests / "kernels" / "beside.hip")
    (tests / "unit" / "kernels").mkdir()
    shutil.copy(os.path.join(REPO, "kernels", "vector_add.hip"), tests / "unit" / "kernels" / "nested.hip")
    (tests / "unit" / "test_k.py").write_text(
        "def test_beside(hip_kernel):\n    hip_kernel('beside.hip', 'vector_add')\n"
        "def test_nested(hip_kernel):\n    hip_kernel('nested.hip', 'vector_add')\n"
    )
    arch = _any_arch()
    elsewhere = pytester.path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = pytester.runpytest_subprocess(str(tests), "--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-rs",
                                           f"--gpuenv-compile-archs={arch}", f"--gpuenv-cache-dir={shared_cache}",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for {arch}; no GPU to launch on"] * 2)


def test_run_mode_reads_and_parses_the_source_once(project, shared_cache):
    """The GPU compile check and the CPU executor's build of one ``hip_kernel`` call share one Source: the file
    is read once and its comments are stripped once."""
    if shutil.which("g++") is None and shutil.which("clang++") is None:
        pytest.skip("requires a C++ compiler")
    project.makeconftest("""
        import pytest
        from pytest_gpuenv.rtc import source

        @pytest.fixture(autouse=True)
        def parsed(monkeypatch):
            text = open("kernels/vector_add.hip").read()
            counts = {"loads": 0, "strips": 0}
            load, strip = source.load_source, source.strip_comments

            def counted_load(*args, **kwargs):
                counts["loads"] += 1
                return load(*args, **kwargs)

            def counted_strip(t):
                counts["strips"] += t == text
                return strip(t)

            for where in ("pytest_gpuenv.fixtures.kernel", "pytest_gpuenv.rtc.kernel"):
                monkeypatch.setattr(f"{where}.load_source", counted_load)
            monkeypatch.setattr(source, "strip_comments", counted_strip)
            return counts
    """)
    project.makepyfile(test_va="""
        def test_va(parsed, hip_kernel):
            hip_kernel("vector_add.hip", "vector_add")
            assert parsed == {"loads": 1, "strips": 1}
    """)
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=run",
                                          f"--gpuenv-cache-dir={shared_cache}")
    result.assert_outcomes(passed=2)  # wave64 and wave32


def test_compile_only_skips_are_counted_as_hardware_skips(project, shared_cache):
    """Each ``hip_kernel`` test that only compiles for want of a GPU counts in the summary, as a marker's skip does
    (with ``--gpuenv-kernels=off`` the skip is the option's, not counted: tests/plugin/test_runtest_hooks.py)."""
    _amd_compiler()
    project.makepyfile(test_va="""
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_va(hip_kernel, i):
            hip_kernel("vector_add.hip", "vector_add")

        @pytest.mark.requires_gpu
        def test_marked():
            pass
    """)
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-rs",
                                          f"--gpuenv-cache-dir={shared_cache}", "--gpuenv-compile-archs=gfx90a",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["4 test(s) skipped for hardware reasons:", "     4  backend-option --gpuenv-backend=cpu"])


@pytest.mark.parametrize("start", ["tests", "/"])
def test_kernels_beside_tests_are_found_up_to_the_project_root(pytester, shared_cache, monkeypatch, start):
    """A project with ``kernels/`` next to ``tests/``, no pytest configuration and no pyproject.toml, its root
    marked by ``.git``: run from ``tests/`` (the rootdir becomes ``tests/``) or from ``/``, the kernel is found."""
    arch = _any_arch()
    (pytester.path / ".git").mkdir()
    (pytester.path / "kernels").mkdir()
    shutil.copy(os.path.join(REPO, "kernels", "vector_add.hip"), pytester.path / "kernels" / "k.hip")
    tests = pytester.path / "tests"
    tests.mkdir()
    (tests / "test_k.py").write_text("def test_k(hip_kernel):\n    hip_kernel('k.hip', 'vector_add')\n")
    monkeypatch.chdir(tests if start == "tests" else "/")
    target = "test_k.py" if start == "tests" else str(tests / "test_k.py")
    result = pytester.runpytest_subprocess(target, "--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-rs",
                                           f"--gpuenv-compile-archs={arch}", f"--gpuenv-cache-dir={shared_cache}",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * compiled for {arch}; no GPU to launch on"])
