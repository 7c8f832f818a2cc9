"""Marker names a suite already owns are left to it; the gpuenv_ aliases always work."""

import pytest

from pytest_gpuenv.marks import markers
from pytest_gpuenv.marks.markers import MARKER_NAMES

#: a suite written before it met the plugin: its own `perf` means "slow" (ini), its own `requires_gpu`
#: means "the lab's GPU box is reachable" (a conftest registers it and skips by itself)
OWN_SUITE_INI = """
[pytest]
markers =
    perf: slow tests, left out of the quick run with -m "not perf"
    slow: slower still
"""
OWN_SUITE_CONFTEST = """
import os
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "requires_gpu: needs the lab's GPU box (LAB_BOX set)")

def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("requires_gpu") and os.environ.get("LAB_BOX") == "down":
            item.add_marker(pytest.mark.skip(reason="lab box down"))
"""
OWN_SUITE_TESTS = """
import pytest

@pytest.mark.perf
def test_slow_thing(): pass

@pytest.mark.requires_gpu
def test_lab_box(): pass

@pytest.mark.gpuenv_requires_gpu
def test_plugin_gpu(): pass

@pytest.mark.requires_cuda
def test_plugin_cuda_unprefixed(): pass

@pytest.mark.gpuenv_perf
def test_plugin_perf(): pass
"""


def _own_suite(pytester):
    pytester.makeini(OWN_SUITE_INI)
    pytester.makeconftest(OWN_SUITE_CONFTEST)
    pytester.makepyfile(test_suite=OWN_SUITE_TESTS)


def test_names_the_suite_registers_are_left_to_it(pytester):
    _own_suite(pytester)
    result = pytester.runpytest("--strict-markers", "-rs", "--gpuenv-backend=cpu")
    # the suite's perf and requires_gpu tests run; the plugin's gpu and cuda tests skip
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines([
        "gpuenv: markers requires_gpu, perf left to the suite (it registers them itself); "
        "pytest-gpuenv's: gpuenv_requires_gpu, gpuenv_perf",
        "*test_suite.py:*: requires a GPU: GPUs hidden by --gpuenv-backend=cpu",
        "*test_suite.py:*: requires CUDA: GPUs hidden by --gpuenv-backend=cpu",
    ])


def test_the_suite_keeps_its_own_meaning_of_a_name(pytester, monkeypatch):
    _own_suite(pytester)
    monkeypatch.setenv("LAB_BOX", "down")
    result = pytester.runpytest("--strict-markers", "-rs", "--gpuenv-backend=cpu", "-k", "lab_box")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*lab box down*"])


def test_marker_expressions_follow_the_owner(pytester):
    _own_suite(pytester)
    # the suite's -m "not perf" leaves out its slow test only; gpuenv_perf selects the plugin's perf test
    result = pytester.runpytest("--strict-markers", "-m", "not perf", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=2, skipped=2, deselected=1)
    result = pytester.runpytest("--strict-markers", "-m", "gpuenv_perf", "-v")
    result.assert_outcomes(passed=1, deselected=4)
    result.stdout.fnmatch_lines(["*test_plugin_perf PASSED*"])


def test_perf_off_skips_the_plugins_perf_tests_not_the_suites(pytester):
    _own_suite(pytester)
    pytester.makepyfile(test_bench="def test_b(gpu_bench): pass")
    result = pytester.runpytest("--strict-markers", "--gpuenv-perf=off", "-rs", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=2, skipped=4)
    result.stdout.fnmatch_lines(["*test_bench.py*: performance test skipped by --gpuenv-perf=off",
                                 "*test_suite.py:*: performance test skipped by --gpuenv-perf=off"])
    # a gpu_bench test gets gpuenv_perf, not the suite's perf
    result = pytester.runpytest("--strict-markers", "-m", "perf", "-v")
    result.assert_outcomes(passed=1, deselected=5)
    result.stdout.fnmatch_lines(["*test_slow_thing PASSED*"])
    result = pytester.runpytest("--strict-markers", "-m", "gpuenv_perf", "--gpuenv-perf=off")
    result.assert_outcomes(skipped=2, deselected=4)


def test_markers_help_shows_the_suites_line_and_every_alias(pytester):
    _own_suite(pytester)
    result = pytester.runpytest("--markers")
    out = result.stdout.str()
    assert "@pytest.mark.perf: slow tests" in out
    assert "@pytest.mark.perf: a GPU performance test" not in out
    assert "@pytest.mark.requires_gpu: needs the lab's GPU box" in out
    assert "@pytest.mark.requires_gpu: run only where" not in out
    for name in MARKER_NAMES:
        assert f"@pytest.mark.gpuenv_{name}" in out
    result.stdout.fnmatch_lines([
        "@pytest.mark.gpuenv_requires_memory(size): *",
        "@pytest.mark.gpuenv_perf: *-m 'not gpuenv_perf'*",
        "@pytest.mark.requires_cuda: run only where an NVIDIA GPU is usable*",
    ])


