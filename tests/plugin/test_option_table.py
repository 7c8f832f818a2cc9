"""The option table (``session.options.OPTIONS``): one row per option drives the command line, the ini registrations and
the resolution; list options take TOML arrays as they are, without pytest's string-type deprecation."""

from __future__ import annotations

import json

import pytest

from pytest_gpuenv.session import options as _options
from pytest_gpuenv.session.options import OPTIONS, Settings

#: every list option as a TOML array, and the scalars as TOML would write them (a number stays a number)
PYPROJECT = """
[{table}]
gpuenv_compile_archs = ["gfx90a", "sm_90"]
gpuenv_cpu_warp_sizes = ["32"]
gpuenv_kernel_dirs = ["kern"]
gpuenv_skip_patterns = ["lab box", "A100"]
gpuenv_hide_modules = ["labgpu"]
gpuenv_tolerances = ["float16: rtol=2e-3 atol=1e-4"]
gpuenv_perf_max_time = {number}
gpuenv_devices = "all"
"""

SHOW = """
import json
from pytest_gpuenv.session.state import get_settings

def test_show(request):
    s = get_settings(request.config)._asdict()
    print("SETTINGS", json.dumps({k: s[k] for k in ("compile_archs", "cpu_warp_sizes", "kernel_dirs", "skip_patterns",
                                                    "hide_modules", "perf_max_time", "devices")}))
    print("TOLERANCES", len(s["tolerances"]))
"""


@pytest.mark.parametrize("table, number", [("tool.pytest.ini_options", '"5"'), ("tool.pytest", "5")])
def test_toml_arrays_raise_no_warning_under_w_error(pytester, table, number):
    """Under ``-W error`` pytest 9.2 turns its deprecation of a non-string value given to a ``string`` ini option
    (PytestRemovedIn10Warning) into an error: the list options are declared with a list type, so none arises.
    pytest's own deprecations only: other plugins' warnings (pytest-benchmark's about xdist, a plugin's import
    of a deprecated module, where installed) are theirs."""
    if not hasattr(pytest, "PytestRemovedIn10Warning"):
        pytest.skip("this pytest deprecates nothing for pytest 10")
    if table == "tool.pytest" and int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("the native [tool.pytest] table is pytest 9's")
    pytester.makefile(".toml", pyproject=PYPROJECT.format(table=table, number=number))
    pytester.mkdir("kern")
    pytester.makepyfile(SHOW)
    result = pytester.runpytest_subprocess("-s", "-W", "error::pytest.PytestRemovedIn10Warning", "-p", "no:xdist",
                                           "-p", "no:cacheprovider", "--gpuenv-backend=cpu")
    assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    line = next(x for x in result.outlines if "SETTINGS " in x)
    assert json.loads(line.split("SETTINGS ", 1)[1]) == {
        "compile_archs": ["gfx90a", "sm_90"], "cpu_warp_sizes": [32], "kernel_dirs": [str(pytester.path / "kern")],
        "skip_patterns": ["lab box", "A100"], "hide_modules": ["labgpu"], "perf_max_time": 5.0, "devices": "all"}
    result.stdout.fnmatch_lines(["TOLERANCES 1*"])
    assert "RemovedIn10" not in result.stdout.str() + result.stderr.str()


def test_each_row_is_one_setting_and_registers_itself():
    """One ``Settings`` field per row, and each row's flag and ini name registered as the row says."""
    assert sorted(o.setting for o in OPTIONS) == sorted(Settings._fields)
    parser = pytest.Parser(_ispytest=True)
    _options.add_options(parser)
    flags = {name for group in parser._groups for opt in group.options for name in opt.names()}
    for opt in OPTIONS:
        assert (opt.flag in flags) == opt.cli, opt.name
        assert (opt.name in parser._inidict) == (opt.ini is not None), opt.name
        if opt.ini is not None:
            assert parser._inidict[opt.name][1] == opt.ini
    lists = {o.name for o in OPTIONS if isinstance(o.default, tuple) or o.name.endswith(("_archs", "_sizes"))}
    assert all(o.ini in ("args", "linelist", "paths", None) for o in OPTIONS if o.name in lists)


def test_nothing_set_resolves_to_the_defaults(pytester, monkeypatch):
    """A run with no option set resolves every row to its default (the one place a default is written), which
    is also what the fixtures use when the plugin is not configured (``session.options.defaults``)."""
    pytester.makepyfile("""
        from pytest_gpuenv.session import options as _options
        from pytest_gpuenv.session.state import get_settings

        def test_defaults(request):
            assert get_settings(request.config) == _options.defaults(request.config)
            assert get_settings(request.config).cpu_warp_sizes == [64, 32]
    """)
    for opt in OPTIONS:
        if opt.env:
            monkeypatch.delenv(opt.env, raising=False)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
