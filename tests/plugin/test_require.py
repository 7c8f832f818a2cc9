"""--gpuenv-require stops a run whose GPU is gone, before any test, with exit code 4."""

import os

import pytest

SUITE = """
def test_a(): pass
def test_b(): pass
"""


@pytest.fixture(autouse=True)
def _no_masks(monkeypatch):
    """The machine's own masks (an xdist worker on the GPU machine runs with CUDA_VISIBLE_DEVICES=N) would
    hide the trees' GPUs; GPUENV_* from the caller would change the options."""
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
                "GPUENV_REQUIRE", "GPUENV_BACKEND", "GPUENV_ROOT"):
        monkeypatch.delenv(var, raising=False)


def _cpu_here():
    if os.path.exists("/dev/kfd") or os.path.exists("/proc/driver/nvidia"):
        pytest.skip("this machine has a GPU driver")


@pytest.mark.parametrize("want, label", [("gpu", "a GPU"), ("cuda", "CUDA"), ("rocm", "ROCm")])
def test_cpu_machine_stops_before_any_test(pytester, want, label):
    _cpu_here()
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-require={want}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    result.stderr.fnmatch_lines([
        f"ERROR: gpuenv: --gpuenv-require={want}: {label} is not usable here, so no test was run.",
        "  found: cpu, no GPU*",
        f"  requires {label}: found no GPU*",
    ])
    assert "passed" not in result.stdout.str()


def test_env_variable_and_ini_twin(pytester, monkeypatch):
    _cpu_here()
    pytester.makepyfile(SUITE)
    pytester.makeini("[pytest]\ngpuenv_require = gpu\n")
    result = pytester.runpytest()
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-require=gpu: *"])
    # the command line wins over the ini file: off runs the tests
    result = pytester.runpytest("--gpuenv-require=off")
    result.assert_outcomes(passed=2)
    monkeypatch.setenv("GPUENV_REQUIRE", "off")
    pytester.runpytest().assert_outcomes(passed=2)


def test_bad_value_names_its_source(pytester, monkeypatch):
    pytester.makepyfile(SUITE)
    monkeypatch.setenv("GPUENV_REQUIRE", "vulkan")
    result = pytester.runpytest()
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: gpuenv: invalid --gpuenv-require value 'vulkan' from environment variable "
                                 "GPUENV_REQUIRE; expected one of: off, gpu, cuda, rocm"])


def test_collect_only_is_not_stopped(pytester):
    """Nothing runs under --collect-only (a CPU controller's --gpuenv-plan, an IDE's collection)."""
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("--gpuenv-require=cuda", "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["2 tests collected*"])
    result = pytester.runpytest("--gpuenv-require=cuda", "--fixtures")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*gpu_env*"])


@pytest.mark.parametrize("tree, want", [("mi300x_linux", "rocm"), ("mi300x_linux", "gpu"), ("h100_linux", "cuda"),
                                        ("h100_linux", "gpu")])
def test_machine_trees_with_the_backend_run(pytester, gpu_roots, tree, want):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-root={gpu_roots / tree}", f"--gpuenv-require={want}")
    result.assert_outcomes(passed=2)


def test_wrong_vendor_tree_says_what_was_found(pytester, gpu_roots):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-root={gpu_roots / 'mi300x_linux'}", "--gpuenv-require=cuda")
    assert result.ret == 4
    result.stderr.fnmatch_lines([
        "ERROR: gpuenv: --gpuenv-require=cuda: CUDA is not usable here, so no test was run.",
        "  found: rocm, 2x AMD Instinct MI300X*",
        "  requires CUDA: found ROCm (2x AMD Instinct MI300X*",
    ])


def test_container_without_devices_names_the_problem_and_its_fix(pytester, gpu_roots):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-root={gpu_roots / 'rocm_container_missing_devices'}",
                                "--gpuenv-require=rocm")
    assert result.ret == 4
    result.stderr.fnmatch_lines([
        "*found: cpu*MI300X*(not usable)*",
        "*requires ROCm: found *present but not usable*[[]kfd-missing-in-container[]]; fix: start the container "
        "with `--device /dev/kfd --device /dev/dri`*",
    ])
    assert result.stderr.str().count("kfd-missing-in-container") == 1  # named once, with its fix


def test_installed_rocm_without_a_gpu_lists_the_note(pytester, gpu_roots):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-root={gpu_roots / 'rocm_installed_no_gpu'}", "--gpuenv-require=gpu")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*requires a GPU: found no GPU*", "  [[]rocm-installed-no-driver[]] *; fix: *"])


def test_backend_cpu_contradicts_require(pytester, gpu_roots):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(f"--gpuenv-root={gpu_roots / 'mi300x_linux'}", "--gpuenv-backend=cpu",
                                "--gpuenv-require=gpu")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*requires a GPU: GPUs hidden by --gpuenv-backend=cpu*"])


def test_stops_before_xdist_workers_start(pytester):
    pytest.importorskip("xdist")
    _cpu_here()
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "--gpuenv-require=gpu", "-p", "no:randomly")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-require=gpu: a GPU is not usable here*"])
    assert "workers" not in result.stdout.str()
