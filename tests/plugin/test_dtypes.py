"""``@gpu_dtypes``: the parametrization (ids, torch dtypes), the skips per device from the capability table on
AMD machine trees of several families and on a CPU runner, a bad mark erroring its test alone, and
``gpu_assert_close`` taking the test's dtype as its profile."""

from __future__ import annotations

import pytest
from _machines import amd_machine

from pytest_gpuenv.base import capabilities
from pytest_gpuenv.base.model import Device, GpuEnv
from pytest_gpuenv.marks import dtypes

#: gfx_target_version (KFD topology) and wave size of each AMD family's tree
AMD = {"gfx90a": (90010, 64), "gfx942": (90402, 64), "gfx950": (90500, 64), "gfx1030": (100300, 32)}

MODULE = """
import pytest

@pytest.mark.gpu_dtypes("float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float32", "float64",
                        fp64_full=True)
def test_dtype(dtype):
    assert isinstance(dtype, str)  # the module does not import torch: the names

def test_plain():
    pass
"""

#: arch -> the dtypes of MODULE its tree skips, with the capability named in the reason
SKIPPED = {
    "gfx90a": {"float8_e4m3fn": "fp8_ocp", "float8_e4m3fnuz": "fp8_fnuz"},
    "gfx942": {"float8_e4m3fn": "fp8_ocp"},
    "gfx950": {"float8_e4m3fnuz": "fp8_fnuz"},
    "gfx1030": {"bfloat16": "bf16", "float8_e4m3fn": "fp8_ocp", "float8_e4m3fnuz": "fp8_fnuz", "float64": "fp64_full"},
    "cpu": {},
}


