"""A suite converted to the plugin's markers, run without the plugin: ``-p pytest_gpuenv.marks.register``
registers the markers alone where the plugin is installed but turned off, and the conftest of
docs/how-to/adopt.md registers (and skips) them where it is not installed; neither changes a run where the
plugin is active. Under ``--strict-markers`` and ``-W error`` (``filterwarnings = error``), where an unknown
mark fails collection."""

from __future__ import annotations

import pathlib
import re

import pytest
from _checkout import REPO

SUITE = """
import pytest

@pytest.mark.requires_gpu
def test_gpu():
    pass

@pytest.mark.requires_memory("1GiB")
def test_memory():
    pass

def test_plain():
    pass
"""
STRICT = ("-p", "no:cacheprovider", "--strict-markers", "-W", "error", "-rs")


def _adopt_conftest() -> str:
    page = pathlib.Path(REPO, "docs", "how-to", "adopt.md").read_text(encoding="utf-8")
    match = re.search(r"^```python\n# conftest.py\n(.*?)^```", page, re.M | re.S)
    assert match is not None, "docs/how-to/adopt.md has no conftest.py block"
    return match.group(1)


def test_without_the_plugin_the_marks_fail_collection(pytester):
    """What the conftest and ``-p pytest_gpuenv.marks.register`` are for."""
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:gpuenv", *STRICT)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'requires_gpu' not found in `markers` configuration option*"])


@pytest.mark.parametrize("how", ["turned-off", "not-loaded"])
def test_the_documented_conftest_registers_and_skips_where_the_plugin_is_not_active(pytester, monkeypatch, how):
    pytester.makeconftest(_adopt_conftest())
    pytester.makepyfile(test_suite=SUITE)
    if how == "not-loaded":  # as where it is not installed: no entry point loaded, no -p
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        args = STRICT
    else:
        args = ("-p", "no:gpuenv", *STRICT)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_suite.py:*: needs pytest-gpuenv, which is not active in this run"] * 2)


def test_the_documented_conftest_leaves_an_active_plugin_alone(pytester):
    """The plugin's markers stay the plugin's: evaluated, and not taken for the suite's own."""
    pytester.makeconftest(_adopt_conftest())
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", *STRICT)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*requires a GPU: GPUs hidden by --gpuenv-backend=cpu"])
    result.stdout.no_fnmatch_line("*left to the suite*")


def test_marks_plugin_registers_the_markers_where_the_plugin_is_off(pytester):
    pytester.makepyfile(test_suite=SUITE.replace("requires_memory", "gpuenv_requires_memory"))
    result = pytester.runpytest_subprocess("-p", "no:gpuenv", "-p", "pytest_gpuenv.marks.register", *STRICT)
    result.assert_outcomes(passed=2, skipped=1)  # registered; the GPU test skips: nothing says there is a GPU
    result = pytester.runpytest_subprocess("-p", "no:gpuenv", "-p", "pytest_gpuenv.marks.register", "-rs", *STRICT)
    result.stdout.fnmatch_lines(["*needs pytest-gpuenv, which is not active in this run"])
    markers = pytester.runpytest_subprocess("-p", "no:gpuenv", "-p", "pytest_gpuenv.marks.register", "--markers")
    markers.stdout.fnmatch_lines_random(["@pytest.mark.requires_memory(size): *", "@pytest.mark.gpuenv_requires_gpu: *"])


def test_marks_plugin_beside_the_plugin_changes_nothing(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "gpuenv", "-p", "pytest_gpuenv.marks.register", "--gpuenv-backend=cpu",
                                           *STRICT)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.no_fnmatch_line("*left to the suite*")
    pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.marks.register"]')  # loaded after the plugin
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-backend=cpu", *STRICT)
    result.assert_outcomes(passed=1, skipped=2)
    markers = pytester.runpytest_subprocess("-p", "gpuenv", "-p", "pytest_gpuenv.marks.register", "--markers")
    assert markers.stdout.str().count("@pytest.mark.requires_gpu:") == 1
