"""HeCBench's HIP benchmarks (a copy of HeCBench's src/: tests/corpus/README.md), whole files, through the ``hip_kernel``
fixture as a user runs them: tests/corpus/hecbench_suite.py in a pytest subprocess on the CPU backend
(both widths, checked and unchecked, against numpy; its ``XFAIL`` table says what fails today and why)."""

from __future__ import annotations

import os
import shutil

import pytest
from _checkout import REPO, plugin_installed
from _corpus import CASES, HECBENCH

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)

needs_copy = pytest.mark.skipif(not os.path.isdir(HECBENCH), reason=(
    f"HeCBench's benchmarks are not in this repository (tests/corpus/README.md): no copy at {HECBENCH} "
    "(set GPUENV_HECBENCH to HeCBench's src/ folder)"))


@needs_copy
def test_every_case_has_its_file():
    for case in CASES:
        assert os.path.isfile(case.path), case.name
        for d in case.include_dirs:
            assert os.path.isdir(d), (case.name, d)


def test_xfail_table_has_one_line_per_file():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hecbench_suite", os.path.join(HERE, "hecbench_suite.py"))
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    assert sorted(suite.XFAIL) == sorted(c.name for c in CASES)


@needs_copy
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no C++ compiler")
def test_hecbench_through_the_fixture(pytester, tmp_path_factory, monkeypatch):
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    path = [TESTS] + ([] if plugin_installed() else [REPO])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]))
    if not plugin_installed():
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    with open(os.path.join(HERE, "hecbench_suite.py")) as fh:
        pytester.makepyfile(test_hecbench=fh.read())
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "-p", "no:cacheprovider", "-rxX")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()[-4000:]
    assert outcomes.get("passed", 0) + outcomes.get("xfailed", 0) == len(CASES) * 4