@pytest.mark.parametrize("arch", sorted(SKIPPED))
def test_skips_per_device(pytester, tmp_path, arch):
    version, wave = AMD.get(arch, AMD["gfx942"])
    amd_machine(tmp_path / "m", 1, gfx_target_version=version, wave=wave)
    pytester.makepyfile(MODULE)
    args = [f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never", "-p", "no:xdist", "-rs", "-v"]
    result = pytester.runpytest_subprocess(*args, *(["--gpuenv-backend=cpu"] if arch == "cpu" else []))
    skipped = SKIPPED[arch]
    result.assert_outcomes(passed=7 - len(skipped), skipped=len(skipped))
    for name in ("float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float32", "float64"):
        outcome = "SKIPPED" if name in skipped else "PASSED"
        result.stdout.fnmatch_lines([f"*::test_dtype[[]{name}[]] {outcome}*"])
    for cap in skipped.values():  # the reason is the capability table's
        why = capabilities.lacks(Device(index=0, vendor="amd", arch=arch), capabilities.parse(cap), GpuEnv())
        result.stdout.fnmatch_lines([f"SKIPPED*requires {cap}: {why}"])
    if skipped:  # counted with the hardware skips, by capability
        result.stdout.fnmatch_lines(["*gpuenv: hardware skips*", f"{len(skipped)} test(s) skipped for hardware reasons:"])


def test_a_cpu_torch_device_runs_every_dtype(pytester, tmp_path):
    """With --gpuenv-devices=all the cuda:0 item of a dtype the GPU lacks skips; the cpu item runs."""
    pytest.importorskip("torch")
    amd_machine(tmp_path / "m", 1, gfx_target_version=100300, wave=32)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu_dtypes("bfloat16")
        def test_x(dtype, torch_device):
            pass
    """)
    result = pytester.runpytest_subprocess(f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never", "-p", "no:xdist",
                                           "--gpuenv-devices=all", "-v")
    result.stdout.fnmatch_lines(["*test_x[[]bfloat16-cpu[]] PASSED*", "*test_x[[]bfloat16-cuda:0[]] SKIPPED*"])


def test_bad_marks_error_their_test_alone(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu_dtypes("float17")
        def test_unknown(dtype):
            pass

        @pytest.mark.gpu_dtypes("float16", fp64_full="yes")
        def test_option(dtype):
            pass

        @pytest.mark.gpu_dtypes("float16")
        def test_no_argument():
            pass

        @pytest.mark.gpu_dtypes("half", "float16")
        def test_twice(dtype):
            pass

        @pytest.mark.gpu_dtypes("half", "bf16")
        def test_aliases(dtype):
            assert dtype in ("float16", "bfloat16")

        def test_plain():
            pass
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:xdist", "-v")
    result.assert_outcomes(passed=3, errors=4)
    result.stdout.fnmatch_lines_random([
        "*invalid marker gpu_dtypes('float17'): unknown dtype 'float17'*",
        "*invalid marker gpu_dtypes('float16', fp64_full='yes'): fp64_full must be True or False*",
        "*@gpu_dtypes parametrizes the test's 'dtype' argument, which test_no_argument does not take*",
        "*invalid marker gpu_dtypes('half', 'float16'): dtype float16 is given twice*",
        "*test_aliases[[]float16[]] PASSED*", "*test_aliases[[]bfloat16[]] PASSED*",
    ])


def test_names_without_torch_imported():
    spec = dtypes.parse(("float16", "torch.bfloat16"), {})
    assert spec.names == ("float16", "bfloat16") and spec.capability("bfloat16") == "bf16"
    assert dtypes.parse(("float64",), {"fp64_full": True}).capability("float64") == "fp64_full"
    assert dtypes.parse(("float64",), {}).capability("float64") is None
    assert set(filter(None, dtypes.CAPABILITY.values())) <= set(capabilities.NAMES)


def test_gpu_assert_close_takes_the_tests_dtype(pytester):
    """A bfloat16 result compared as float32 keeps bfloat16's tolerance (rtol 1.6e-2); float32's fails it. The
    module imports torch, so ``dtype`` is a ``torch.dtype``."""
    pytest.importorskip("torch")
    pytester.makepyfile("""
        import pytest
        import torch

        @pytest.mark.gpu_dtypes("bfloat16", "float32")
        def test_close(dtype, gpu_assert_close):
            assert isinstance(dtype, torch.dtype)  # the module imports torch: torch dtypes
            x = torch.linspace(1, 2, 100)
            gpu_assert_close(x * (1 + 4e-3), x)

        @pytest.mark.gpu_dtypes("bfloat16")
        def test_explicit(dtype, gpu_assert_close):
            x = torch.linspace(1, 2, 100)
            gpu_assert_close(x * (1 + 4e-3), x, dtype="float32")
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:xdist", "-v")
    result.stdout.fnmatch_lines_random(["*test_close[[]bfloat16[]] PASSED*", "*test_close[[]float32[]] FAILED*",
                                        "*test_explicit[[]bfloat16[]] FAILED*"])
    result.stdout.fnmatch_lines(["*profile float32 on cpu*"])


def test_collection_reads_the_marks_of_marked_tests_only(pytester, monkeypatch):
    """Most suites carry no ``gpu_dtypes`` mark: the collection pass then reads no test's marks for it, and in a
    suite that has one, only the marked function's items (what ``parametrize`` saw)."""
    asked = []
    real = pytest.Item.get_closest_marker

    def spy(self, name, default=None):
        if name == dtypes.MARKER:
            asked.append(self.name)
        return real(self, name, default)

    def items(name: str, source: str) -> list:
        path = pytester.makepyfile(**{name: source})
        return pytester.genitems([pytester.getnode(pytester.parseconfigure(path), path)])

    plain = items("test_plain_suite", "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    monkeypatch.setattr(pytest.Item, "get_closest_marker", spy)
    assert dtypes.mark_items(plain, GpuEnv()) == [] and asked == []
    monkeypatch.undo()
    mixed = items("test_mixed_suite", MODULE)
    monkeypatch.setattr(pytest.Item, "get_closest_marker", spy)
    assert dtypes.mark_items(mixed, GpuEnv()) == []
    assert asked and all(name.startswith("test_dtype[") for name in asked), asked


def test_a_torch_device_parameter_whose_str_raises_errs_no_test(pytester):
    """The collection pass reads a ``torch_device`` parameter without calling a suite object's ``__str__``."""
    pytester.makepyfile("""
        import pytest

        class Hostile:
            def __str__(self):
                raise RuntimeError("boom")

        @pytest.mark.gpu_dtypes("float32")
        @pytest.mark.parametrize("torch_device", [Hostile()], ids=["hostile"])
        def test_a(dtype, torch_device):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_folder_with_brackets_in_its_name_keeps_the_capability_marks(pytester, tmp_path):
    """The items of a marked function are found by the function, not by cutting the node id at its first ``[``."""
    root = tmp_path / "gfx1030"
    amd_machine(root, 1, gfx_target_version=AMD["gfx1030"][0])
    sub = pytester.mkdir("t[1]")
    (sub / "test_a.py").write_text(
        "import pytest\n\n@pytest.mark.gpu_dtypes('float32', 'bfloat16')\ndef test_d(dtype):\n    pass\n")
    result = pytester.runpytest_subprocess(f"--gpuenv-root={root}", "--gpuenv-probe=never", "-p", "no:xdist", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*requires bf16*"])
