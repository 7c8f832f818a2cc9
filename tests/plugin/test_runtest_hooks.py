"""Which per-test hooks a run registers: the gate at setup and the report wrapper only where collection found a
test the plugin decides about (a plugin mark, or a fixture of the plugin that may skip); every run counts the
hardware skips from the reports it logs."""

from __future__ import annotations

import json

import pytest

CHECK = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    pm = session.config.pluginmanager
    print("GATE", pm.get_plugin("gpuenv-gate") is not None, "REPORTS", pm.get_plugin("gpuenv-skips") is not None)
"""


@pytest.mark.parametrize(("body", "gated"), [
    ("def test_a(): pass\ndef test_b(): pytest.skip('CUDA not available')\n", False),
    ("@pytest.mark.requires_gpu\ndef test_a(): pass\n", True),
    ("@pytest.mark.gpuenv_requires_gpu\ndef test_a(): pass\n", True),
    ("def test_a(gpu_device): pass\n", True),
    ("def test_a(torch_device): pass\n", True),
    ("@pytest.fixture\ndef dev(gpu_device): return gpu_device\ndef test_a(dev): pass\n", True),
    ("def test_a(gpu_env): pass\n", False),
], ids=["plain", "marker", "alias", "gpu_device", "torch_device", "through-a-fixture", "gpu_env"])
def test_the_gate_is_registered_only_for_the_plugins_tests(pytester, body, gated):
    pytester.makeconftest(CHECK)
    pytester.makepyfile("import pytest\n" + body)
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu")
    result.stdout.fnmatch_lines([f"GATE {gated} REPORTS True"])


def test_a_suite_skip_is_counted_without_the_gate(pytester):
    """No test is the plugin's: the suite's own GPU skip is still a hardware skip (``session.runtest.Reports``)."""
    pytester.makeconftest(CHECK)
    pytester.makepyfile("import pytest\ndef test_a(): pytest.skip('CUDA not available')\ndef test_b(): pass\n")
    result = pytester.runpytest("-s", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["GATE False REPORTS True", "*1 test(s) skipped for hardware reasons:*"])


def test_a_plugin_skip_is_not_taken_for_the_suites(pytester):
    """A skip raised inside the plugin whose reason reads like a GPU one (``hip_kernel`` with
    ``--gpuenv-kernels=off`` and no GPU) is the plugin's (``PLUGIN_SKIP``), not a ``suite`` skip, and points at
    the test."""
    pytester.makepyfile(
        """
        def test_a(hip_kernel):
            hip_kernel("__global__ void k() {}", "k")
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", "--gpuenv-kernels=off", "--gpuenv-json=r.json", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_a_plugin_skip_is_not_taken_for_the_suites.py:*hip_kernel:*"])
    result.stdout.no_fnmatch_line("*skipped for hardware reasons*")
    assert json.loads((pytester.path / "r.json").read_text())["skips"] == []


@pytest.mark.parametrize("fixture", ["gpu_device", "hip_kernel"])
def test_a_plugin_fixture_asked_for_at_run_time_skips_as_the_plugins(pytester, fixture):
    """``request.getfixturevalue`` in a run where collection found no test of the plugin's: the fixture registers
    the gate itself, so its skip is the plugin's (a hardware skip by its cause for ``gpu_device``; none for
    ``hip_kernel`` with ``--gpuenv-kernels=off``), never a ``suite`` one, and points at the test."""
    pytester.makepyfile(
        f"""
        def test_a(request):
            k = request.getfixturevalue("{fixture}")
            if callable(k):
                k("__global__ void k() {{}}", "k")
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", "--gpuenv-kernels=off", "--gpuenv-json=r.json", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_a_plugin_fixture_asked_for_at_run_time_skips_as_the_plugins.py:*"])
    skips = json.loads((pytester.path / "r.json").read_text())["skips"]
    assert [s["category"] for s in skips] == (["backend-option"] if fixture == "gpu_device" else [])


def test_other_report_wrappers_see_the_plugins_report(pytester):
    """The plugin's report wrapper is the innermost: a conftest's wrapper sees the hardware skip it noted."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(item, call):
            rep = yield
            if rep.skipped:
                print("PROPS", [name for name, _ in rep.user_properties])
            return rep
        """
    )
    pytester.makepyfile("def test_a(gpu_device): pass\n")
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*PROPS [[]'gpuenv_skip'[]]"])
