"""Under --gpuenv-backend=cpu, GPU-only packages cannot be imported, as on a CPU runner."""

import importlib
import sys

import pytest

from pytest_gpuenv.session.hide import DEFAULT_HIDDEN, HiddenModules

#: a published suite's way of gating its CuPy tests (the fake cupy imports fine, then fails like a real one
#: whose GPUs are hidden)
CUPY_SUITE = """
import pytest

def test_cupy_importorskip():
    cp = pytest.importorskip("cupy")
    cp.ones(3)

def test_cupyx_try_import():
    try:
        import cupyx.scipy.sparse  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cupyx unavailable: {exc}")

def test_find_spec_gate():
    import importlib.util
    try:
        found = importlib.util.find_spec("pycuda") is not None
    except ImportError:
        found = False
    if not found:
        pytest.skip("pycuda unavailable")
    import pycuda.autoinit  # noqa: F401

def test_numpy_still_there():
    import json  # any ordinary import works
"""


def _fake_gpu_packages(pytester):
    """cupy, cupyx(.scipy.sparse), pycuda(.autoinit) that import, then raise as without a device."""
    for pkg in ("cupy", "cupyx", "cupyx/scipy", "cupyx/scipy/sparse", "pycuda", "fakenumba", "labgpu"):
        pytester.mkpydir(pkg)
    (pytester.path / "cupy" / "__init__.py").write_text(
        "def ones(n):\n    raise RuntimeError('cudaErrorNoDevice: no CUDA-capable device is detected')\n")
    (pytester.path / "pycuda" / "autoinit.py").write_text("raise RuntimeError('cuInit failed: no device')\n")
    (pytester.path / "fakenumba" / "cuda.py").write_text("def is_available(): return False\n")


def test_gpu_only_packages_skip_as_on_a_cpu_runner(pytester):
    _fake_gpu_packages(pytester)
    pytester.makepyfile(test_cupy=CUPY_SUITE)
    result = pytester.runpytest("--gpuenv-backend=cpu", "-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "gpuenv: hidden from imports by --gpuenv-backend=cpu: cupy, cupyx, cupy_backends, pycuda, *",
        "*could not import 'cupy': No module named 'cupy' (hidden by --gpuenv-backend=cpu: a GPU-only package, "
        "absent on a CPU-only runner)",
        "*cupyx unavailable: No module named 'cupyx' (hidden by --gpuenv-backend=cpu*",
        "*pycuda unavailable",
    ])
    assert not any(isinstance(f, HiddenModules) for f in sys.meta_path)  # removed at unconfigure


def test_without_the_option_they_import_and_fail(pytester):
    """What the issue saw on the H200: the suite's gate passes, then the GPU call fails."""
    _fake_gpu_packages(pytester)
    pytester.makepyfile(test_cupy=CUPY_SUITE)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=2, failed=2)
    assert "hidden from imports" not in result.stdout.str()


def test_ini_adds_packages_and_submodules(pytester):
    _fake_gpu_packages(pytester)
    pytester.makeini("[pytest]\ngpuenv_hide_modules =\n    labgpu, fakenumba.cuda\n")
    pytester.makepyfile(
        """
        import pytest
        def test_lab(): pytest.importorskip("labgpu")
        def test_numba_cuda_hidden(): pytest.importorskip("fakenumba.cuda")
        def test_numba_itself():
            import fakenumba  # the parent package stays importable
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["gpuenv: hidden from imports by --gpuenv-backend=cpu: *, labgpu, fakenumba.cuda"])


def test_toml_list(pytester):
    _fake_gpu_packages(pytester)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ngpuenv_hide_modules = ["labgpu"]\n')
    pytester.makepyfile("import pytest\ndef test_lab(): pytest.importorskip('labgpu')\n")
    pytester.runpytest("--gpuenv-backend=cpu").assert_outcomes(skipped=1)


def test_bad_name_is_a_usage_error_naming_it(pytester):
    pytester.makeini("[pytest]\ngpuenv_hide_modules = cupy, ../evil\n")
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--gpuenv-backend=cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: invalid gpuenv_hide_modules entry '../evil' from ini option "
                                 "gpuenv_hide_modules in tox.ini; expected a module name such as cupy or numba.cuda"])


def test_a_package_imported_before_configure_is_left_and_named(pytester):
    _fake_gpu_packages(pytester)
    pytester.makeconftest("import cupy  # noqa: F401\n")
    pytester.makepyfile("def test_a():\n    import cupy\n    import cupyx\n")
    result = pytester.runpytest("--gpuenv-backend=cpu")
    result.assert_outcomes(failed=1)  # cupyx is still hidden
    result.stdout.fnmatch_lines(["gpuenv: hidden from imports by --gpuenv-backend=cpu: cupyx, *"
                                 "(already imported, so not hidden: cupy)"])


@pytest.mark.slow
def test_xdist_workers_hide_them_too(pytester):
    pytest.importorskip("xdist")
    _fake_gpu_packages(pytester)
    pytester.makepyfile(test_cupy=CUPY_SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "--gpuenv-backend=cpu", "-p", "no:randomly")
    result.assert_outcomes(passed=1, skipped=3)


def test_finder_raises_module_not_found_for_names_and_submodules(monkeypatch):
    finder = HiddenModules(["cupy", "numba.cuda"])
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    for name in ("cupy", "cupy.linalg", "numba.cuda", "numba.cuda.random"):
        with pytest.raises(ModuleNotFoundError, match="--gpuenv-backend=cpu") as info:
            finder.find_spec(name)
        assert info.value.name == name
    for name in ("cupyx_other", "numba", "numbacuda", "json"):
        assert finder.find_spec(name) is None
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("cupy")


def test_default_list_is_gpu_only_packages():
    assert {"cupy", "cupyx", "pycuda"} <= set(DEFAULT_HIDDEN)
    # these import and answer on a CPU-only runner, or this plugin uses them
    assert not {"torch", "numba", "numba.cuda", "cuda", "cuda.core", "cuda.bindings", "hip", "pynvml", "triton",
                "jax"} & set(DEFAULT_HIDDEN)
