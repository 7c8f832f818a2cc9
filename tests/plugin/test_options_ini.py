"""TOML lists for list-valued ini options, and path options checked at configure
time (a usage error naming the value and its source before any test, never a traceback after them).

The outputs of item 6 (JSON report fields, JUnit properties, compile logs, notes) are in
``test_report_outputs.py``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
from _checkout import REPO

SHOW = """
import json
from pytest_gpuenv.session.state import get_settings

def test_show(request):
    s = get_settings(request.config)
    print("SETTINGS", json.dumps({"archs": s.compile_archs, "warps": s.cpu_warp_sizes, "dirs": s.kernel_dirs,
                                  "max_time": s.perf_max_time, "cache": s.cache_dir}))
"""


def _settings(result) -> dict:
    import json

    line = next(x for x in result.outlines if "SETTINGS " in x)
    return json.loads(line.split("SETTINGS ", 1)[1])


LISTS = """
gpuenv_compile_archs = ["gfx90a", "sm_90"]
gpuenv_cpu_warp_sizes = [32]
gpuenv_kernel_dirs = ["kern", "more kernels"]
gpuenv_perf_max_time = 5
"""


@pytest.mark.parametrize("table", ["tool.pytest.ini_options", "tool.pytest"])
def test_toml_arrays_for_list_options(pytester, table):
    if table == "tool.pytest" and int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("the native [tool.pytest] table is pytest 9's")
    pytester.makefile(".toml", pyproject=f"[{table}]\n{LISTS}")
    pytester.mkdir("kern")
    pytester.mkdir("more kernels")
    pytester.makepyfile(SHOW)
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    s = _settings(result)
    assert s["archs"] == ["gfx90a", "sm_90"] and s["warps"] == [32] and s["max_time"] == 5.0
    assert s["dirs"] == [str(pytester.path / "kern"), str(pytester.path / "more kernels")]


@pytest.mark.parametrize("text", ["gfx90a,sm_90", "gfx90a, sm_90", "gfx90a sm_90", "\n  gfx90a\n  sm_90"])
def test_ini_lists_stay_comma_or_space_separated(pytester, text):
    pytester.makefile(".ini", tox=f"[pytest]\ngpuenv_compile_archs = {text}\ngpuenv_cpu_warp_sizes = 64 32\n")
    pytester.makepyfile(SHOW)
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu")
    assert result.ret == 0, result.stderr.str()
    assert _settings(result)["archs"] == ["gfx90a", "sm_90"] and _settings(result)["warps"] == [64, 32]


def test_a_bad_item_of_a_toml_list_names_the_file(pytester):
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\ngpuenv_compile_archs = ["gfx90a", "sm_9x"]\n')
    pytester.makepyfile(SHOW)
    result = pytester.runpytest("--gpuenv-backend=cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: *sm_9x* in compile archs from ini option gpuenv_compile_archs "
                                 "in pyproject.toml"])


def test_environment_list_may_be_space_separated(pytester, monkeypatch):
    monkeypatch.setenv("GPUENV_COMPILE_ARCHS", "gfx1030 sm_80")
    pytester.makepyfile(SHOW)
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu")
    assert _settings(result)["archs"] == ["gfx1030", "sm_80"]


# ------------------------------------------------------------------ path options at configure time
def _usage_error(pytester, *args: str) -> str:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("--gpuenv-backend=cpu", *args)
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + err
    assert "INTERNALERROR" not in err and "Traceback" not in err and "passed" not in result.stdout.str()
    return err


def test_json_target_in_a_missing_folder_under_a_file(pytester, tmp_path):
    (tmp_path / "afile").write_text("")
    err = _usage_error(pytester, f"--gpuenv-json={tmp_path}/afile/sub/report.json")
    assert f"--gpuenv-json '{tmp_path}/afile/sub/report.json' from command line (--gpuenv-json): cannot be " \
           f"created: {tmp_path}/afile is a file, not a directory" in err


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_json_target_that_is_not_a_regular_file(pytester, tmp_path, monkeypatch, kind):
    target = tmp_path / "t"
    target.mkdir() if kind == "directory" else os.mkfifo(target)
    monkeypatch.setenv("GPUENV_JSON", str(target))
    err = _usage_error(pytester)
    assert f"from environment variable GPUENV_JSON: is a {'directory' if kind == 'directory' else 'FIFO'}" in err


def test_cache_dir_that_is_a_file(pytester, tmp_path):
    (tmp_path / "f").write_text("")
    pytester.makefile(".ini", tox=f"[pytest]\ngpuenv_cache_dir = {tmp_path}/f\n")
    err = _usage_error(pytester)
    assert f"--gpuenv-cache-dir '{tmp_path}/f' from ini option gpuenv_cache_dir in tox.ini is a file, not a " \
           "directory; give a directory of your own" in err


def test_cache_dir_under_a_file(pytester, tmp_path):
    (tmp_path / "f").write_text("")
    err = _usage_error(pytester, f"--gpuenv-cache-dir={tmp_path}/f/cache")
    assert f"cannot be created: {tmp_path}/f is a file, not a directory" in err


def test_kernel_dir_missing_or_a_file(pytester):
    pytester.path.joinpath("kfile").write_text("")
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\ngpuenv_kernel_dirs = ["nope"]\n')
    err = _usage_error(pytester)
    assert f"kernel directory '{pytester.path}/nope' from ini option gpuenv_kernel_dirs in pyproject.toml does " \
           "not exist" in err
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\ngpuenv_kernel_dirs = ["kfile"]\n')
    assert "is a file, not a directory" in _usage_error(pytester)


def test_good_paths_pass_and_the_missing_cache_folder_is_not_made_at_configure(pytester, tmp_path):
    pytester.makepyfile(SHOW)
    result = pytester.runpytest("-s", "--gpuenv-backend=cpu", f"--gpuenv-cache-dir={tmp_path}/new/cache",
                                f"--gpuenv-json={tmp_path}/out/r.json")
    assert result.ret == 0, result.stderr.str()
    assert _settings(result)["cache"] == f"{tmp_path}/new/cache" and not (tmp_path / "new").exists()
    assert (tmp_path / "out" / "r.json").is_file()


# ------------------------------------------------------------------ permissions, checked unprivileged
@pytest.fixture
def nobody_dir():
    """A folder uid 65534 can reach, mode 0755, made in pytest's temporary root (where pytest makes its
    ``pytest-of-<user>``: ``PYTEST_DEBUG_TEMPROOT``, else the system's, ``TMPDIR`` included), since the test's own
    ``tmp_path`` lies under folders of mode 0700. Removed after; skips where that root is closed to others."""
    root = pathlib.Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()).resolve()
    if not all(os.stat(p).st_mode & 0o001 for p in (root, *root.parents)):
        pytest.skip(f"pytest's temporary root {root} is closed to other users")
    d = tempfile.mkdtemp(prefix="gpuenv-nobody-", dir=root)
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


_CHECK = """
import json, os, sys
sys.path.insert(0, {repo!r})
from pytest_gpuenv.base import paths  # imported first: root's site-packages may be closed to the other uid
os.setgid(65534); os.setuid(65534)
d = {d!r}
print(json.dumps([paths.new_file_problem(d + "/ro/r.json"), paths.new_file_problem(d + "/ro/new/r.json"),
                  paths.new_file_problem(d + "/rw/ro.json"), paths.new_file_problem(d + "/rw/ok.json"),
                  paths.directory_problem(d + "/ro", True), paths.directory_problem(d + "/ro/c", True),
                  paths.directory_problem(d + "/rw", True), paths.directory_problem(d + "/secret", False)]))
