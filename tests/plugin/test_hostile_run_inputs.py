"""Hostile inputs to the run itself (issue 39): files named by options, user patterns, text that reaches the
terminal, host names, variables of the CPU executor, numbers at the edge of their range. Each fails the run
with one usage error naming the value and where it came from, or is shown harmlessly; none hangs or
exhausts the machine."""

from __future__ import annotations

import sys

import pytest

from pytest_gpuenv.session.report import skip_summary_lines
from pytest_gpuenv.session.state import host_name


def test_a_plan_profile_read_from_a_device_is_refused_not_read(pytester: pytest.Pytester) -> None:
    """``@/dev/zero`` grew pytest without bound: only a regular file is read, and at most a few MiB."""
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-plan", "--gpuenv-plan-profile=@/dev/zero")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuenv-plan-profile '@/dev/zero'*not a regular file*"])


def test_a_plan_profile_larger_than_its_bound_is_refused(pytester: pytest.Pytester) -> None:
    big = pytester.path / "big.json"
    with open(big, "wb") as f:
        f.truncate(5 << 20)  # sparse: 5 MiB of zeros, over the 4 MiB bound
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-plan", f"--gpuenv-plan-profile=@{big}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuenv-plan-profile*big.json*at most 4194304 are read*"])


@pytest.mark.parametrize("pattern", ["(a+)+$", "(x|xx)*y", r"(\w*\s?)*!"])
def test_a_skip_pattern_that_can_backtrack_without_end_is_refused(pytester: pytest.Pytester, pattern: str) -> None:
    pytester.makeini(f"[pytest]\ngpuenv_skip_patterns = {pattern}\n")
    pytester.makepyfile("import pytest\ndef test_a(): pytest.skip('a' * 40)")
    result = pytester.runpytest_subprocess("-p", "gpuenv", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*gpuenv_skip_patterns entry {pattern!r}*inside an unbounded repeat*"])


@pytest.mark.parametrize("pattern", [r"(\w+\s?){1,40}!", "a*a*a*a*a*a*a*a*b"])
def test_a_slow_skip_pattern_is_stopped_and_named_once(pytester: pytest.Pytester, pattern: str) -> None:
    """Shapes the configure-time check lets through (a bounded repeat of a repeat, a chain of repeats) spun for
    minutes on one reason: each search of a project's pattern is bounded in CPU time, and one that runs out is
    named in one warning and not searched again."""
    pytester.makeini(f"[pytest]\ngpuenv_skip_patterns = {pattern}\n")
    pytester.makepyfile("""
        import pytest
        @pytest.mark.parametrize("i", range(3))
        def test_a(i): pytest.skip(("word " * 60 + "end") if i < 2 else "requires a GPU")
    """.replace("word ", "word " if "w" in pattern else "a").replace("end", "end" if "w" in pattern else "c"))
    result = pytester.runpytest_subprocess("-p", "gpuenv", "-W", "always", timeout=60)
    result.assert_outcomes(skipped=3)
    out = result.stdout.str()
    assert out.count("took more than 0.5 s of CPU on one skip reason") == 1, out
    result.stdout.fnmatch_lines(["*1 test(s) skipped for hardware reasons*"])


def test_a_safe_skip_pattern_still_counts_and_long_reasons_stay_quick(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpuenv_skip_patterns = needs the (big|small) rig\n")
    pytester.makepyfile("import pytest\ndef test_a(): pytest.skip('needs the big rig ' + 'a' * 100000)")
    result = pytester.runpytest_subprocess("-p", "gpuenv", timeout=60)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*1 test(s) skipped for hardware reasons*"])


def test_control_characters_of_a_skip_reason_are_escaped_in_the_summary() -> None:
    lines = skip_summary_lines([("suite", "needs GPU \x1b[2J\x00 now", "host\x07")], {"a": {}, "b": {}})
    assert lines[1].endswith("needs GPU \\x1b[2J\\x00 now  [on host\\x07]"), lines
    assert all(ch.isprintable() for line in lines for ch in line)


def test_hosts_with_trees_of_the_same_name_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        monkeypatch.delenv(var, raising=False)
    assert host_name("/a/gpu") != host_name("/b/gpu")
    assert host_name("/a/gpu").endswith("(root /a/gpu)")


@pytest.mark.parametrize(("var", "value"), [("GPUENV_CPU_WATCHDOG", "10s"), ("GPUENV_CPU_WORKERS", "many")])
def test_a_bad_cpu_executor_variable_stops_the_run_at_start(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                            var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    pytester.makepyfile("def test_a(): pass")  # no kernel: the launch that read it before never comes
    result = pytester.runpytest_subprocess("-p", "gpuenv")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{var}={value!r}*(from the environment)*"])


def test_a_perf_max_time_too_short_to_measure_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-perf-max-time", "1e-300")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuenv-perf-max-time*1e-300*seconds in [[]0.001, 600[]]*"])


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="/dev/zero and the process checks are Linux's")
