"""Quarantine lists (``session/quarantine.py``): the file's entries and their errors (file and line), the entries
applied at collection on machine trees (an MI300X-like AMD tree, the H100 scenario, a CPU runner), the summary
apart from the hardware skips, the ``--gpuenv-json`` field, and ``gpuenv quarantine check`` over such reports."""

from __future__ import annotations

import json

import pytest
from _machines import amd_machine

from pytest_gpuenv import requires_gpu
from pytest_gpuenv.base.conditions import Facts
from pytest_gpuenv.session.quarantine import parse
from pytest_gpuenv.session.quarantine_check import quarantine_command

QUARANTINE = """\
# tests kept out where they fail
[[quarantine]]
tests = ["test_q.py::test_flash*"]
when = { vendor = "amd", arch = "gfx94*", rocm = "<6.5" }
action = "xfail"
reason = "hangs on MI300 with ROCm 6.3"
link = "https://github.com/org/repo/issues/123"

[[quarantine]]
tests = "test_q.py::test_param"
when = { vendor = ["nvidia", "amd"] }
action = "skip"
reason = "flaky on GPUs: CUDA error, ROCm hang"

[[quarantine]]
tests = ["test_q.py::test_gone"]
action = "skip"
reason = "the test was renamed"
"""

TESTS = """
import pytest

def test_flash_fwd():
    pass

def test_flash_bwd():
    assert False

@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    pass

def test_plain():
    pass
"""


def _facts(vendor, arch=None, **versions):
    return Facts(vendor, arch, {"cuda": None, "rocm": None, "driver": None, "torch": None, **versions}, "node-7")


def test_entries_and_their_conditions():
    flash, param, gone = parse(QUARANTINE, "q.toml")
    assert [e.where for e in (flash, param, gone)] == ["q.toml:2", "q.toml:9", "q.toml:15"]
    assert flash.applies(_facts("amd", "gfx942", rocm="6.4.1"))
    assert not flash.applies(_facts("amd", "gfx942", rocm="6.5.0"))
    assert not flash.applies(_facts("amd", "gfx90a", rocm="6.3.0"))
    assert not flash.applies(_facts("nvidia", "sm_90"))
    assert param.applies(_facts("nvidia")) and not param.applies(_facts("cpu"))
    assert gone.applies(_facts("cpu"))
    assert param.names("test_q.py::test_param[1]")  # a test named without parameters covers each of them
    assert flash.names("test_q.py::test_flash_fwd") and not flash.names("test_q.py::test_plain")


def test_brackets_in_globs_are_literal():
    (e,) = parse('[[quarantine]]\ntests = ["t.py::test_x[1]"]\naction = "skip"\nreason = "r"\n', "q.toml")
    assert e.names("t.py::test_x[1]") and not e.names("t.py::test_x[2]")


def test_host_and_version_conditions():
    (e,) = parse('[[quarantine]]\ntests = ["*"]\nwhen = { host = "node-*", torch = ">=2.6,<2.8", driver = "550.*" '
                 '}\naction = "skip"\nreason = "r"\n', "q.toml")
    assert e.applies(_facts("cpu", torch="2.7.0+cpu", driver="550.90.07"))
    assert not e.applies(_facts("cpu", torch="2.8.0", driver="550.90.07"))
    assert not e.applies(_facts("cpu", torch="2.7.0"))  # no driver known: the range does not hold