"""


def test_unwritable_targets_as_an_unprivileged_user(request):
    """The permission cases, as uid 65534: as root, ``os.access`` grants everything but a read-only mount."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged uid (as a normal user, see the test below)")
    import json

    repo = REPO
    d = request.getfixturevalue("nobody_dir")
    for name, mode in (("ro", 0o555), ("rw", 0o777), ("secret", 0o700)):
        os.mkdir(os.path.join(d, name), mode)
        os.chmod(os.path.join(d, name), mode)
    with open(os.path.join(d, "rw", "ro.json"), "w") as f:
        f.write("{}")
    os.chmod(os.path.join(d, "rw", "ro.json"), 0o444)
    p = subprocess.run([sys.executable, "-c", _CHECK.format(repo=repo, d=d)], capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got[0] == f"its folder {d}/ro is not writable (read-only, or its permissions exclude you)"
    assert got[1] == f"its folder would be created under {d}/ro is not writable (read-only, or its permissions " \
                     "exclude you)"
    assert got[2] is None and got[3] is None  # a read-only file in a writable folder is replaced (rename)
    assert got[4] == f"the folder {d}/ro is not writable (read-only, or its permissions exclude you)"
    assert got[5].startswith(f"it would be created in {d}/ro is not writable")
    assert got[6] is None  # writable; whose it is, is the cache's own check when it is opened
    assert got[7] == "cannot be read (its permissions exclude you)"


_RUN_AS_NOBODY = """
import importlib, os, pkgutil, sys
sys.path.insert(0, {repo!r})
import _pytest, pytest, pytest_gpuenv
for pkg in (_pytest, pytest_gpuenv):  # imported first: root's site-packages may be closed to the other uid
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not m.name.endswith("__main__"):
            try:
                importlib.import_module(m.name)
            except Exception:
                pass
os.setgid(65534); os.setuid(65534)
sys.exit(pytest.main(["-p", "pytest_gpuenv.plugin", "-p", "no:cacheprovider", "--gpuenv-backend=cpu", {arg!r},
                      "test_a.py"]))
"""


@pytest.mark.parametrize("option", ["--gpuenv-json=ro/r.json", "--gpuenv-cache-dir=ro/cache",
                                    "--gpuenv-cache-dir=ro"])
def test_unwritable_paths_stop_an_unprivileged_run_before_any_test(option, request):
    """A whole run as uid 65534 (where root runs the suite): a read-only folder is a usage error, exit 4."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged uid (as a normal user, see the test below)")
    repo = REPO
    d = request.getfixturevalue("nobody_dir")
    os.mkdir(os.path.join(d, "ro"))
    os.chmod(os.path.join(d, "ro"), 0o555)
    with open(os.path.join(d, "test_a.py"), "w") as f:
        f.write("def test_a(): pass\n")
    # its own temporary folder (and cache) in the folder it may write, whatever TMPDIR the suite runs under
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", TMPDIR=d, HOME=d, XDG_CACHE_HOME=d)
    env.pop("GPUENV_CACHE_DIR", None)
    p = subprocess.run([sys.executable, "-c", _RUN_AS_NOBODY.format(repo=repo, arg=option)], cwd=d, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr
    value = option.split("=", 1)[1]
    assert f"ERROR: gpuenv: {option.split('=')[0]} '{value}' from command line" in p.stderr
    assert "is not writable" in p.stderr and "Traceback" not in p.stderr and "passed" not in p.stdout


def test_unwritable_json_folder_as_a_normal_user(pytester, tmp_path):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root may write anywhere; the unprivileged case is the test above")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert "is not writable" in _usage_error(pytester, f"--gpuenv-json={ro}/r.json")
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("form", ["space", "equals"])
def test_an_option_value_taken_for_a_rootdir_candidate_is_a_warning(pytester, tmp_path, form):
    """``--gpuenv-cache-dir /some/folder`` (the space form): pytest, choosing the rootdir before it knows the
    plugin's options, takes an existing folder for a test path and moves the rootdir; a warning says to write
    ``=``. The ``=`` form moves nothing and warns of nothing."""
    cache = tmp_path / "cache"
    cache.mkdir()
    pytester.makepyfile("def test_a(): pass")
    args = [f"--gpuenv-cache-dir={cache}"] if form == "equals" else ["--gpuenv-cache-dir", str(cache)]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    warning = f"*gpuenv: --gpuenv-cache-dir {cache}: pytest took this existing path for a test path*" \
              f"write --gpuenv-cache-dir={cache}"
    if form == "space":
        result.stdout.fnmatch_lines([warning])
    else:
        result.stdout.fnmatch_lines([f"rootdir: {pytester.path}"])
        result.stdout.no_fnmatch_line("*pytest took this existing path*")


def test_no_test_makes_its_folders_in_a_fixed_system_folder():
    """Folders come from pytest (``tmp_path``) or its temporary root (``nobody_dir``), which follow ``TMPDIR`` and
    ``PYTEST_DEBUG_TEMPROOT``; a test that names ``/tmp`` itself ignores both."""
    tests = pathlib.Path(REPO, "tests")
    fixed = [f"{p.relative_to(tests)}:{n}" for p in sorted(tests.rglob("*.py")) if "data" not in p.parts
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"""dir=["']/tmp["']""", line)]
    assert not fixed, fixed
