"""Under --gpuenv-backend=cpu, GPU-only packages cannot be imported, as on a CPU runner."""

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
    if importlib.util.find_spec("pycuda") is None:  # as PyG's withPackage asks, with no try
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
        "*could not import 'cupy': import of cupy halted; None in sys.modules",
        "*cupyx unavailable: No module named 'cupyx.scipy'; 'cupyx' is not a package",
        "*pycuda unavailable",
    ])
    assert all(sys.modules.get(n, 0) is not None for n in DEFAULT_HIDDEN)  # taken out at unconfigure


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


def test_hidden_packages_look_absent_to_import_and_find_spec(monkeypatch):
    """``import`` raises ModuleNotFoundError and ``importlib.util.find_spec`` returns None, as for a package
    that is not installed; a hidden submodule leaves its parent alone; ``uninstall`` undoes it (a submodule of
    a hidden package: cupyx.scipy in the pytester run above)."""
    import importlib.util

    for name in ("json.tool", "email"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    hidden = HiddenModules(["email", "json.tool"])
    hidden.hide()
    try:
        for name in ("email", "json.tool"):
            assert importlib.util.find_spec(name) is None
            with pytest.raises(ModuleNotFoundError):
                importlib.import_module(name)
        assert importlib.import_module("json") is not None
    finally:
        hidden.uninstall()
    assert importlib.util.find_spec("email") is not None and importlib.import_module("json.tool") is not None


def test_default_list_is_gpu_only_packages():
    assert {"cupy", "cupyx", "pycuda"} <= set(DEFAULT_HIDDEN)
    # these import and answer on a CPU-only runner, or this plugin uses them
    assert not {"torch", "numba", "numba.cuda", "cuda", "cuda.core", "cuda.bindings", "hip", "pynvml", "triton",
                "jax"} & set(DEFAULT_HIDDEN)