def test_no_header_line_when_the_suite_owns_no_name(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    assert "left to the suite" not in result.stdout.str()


ALIAS_SUITE = """
import pytest

@pytest.mark.{p}requires_gpu
def test_gpu(): pass
@pytest.mark.{p}requires_cuda
def test_cuda(): pass
@pytest.mark.{p}requires_rocm
def test_rocm(): pass
@pytest.mark.{p}requires_hip
def test_hip(): pass
@pytest.mark.{p}requires_wsl(2)
def test_wsl(): pass
@pytest.mark.{p}requires_devices(2)
def test_two(): pass
@pytest.mark.{p}requires_memory("16GiB")
def test_mem(): pass
@pytest.mark.{p}requires_arch("gfx94*", "sm_90")
def test_arch(): pass
@pytest.mark.{p}requires_capability("bf16")
def test_capability(): pass
@pytest.mark.{p}skip_on("cpu", reason="not here")
def test_skip_on(): pass
@pytest.mark.{p}xfail_on("cpu")
def test_xfail_on(): assert 0
@pytest.mark.{p}perf
def test_perf(): pass
def test_plain(): pass
"""


@pytest.mark.parametrize("prefix", ["", "gpuenv_"])
def test_every_alias_acts_as_its_marker(pytester, prefix):
    """The whole table, unprefixed and prefixed, gives the same outcomes and the same skip causes."""
    pytester.makepyfile(ALIAS_SUITE.format(p=prefix))
    result = pytester.runpytest("--strict-markers", "--gpuenv-backend=cpu", "-rsx")
    result.assert_outcomes(passed=2, skipped=10, xfailed=1)
    result.stdout.fnmatch_lines([
        "10 test(s) skipped for hardware reasons:",
        "*8  backend-option*--gpuenv-backend=cpu",
        "*requires WSL 2: found not WSL*",
        "*skip_on('cpu'): found no GPU (--gpuenv-backend=cpu): not here",
    ])
    assert set(MARKER_NAMES) == {"requires_gpu", "requires_cuda", "requires_rocm", "requires_hip", "requires_wsl",
                                 "requires_devices", "requires_memory", "requires_arch", "skip_on", "xfail_on", "perf",
                                 "requires_capability", "exclusive_gpu"}


def test_aliases_work_when_the_suite_owns_every_plain_name(pytester):
    """A suite that registers all eleven plain names still gets the plugin through the aliases."""
    lines = "\n".join(f"    {name}: the suite's own {name}" for name in MARKER_NAMES)
    pytester.makeini(f"[pytest]\nmarkers =\n{lines}\n")
    own = ALIAS_SUITE.format(p="").replace("def test_", "def test_own_")
    pytester.makepyfile(ALIAS_SUITE.format(p="gpuenv_") + own)
    result = pytester.runpytest("--strict-markers", "--gpuenv-backend=cpu")
    # the plugin's: 2 pass, 10 skip, 1 xfail; the suite's thirteen all pass (test_own_xfail_on fails: `assert 0`)
    result.assert_outcomes(passed=2 + 12, skipped=10, xfailed=1, failed=1)


def test_bad_alias_argument_errors_that_test_naming_the_marker(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.gpuenv_requires_memory("lots")
        def test_bad(): pass
        def test_good(): pass
        """
    )
    result = pytester.runpytest("--strict-markers")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*invalid marker requires_memory('lots')*"])


def test_a_conftest_loaded_late_still_owns_its_names(pytester):
    """A conftest in a subdirectory (loaded during collection, after the header) that registers a name:
    the plugin leaves the name alone and says so in the summary."""
    sub = pytester.mkdir("integration")
    (sub / "conftest.py").write_text(
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'requires_cuda: the integration suite\\'s own')\n"
    )
    (sub / "test_x.py").write_text("import pytest\n@pytest.mark.requires_cuda\ndef test_x(): pass\n")
    result = pytester.runpytest("--strict-markers", "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*gpuenv: markers*",
        "markers requires_cuda left to the suite (it registers them itself); pytest-gpuenv's: gpuenv_requires_cuda",
    ])


def test_plan_reads_aliases_and_leaves_the_suites_names(pytester):
    _own_suite(pytester)
    result = pytester.runpytest("--collect-only", "--gpuenv-plan", "-q")
    out = result.stdout.str().split("gpuenv: plan")[1]
    assert "test_plugin_gpu" in out and "test_plugin_cuda_unprefixed" in out
    assert "test_lab_box" not in out and "test_slow_thing" not in out


def test_plugin_marks_strip_the_prefix(pytester):
    pytester.makepyfile(
        """
        import pytest
        @pytest.mark.gpuenv_requires_devices(2)
        @pytest.mark.requires_arch("sm_90")
        @pytest.mark.slow
        def test_a(): pass
        """
    )
    items, _rec = pytester.inline_genitems()
    marks = markers.plugin_marks(items[0])
    assert [(m.name, m.args) for m in marks] == [("requires_arch", ("sm_90",)), ("requires_devices", (2,))]