@pytest.mark.parametrize("text, message", [
    ('[[quarantine]]\ntests = ["a"]\naction = "skip"\nreason = "r"\n\n[[quarantine]]\ntests = ["b"]\naction = "skp"\n'
     'reason = "r"\n', "q.toml:6: 'action' must be one of skip, xfail, got 'skp'"),
    ('[[quarantine]]\ntests = ["a"]\naction = "skip"\n', "q.toml:1: missing 'reason'"),
    ('[[quarantine]]\ntests = []\naction = "skip"\nreason = "r"\n', "q.toml:1: 'tests' must be a string or a non-empty"),
    ('[[quarantine]]\ntests = "a"\naction = "skip"\nreason = "r"\nwhen = { os = "linux" }\n',
     "q.toml:1: unknown 'when' key 'os'"),
    ('[[quarantine]]\ntests = "a"\naction = "skip"\nreason = "r"\nwhen = { rocm = "six" }\n',
     "q.toml:1: 'when' rocm 'six' is not a version range"),
    ('[[quarantine]]\ntests = "a"\naction = "skip"\nreason = "r"\nwhen = { arch = "gfx9x" }\n',
     "q.toml:1: invalid arch pattern 'gfx9x'"),
    ('[[quarantine]]\ntests = "a"\naction = "skip"\nstrict = true\nreason = "r"\n',
     "q.toml:1: 'strict' is true or false, and only for action 'xfail'"),
    ('[[quarantine]]\ntests = "a"\naction = "skip"\nreason = "r"\nowner = "me"\n', "q.toml:1: unknown key 'owner'"),
    ('[[quarantine]\n', "q.toml is not valid TOML"),
    ('flaky = ["a"]\n', "q.toml: unknown top-level key 'flaky'"),
])
def test_bad_entries_name_file_and_line(text, message):
    with pytest.raises(ValueError) as info:
        parse(text, "q.toml")
    assert message in str(info.value)


def _run(pytester, *args):
    pytester.makepyfile(test_q=TESTS)
    pytester.path.joinpath("q.toml").write_text(QUARANTINE)
    pytester.makeini("[pytest]\ngpuenv_quarantine = q.toml\n")
    return pytester.runpytest_subprocess("-p", "no:xdist", "-rsxX", "--gpuenv-probe=never", *args)


def test_applied_on_the_amd_tree(pytester, tmp_path):
    amd_machine(tmp_path / "m", 1, gfx_target_version=90402)
    result = _run(pytester, f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-json=r.json")
    result.assert_outcomes(passed=1, skipped=2, xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines([
        "*- gpuenv: quarantine -*",
        "4 test(s) quarantined by q.toml: 2 skipped, 1 xfailed, 1 xpassed",
        "     2  xfail  q.toml:2  hangs on MI300 with ROCm 6.3  https://github.com/org/repo/issues/123",
        "     2  skip   q.toml:9  flaky on GPUs: CUDA error, ROCm hang",
    ])
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] test_q.py:9: quarantined (q.toml:9): flaky on GPUs: CUDA error, ROCm hang"])
    assert "hardware skips" not in result.stdout.str()  # a quarantine is not a hardware skip, whatever its reason
    report = json.loads((pytester.path / "r.json").read_text())["quarantine"]
    assert [(e["where"], e["collected"]) for e in report["entries"]] == [("q.toml:2", 2), ("q.toml:9", 2),
                                                                           ("q.toml:15", 0)]
    assert sorted((t["nodeid"], t["outcome"]) for t in report["tests"]) == [
        ("test_q.py::test_flash_bwd", "xfailed"), ("test_q.py::test_flash_fwd", "xpassed"),
        ("test_q.py::test_param[1]", "skipped"), ("test_q.py::test_param[2]", "skipped")]


def test_counted_by_the_xdist_controller(pytester, tmp_path):
    """Workers collect and run; the controller counts the collected ids and the outcomes from the reports."""
    pytest.importorskip("xdist")
    amd_machine(tmp_path / "m", 1, gfx_target_version=90402)
    result = _run(pytester, f"--gpuenv-root={tmp_path / 'm'}", "-p", "xdist", "-n", "2", "--gpuenv-json=r.json")
    result.assert_outcomes(passed=1, skipped=2, xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines(["4 test(s) quarantined by q.toml: 2 skipped, 1 xfailed, 1 xpassed"])
    report = json.loads((pytester.path / "r.json").read_text())["quarantine"]
    assert [e["collected"] for e in report["entries"]] == [2, 2, 0] and len(report["tests"]) == 4


def test_applied_on_the_h100_tree_and_a_cpu_runner(pytester, roots):
    result = _run(pytester, f"--gpuenv-root={roots('h100_linux')}")
    result.assert_outcomes(passed=2, failed=1, skipped=2)  # NVIDIA: the AMD entry does not hold
    result = _run(pytester, "--gpuenv-backend=cpu")
    result.assert_outcomes(passed=4, failed=1)
    assert "quarantine" not in result.stdout.str()


def test_the_option_overrides_the_ini_file(pytester):
    result = _run(pytester, "--gpuenv-backend=cpu", "--gpuenv-quarantine=off")
    result.assert_outcomes(passed=4, failed=1)
    pytester.path.joinpath("bad.toml").write_text('[[quarantine]]\ntests = ["a"]\naction = "skip"\n')
    result = pytester.runpytest_subprocess("--gpuenv-quarantine=bad.toml")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: gpuenv: quarantine file from command line (--gpuenv-quarantine): "
                                 "bad.toml:1: missing 'reason'"])
    result = pytester.runpytest_subprocess("--gpuenv-quarantine=missing.toml")
    result.stderr.fnmatch_lines(["ERROR: gpuenv: cannot read quarantine file 'missing.toml' from command line*"])


