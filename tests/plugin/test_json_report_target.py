"""``--gpuenv-json`` writes only regular files and never through a link.

Attacks: a character device as the target (``/dev/null`` as root), a directory, a FIFO, a target that is
a symbolic link, a ``PATH.tmp`` symlink planted by someone else, and targets swapped between configure
and the write. A refused target is a usage error naming the value and where it came from; a target
swapped during the run ends it with one line and leaves the swapped-in object alone.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from pytest_gpuenv.base.paths import file_target_problem, output_file_problem
from pytest_gpuenv.perf.session import PerfSession

VICTIM_TEXT = "someone else's file\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def _run(pytester, *args):
    pytester.makepyfile("def test_a():\n    pass\n")
    return pytester.runpytest("--gpuenv-backend=cpu", *args)


def _assert_report(path):
    assert stat.S_ISREG(os.lstat(path).st_mode)
    data = json.loads(path.read_text())
    # issue 11 item 6 added the run's own fields (version, timestamp, outcome counts, compile-only tests)
    assert set(data) == {"environment", "measurements", "skips", "gpuenv_version", "timestamp", "outcomes",
                         "compile_only", "expected"}


# ------------------------------------------------------------------------------------- the check itself
def test_problem_names_the_kind_of_file(tmp_path, victim):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    assert "is a character device" in file_target_problem("/dev/null")
    assert "is a directory" in file_target_problem(str(tmp_path))
    assert "is a FIFO" in file_target_problem(str(fifo))
    assert "is a symbolic link" in file_target_problem(str(link))
    assert file_target_problem(str(link), allow_link=True) is None
    assert "not a directory" in file_target_problem(str(victim / "sub" / "report.json"))
    assert file_target_problem(str(victim)) is None
    assert file_target_problem(str(tmp_path / "new" / "dirs" / "report.json")) is None


def test_the_plot_target_is_checked_as_the_report_is(tmp_path, victim):
    """``--gpuenv-perf-plot`` goes through the same check (``base.paths.output_file_problem``), naming the plot."""
    assert "is a directory; the plot is written only to a regular file" in output_file_problem(str(tmp_path),
                                                                                             what="the plot")
    assert "is a file, not a directory" in output_file_problem(str(victim / "sub" / "p.png"), what="the plot")
    assert output_file_problem(str(tmp_path / "new" / "p.png"), what="the plot") is None


def test_writer_refuses_a_non_regular_target(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="is a FIFO"):
        PerfSession().write_json(str(fifo), {}, [])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["fifo"]  # no temporary file left


# ------------------------------------------------------------------------------- refused at configure
def test_dev_null_is_a_usage_error_and_stays_a_device(pytester, monkeypatch):
    # the run must never reach the writer; if it did, fail instead of replacing /dev/null
    monkeypatch.setattr(PerfSession, "write_json", lambda *a: pytest.fail("wrote to /dev/null"))
    result = _run(pytester, "--gpuenv-json=/dev/null")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: gpuenv: --gpuenv-json '/dev/null' from command line (--gpuenv-json): is a character device;*"]
    )
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_own_character_device_is_refused(pytester, tmp_path):
    node = tmp_path / "null-copy"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    result = _run(pytester, f"--gpuenv-json={node}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-json * is a character device;*"])
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.parametrize("layer", ["cli", "env", "ini"])
def test_fifo_is_a_usage_error_naming_the_source(pytester, monkeypatch, tmp_path, layer):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    args = []
    if layer == "cli":
        args, where = [f"--gpuenv-json={fifo}"], "command line (--gpuenv-json)"
    elif layer == "env":
        monkeypatch.setenv("GPUENV_JSON", str(fifo))
        where = "environment variable GPUENV_JSON"
    else:
        pytester.makefile(".ini", tox=f"[pytest]\ngpuenv_json = {fifo}\n")
        where = "ini option gpuenv_json in tox.ini"
    result = _run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: --gpuenv-json '{fifo}' from {where}: is a FIFO;*"])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_directory_is_a_usage_error(pytester, tmp_path):
    result = _run(pytester, f"--gpuenv-json={tmp_path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-json * is a directory;*"])


def test_symlinked_target_is_refused_and_its_target_untouched(pytester, tmp_path, victim):
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    result = _run(pytester, f"--gpuenv-json={link}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuenv: --gpuenv-json * is a symbolic link;*"])
    assert victim.read_text() == VICTIM_TEXT
    assert os.path.islink(link)


def test_parent_that_is_a_file_is_a_usage_error(pytester, victim):
    result = _run(pytester, f"--gpuenv-json={victim}/out/report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gpuenv: --gpuenv-json * cannot be created: {victim} is a file, not a directory"])


# ------------------------------------------------------------------------------------------- the writer
def test_planted_tmp_symlink_is_never_written_through(pytester, tmp_path, victim):
    report = tmp_path / "report.json"
    planted = tmp_path / "report.json.tmp"
    planted.symlink_to(victim)
    result = _run(pytester, f"--gpuenv-json={report}")
    assert result.ret == 0
    _assert_report(report)
    assert victim.read_text() == VICTIM_TEXT
    assert os.readlink(planted) == str(victim)
    assert sorted(os.listdir(tmp_path)) == ["report.json", "report.json.tmp", "victim.txt"]


def test_report_is_a_regular_file_with_the_umask_mode(pytester, tmp_path):
    report = tmp_path / "out" / "report.json"
    result = _run(pytester, f"--gpuenv-json={report}")
    assert result.ret == 0
    _assert_report(report)
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(report).st_mode) == 0o666 & ~mask
    assert os.listdir(report.parent) == ["report.json"]
    # a second run replaces the regular file
    assert _run(pytester, f"--gpuenv-json={report}").ret == 0
    _assert_report(report)


def test_target_swapped_for_a_symlink_during_the_run_replaces_the_link(pytester, tmp_path, victim):
    report = tmp_path / "report.json"
    pytester.makepyfile(
        f"""
        import os

        def test_swap():
            os.symlink({str(victim)!r}, {str(report)!r})
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", f"--gpuenv-json={report}")
    assert result.ret == 0
    assert victim.read_text() == VICTIM_TEXT
    _assert_report(report)


def test_target_swapped_for_a_fifo_during_the_run_ends_it_with_one_line(pytester, tmp_path):
    report = tmp_path / "report.json"
    pytester.makepyfile(
        f"""
        import os

        def test_swap():
            os.mkfifo({str(report)!r})
        """
    )
    result = pytester.runpytest("--gpuenv-backend=cpu", f"--gpuenv-json={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"Exit: gpuenv: cannot write --gpuenv-json {report}: is a FIFO;*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert stat.S_ISFIFO(os.lstat(report).st_mode)
    assert os.listdir(tmp_path) == ["report.json"]  # no temporary file left
