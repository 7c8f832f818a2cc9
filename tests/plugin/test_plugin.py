"""The plugin end to end through pytester, on this machine (no GPU here, or in CI)."""

import json
import os

import pytest

GPU_SUITE = """
import pytest
from pytest_gpuenv import requires_rocm, requires_devices

@pytest.mark.requires_cuda
def test_cuda(): pass

@requires_rocm
def test_rocm(): pass

@pytest.mark.requires_gpu
def test_gpu(): pass

@requires_devices(2)
def test_two(): pass

@pytest.mark.requires_memory("16GiB")
def test_mem(): pass

def test_cpu(): pass
"""


def test_header_line(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["gpuenv: *"])
    result.assert_outcomes(passed=1)


def test_markers_are_registered_with_signatures(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.requires_gpu: *",
            "@pytest.mark.requires_memory(size): *",
            "@pytest.mark.requires_arch(*patterns): *",
            "@pytest.mark.skip_on(*conditions, reason=None): *",
            "@pytest.mark.xfail_on(*conditions, reason=None, strict=False): *",
            "@pytest.mark.perf: *",
        ]
    )


def test_strict_markers_accept_gpu_markers(pytester):
    pytester.makepyfile(GPU_SUITE)
    result = pytester.runpytest("--strict-markers", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1, skipped=5)


def test_help_lists_the_option_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*GPU environment (pytest-gpuenv)*", "*--gpuenv-backend=auto|cpu|cuda|rocm*",
                                 "*--gpuenv-devices=best|all|gpu|cpu*", "*gpuenv_backend (string)*"])


def test_cpu_runner_skips_gpu_tests_with_reasons_and_groups_them(pytester):
    pytester.makepyfile(GPU_SUITE)
    result = pytester.runpytest("-rs", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(
        [
            "*gpuenv: hardware skips*",
            "5 test(s) skipped for hardware reasons:",
            "*5  backend-option*--gpuenv-backend=cpu",
            "SKIPPED [[]1[]] test_cpu_runner_skips_gpu_tests_with_reasons_and_groups_them.py:*: "
            "requires CUDA: GPUs hidden by --gpuenv-backend=cpu",
        ]
    )


def test_real_machine_skips_never_error(pytester):
    """On this machine (no GPU): GPU tests skip saying what was found; CPU tests run."""
    pytester.makepyfile(GPU_SUITE)
    result = pytester.runpytest("-rs")
    if any(line.startswith(("gpuenv: cuda, ", "gpuenv: rocm, ")) for line in result.stdout.lines):
        pytest.skip("this machine has a GPU")
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(["*requires CUDA: found *", "*requires ROCm: found *"])


def test_bad_marker_argument_errors_only_that_test(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.requires_memory("lots")
        def test_lots(): pass

        @pytest.mark.requires_devices(0)
        def test_zero(): pass

        @pytest.mark.requires_arch("sm_9x")
        def test_arch(): pass

        @pytest.mark.skip_on("beos")
        def test_cond(): pass

        def test_fine(): pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=4)
    result.stdout.fnmatch_lines(
        [
            "*invalid marker requires_memory('lots'): cannot parse size 'lots'*",
            "*invalid marker requires_devices(0): the number of GPUs must be an int >= 1, got 0*",
            "*invalid marker requires_arch('sm_9x'): invalid arch pattern 'sm_9x'*",
            "*invalid marker skip_on('beos'): unknown condition 'beos'*",
        ]
    )


@pytest.mark.parametrize(
    "args,ini,env,where",
    [
        (["--gpuenv-backend=metal"], None, None, "command line (--gpuenv-backend)"),
        ([], "gpuenv_backend = vulkan", None, "ini option gpuenv_backend in tox.ini"),
        ([], None, {"GPUENV_BACKEND": "opencl"}, "environment variable GPUENV_BACKEND"),
        (["--gpuenv-devices=tpu"], None, None, "command line (--gpuenv-devices)"),
        (["--gpuenv-perf=maybe"], None, None, "command line (--gpuenv-perf)"),
        (["--gpuenv-probe-timeout=-3"], None, None, "command line (--gpuenv-probe-timeout)"),
        (["--gpuenv-worker-gpus=two"], None, None, "command line (--gpuenv-worker-gpus)"),
        (["--gpuenv-compile-archs=gfx9x"], None, None, "command line (--gpuenv-compile-archs)"),
    ],
)
def test_bad_option_is_a_usage_error_naming_value_and_source(pytester, monkeypatch, args, ini, env, where):
    pytester.makepyfile("def test_a(): pass")
    if ini:
        pytester.makefile(".ini", tox=f"[pytest]\n{ini}\n")
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: *{where}*"])


def test_root_that_is_not_a_directory(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--gpuenv-root=/nonexistent/tree")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-root '/nonexistent/tree' from command line* is not a directory"])