def test_check_lists_stale_entries_and_ready_to_lift(pytester, tmp_path, capsys):
    amd_machine(tmp_path / "m", 1, gfx_target_version=90402)
    root = f"--gpuenv-root={tmp_path / 'm'}"
    _run(pytester, root, "--gpuenv-json=run1.json").assert_outcomes(passed=1, skipped=2, xfailed=1, xpassed=1)
    result = _run(pytester, root, "--gpuenv-json=run2.json", "--gpuenv-quarantine-run")
    result.assert_outcomes(passed=1, xfailed=1, xpassed=3)  # the skip entry's tests ran, as non-strict xfails
    _run(pytester, root, "--collect-only", "--gpuenv-json=ids.json")
    reports = [str(pytester.path / n) for n in ("run1.json", "run2.json", "ids.json")]
    capsys.readouterr()
    assert quarantine_command(["check", "--json-report", *reports]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "q.toml:2: keep: failed 2 of 4 run(s) (tests: test_q.py::test_flash*)",
        "q.toml:9: ready to lift: passed every time it ran: 2 of 2 run(s) (tests: test_q.py::test_param)",
        "q.toml:15: stale: its tests match no collected test in 3 report(s) (tests: test_q.py::test_gone)",
    ]
    # the collection alone: stale entries, nothing ready
    assert quarantine_command(["check", str(pytester.path / "q.toml"), "--json-report", reports[2], "--json"]) == 1
    verdicts = json.loads(capsys.readouterr().out)
    assert [v["verdict"] for v in verdicts] == ["keep", "keep", "stale"]


def test_check_errors(tmp_path, capsys):
    (tmp_path / "r.json").write_text('{"outcomes": {}}')
    assert quarantine_command(["check", "--json-report", str(tmp_path / "r.json")]) == 2
    assert "has no 'quarantine' field" in capsys.readouterr().err
    assert quarantine_command(["check", "--json-report", str(tmp_path / "nope.json")]) == 2
    assert "cannot read report" in capsys.readouterr().err


@requires_gpu
def test_applied_on_this_gpu(pytester, gpu_device):
    """On the GPU machine, without a tree: an entry for this GPU's vendor and arch quarantines the test."""
    arch = (gpu_device.arch or "").split(":")[0]
    pytester.makepyfile(test_q="def test_here():\n    pass\n\ndef test_other():\n    pass\n")
    pytester.path.joinpath("q.toml").write_text(
        f'[[quarantine]]\ntests = ["test_q.py::test_here"]\nwhen = {{ vendor = "{gpu_device.vendor}", '
        f'arch = "{arch}" }}\naction = "skip"\nreason = "here"\n')
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--gpuenv-quarantine=q.toml")
    result.assert_outcomes(passed=1, skipped=1)