def test_plugin_can_be_disabled(pytester):
    pytester.makepyfile("def test_a(gpu_env): pass")
    result = pytester.runpytest("-p", "no:gpuenv")
    result.assert_outcomes(errors=1)
    assert "gpuenv:" not in result.stdout.str()


def test_loads_with_autoload_off(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile("def test_a(gpu_env): assert gpu_env.schema == 1")
    result = pytester.runpytest_subprocess("-p", "gpuenv")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuenv: *"])


def test_xfail_on_cpu(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.xfail_on("cpu", reason="no kernels here")
        def test_x(): assert 0
        @pytest.mark.xfail_on("cuda", "rocm")
        def test_y(): pass
        """
    )
    result = pytester.runpytest("-rx", "--gpuenv-backend=cpu")
    result.assert_outcomes(xfailed=1, passed=1)
    result.stdout.fnmatch_lines(["*xfail_on('cpu'): expected to fail here, found no GPU (--gpuenv-backend=cpu): no kernels here"])


def test_markeval_namespace(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.skipif("gpuenv.backend == 'cpu'", reason="needs a GPU backend")
        def test_a(): pass
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu")
    result.assert_outcomes(skipped=1)


def test_gpu_device_skips_without_gpu(pytester):
    pytester.makepyfile("def test_a(gpu_device): pass")
    result = pytester.runpytest("-rs", "--gpuenv-backend=cpu")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*gpu_device requires a usable GPU: found no GPU (--gpuenv-backend=cpu)*"])


@pytest.mark.slow
def test_torch_device_param_ids(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(
        """
        def test_dev(torch_device):
            assert torch_device.type == "cpu"
        """
    )
    result = pytester.runpytest_subprocess("-v", "--gpuenv-backend=cpu", "--gpuenv-devices=all")
    result.stdout.fnmatch_lines(["*test_dev[[]cpu[]] PASSED*"])
    result = pytester.runpytest_subprocess("-v", "--gpuenv-backend=cpu", "--gpuenv-devices=gpu", "-rs")
    result.stdout.fnmatch_lines(["*test_dev[[]gpu-none[]] SKIPPED*"])


def test_backend_cpu_hides_gpus_from_frameworks(pytester):
    pytester.makepyfile(
        """
        import os
        def test_env():
            assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
            assert os.environ.get("HIP_VISIBLE_DEVICES", "") == ""
        """
    )
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1)


def test_json_report(pytester):
    pytester.makepyfile(GPU_SUITE)
    result = pytester.runpytest("--gpuenv-backend=cpu", "--gpuenv-json=out/gpuenv.json")
    result.assert_outcomes(passed=1, skipped=5)
    data = json.loads((pytester.path / "out" / "gpuenv.json").read_text())
    assert data["environment"]["schema"] == 1
    assert data["environment"]["backend"] == "cpu"
    assert data["measurements"] == []
    assert len(data["skips"]) == 5


def test_ini_twin(pytester):
    pytester.makeini("[pytest]\ngpuenv_backend = cpu\n")
    pytester.makepyfile(GPU_SUITE)
    result = pytester.runpytest("-v")
    result.stdout.fnmatch_lines(["gpuenv: cpu (forced by --gpuenv-backend=cpu)*"])
    result.assert_outcomes(passed=1, skipped=5)


def test_collection_imports_no_torch(pytester):
    pytester.makepyfile(
        """
        import sys
        from pytest_gpuenv import requires_cuda

        @requires_cuda
        def test_a(): pass

        def test_no_heavy_imports():
            heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "cupy", "triton", "hip", "cuda")]
            assert heavy == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1, skipped=1) if os.path.exists("/proc/driver/nvidia") is False else None


def test_arch_not_in_build_skips_framework_tests_with_the_override_hint(pytester, gpu_roots, monkeypatch):
    """RX 6700 XT (gfx1031) with a torch ROCm wheel that has no gfx1031 code: ROCm tests skip with the
    community workaround; with HSA_OVERRIDE_GFX_VERSION=10.3.0 they run (effective arch gfx1030)."""
    # the machine's own masks (an xdist worker on the GPU machine runs with CUDA_VISIBLE_DEVICES=N) would
    # hide the tree's one GPU
    for var in ("HSA_OVERRIDE_GFX_VERSION", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    root = gpu_roots / "rx6700xt_unsupported_linux"
    pytester.makepyfile(
        """
        from pytest_gpuenv import requires_rocm, requires_arch
        @requires_rocm
        def test_rocm(): pass
        @requires_arch("gfx1030")
        def test_effective_arch(): pass
        """
    )
    result = pytester.runpytest(f"--gpuenv-root={root}", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*requires ROCm: GPU gfx1031 is not among the architectures*HSA_OVERRIDE_GFX_VERSION=10.3.0*"])
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    result = pytester.runpytest(f"--gpuenv-root={root}", "-rs")
    result.assert_outcomes(passed=2)
