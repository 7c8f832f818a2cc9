"""Compile logs attributed to their kernel and shown once per (kernel, arch); the
``requires_memory(16)`` warning; notes apart from problems in ``gpuenv info``; the JSON report's run fields;
environment and perf verdicts as JUnit properties; no ``chmod 700`` advice for a shared folder.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_gpuenv import cli
from pytest_gpuenv.base.model import GpuEnv, Problem
from pytest_gpuenv.rtc import compilers
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.logs import LogOnce, attribute, kernel_spans
from pytest_gpuenv.rtc.source import Source

TWO = """#include <hip/hip_runtime.h>
// __global__ void commented_out(float* x) { }
extern "C" __global__ void good(float* x);   // a prototype first
extern "C" __global__ void good(float* x) {
  if (x) { x[0] = 1; }
}

__device__ float helper() { return missing_a; }

extern "C" __global__ void bad(float* x) {
  x[0] = undefined_thing;
}
"""


def test_kernel_spans_skip_prototypes_and_comments():
    assert kernel_spans(TWO) == [(4, 6, "good"), (10, 12, "bad")]


@pytest.mark.parametrize("style", ["clang", "edg"])
def test_each_error_line_names_its_kernel(style):
    src = Source(text=TWO, path="/k/two.hip", display="/k/two.hip")
    loc = (lambda n: f"/k/two.hip:{n}:10: error:") if style == "clang" else (lambda n: f"/k/two.hip({n}): error:")
    log = f"{loc(11)} use of undeclared identifier 'undefined_thing'\n  x[0] = undefined_thing;\n" \
          f"{loc(8)} use of undeclared identifier 'missing_a'\n/other.h:11:1: error: elsewhere\n"
    exc = KernelCompileError("/k/two.hip:11: use of undeclared identifier 'undefined_thing' (compiling kernel "
                             "'good' for gfx90a with hiprtc)", log=log, file="/k/two.hip", line=11, arch="gfx90a")
    attribute(exc, src, "good")
    lines = exc.log.splitlines()
    assert lines[0].endswith("'undefined_thing'  [kernel 'bad']") and lines[1] == "  x[0] = undefined_thing;"
    assert lines[2].endswith("'missing_a'") and lines[3].endswith("elsewhere")  # a helper; another file
    assert exc.kernels == ["bad"]
    assert str(exc).startswith("/k/two.hip:11: use of undeclared identifier 'undefined_thing' in kernel 'bad' "
                               "(compiling kernel 'good' for gfx90a")
    exc2 = KernelCompileError("/k/two.hip:11: x (compiling kernel 'bad' for gfx90a with hiprtc)", log=log,
                              file="/k/two.hip", line=11)
    assert "in kernel" not in attribute(exc2, src, "bad").message  # its own kernel: nothing to add


def test_log_once_per_arch_and_compiler():
    logs = LogOnce()
    a = KernelCompileError("head", log="the log", arch="gfx90a", compiler="hiprtc")
    b = KernelCompileError("head", log="the log", arch="sm_90", compiler="nvrtc")
    assert "the log" in logs.text(a, "in the failure of t1") and "the log" in logs.text(b, "in the failure of t1")
    assert logs.text(a, "in the failure of t2") == "head (the hiprtc log is shown in the failure of t1)"


def _any_compiler() -> bool:
    return any(compilers.get(n).available() for n in ("nvrtc", "hiprtc", "nvcc", "hipcc"))


@pytest.mark.slow
def test_hip_kernel_shows_a_log_once_per_kernel_and_arch(pytester, tmp_path):
    if not _any_compiler():
        pytest.skip(f"requires a HIP compiler: looked for {compilers.looked_for()}")
    pytester.mkdir("kernels")
    (pytester.path / "kernels" / "two.hip").write_text(TWO.replace("missing_a", "1.0f"))
    pytester.makepyfile(test_k="""
        def test_good(hip_kernel):
            hip_kernel("two.hip", "good")

        def test_bad(hip_kernel):
            hip_kernel("two.hip", "bad")
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile",
                                           f"--gpuenv-cache-dir={tmp_path}/cache")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    tagged = [line for line in result.outlines if "error" in line and "[kernel 'bad']" in line]
    archs = out.count("(compiling kernel 'good' for ")
    assert archs >= 1 and len(tagged) == archs, out  # each arch's log once, in test_good's failure
    assert "in kernel 'bad' (compiling kernel 'good'" in out
    assert "log is shown in the failure of test_k.py::test_good" in out


@pytest.mark.slow
def test_compile_only_tests_are_listed_in_the_json_report(pytester, tmp_path):
    if not _any_compiler():
        pytest.skip(f"requires a HIP compiler: looked for {compilers.looked_for()}")
    good = TWO[: TWO.index("__device__")]
    pytester.makepyfile(test_k=f"""
        def test_good(hip_kernel):
            hip_kernel({good!r}, "good")
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "--gpuenv-json=r.json",
                                           f"--gpuenv-cache-dir={tmp_path}/cache")
    result.assert_outcomes(skipped=1)
    (entry,) = json.loads((pytester.path / "r.json").read_text())["compile_only"]
    assert entry["nodeid"] == "test_k.py::test_good" and entry["archs"]


def test_requires_memory_bare_small_number_warns(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.requires_memory(16)
        def test_sixteen(): pass

        @pytest.mark.requires_memory("16GiB")
        def test_unit(): pass

        @pytest.mark.requires_memory(2**30)
        def test_bytes(): pass
    """)
    result = pytester.runpytest("--gpuenv-backend=cpu", "-rs")
    result.stdout.fnmatch_lines(["*PytestWarning: test_requires_memory_bare_small_number_warns.py::test_sixteen: "
                                 "@requires_memory(16) means 16 bytes; give a unit, e.g. @requires_memory('16GiB')*"])
    assert result.stdout.str().count("means") == 1


def test_gpuenv_info_shows_notes_apart_from_problems():
    env = GpuEnv(problems=[Problem("rocm-installed-no-gpu", "ROCm is installed, no AMD GPU", severity="info"),
                           Problem("torch-cpu-build", "torch is a CPU build")])
    lines = cli.info_text(env).splitlines()
    assert "problems: torch-cpu-build: torch is a CPU build" in lines
    assert "notes: rocm-installed-no-gpu: ROCm is installed, no AMD GPU" in lines
    assert not any("problems:" in line and "rocm-installed" in line for line in lines)
    only_notes = cli.info_text(GpuEnv(problems=env.problems[:1])).splitlines()
    assert only_notes[1].startswith("notes: ") and not any(x.startswith("problems:") for x in only_notes)


def test_a_note_is_a_note_everywhere(pytester, roots, capsys):
    """``rocm-installed-no-driver`` (severity "info"): "notes" in the pytest header, ``gpuenv info`` and JUnit,
    ``[note]`` in ``gpuenv doctor`` (which exits 0); never "problems"."""
    root = str(roots("rocm_installed_no_gpu"))
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest(f"--gpuenv-root={root}", "--junitxml=j.xml")
    result.stdout.fnmatch_lines(["gpuenv: notes: rocm-installed-no-driver: *"])
    assert "problems" not in result.stdout.str()
    junit = (pytester.path / "j.xml").read_text()
    assert '"gpuenv_problems" value="none"' in junit and '"gpuenv_notes" value="rocm-installed-no-driver"' in junit
    assert cli.main(["info", "--root", root]) == 0
    assert cli.main(["doctor", "--root", root]) == 0
    out = capsys.readouterr().out
    assert "\nnotes: rocm-installed-no-driver: " in out and "\n[note] rocm-installed-no-driver: " in out
    assert "problems" not in out and "[info]" not in out


SUITE = """
import pytest
from pytest_gpuenv.session.state import mark_compile_only
from pytest_gpuenv.session.state import get_session
from pytest_gpuenv.perf._entries import PerfEntry

def test_pass(): pass
def test_fail(): assert False
def test_skip(): pytest.skip("no")
@pytest.mark.xfail(strict=False)
def test_xfail(): assert False
@pytest.mark.xfail(strict=False)
def test_xpass(): pass
@pytest.fixture
def broken(): raise RuntimeError("setup")
def test_error(broken): pass
@pytest.mark.requires_gpu
def test_gpu(): pass

def test_compile_only(request):
    mark_compile_only(request.node, ["gfx90a", "sm_90"])
    pytest.skip("compiled only")

def test_perf(request):
    get_session(request.config).perf.add(PerfEntry(nodeid=request.node.nodeid, name="copy", median_s=1.25e-5,
                                                    budget="<= 250 us", verdict="PASS"))
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_json_run_fields_and_junit_properties(pytester, workers):
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_suite=SUITE)
    args = ["--gpuenv-backend=cpu", "--gpuenv-json=out/r.json", "--junitxml=out/j.xml"]
    args += ["-p", "xdist", "-n", str(workers)] if workers else []
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2, failed=1, skipped=3, xfailed=1, xpassed=1, errors=1)
    data = json.loads((pytester.path / "out" / "r.json").read_text())
    from pytest_gpuenv import __version__

    assert data["gpuenv_version"] == __version__ and data["timestamp"].endswith("Z") and "T" in data["timestamp"]
    assert data["outcomes"] == {"passed": 2, "failed": 1, "skipped": 3, "xfailed": 1, "xpassed": 1, "error": 1}
    assert data["compile_only"] == [{"nodeid": "test_suite.py::test_compile_only", "archs": ["gfx90a", "sm_90"]}]
    assert [s["nodeid"] for s in data["skips"]] == ["test_suite.py::test_gpu"]
    root = ET.parse(pytester.path / "out" / "j.xml").getroot()
    suite = root.find("testsuite") if root.tag == "testsuites" else root
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["gpuenv_backend"] == "cpu (forced by --gpuenv-backend=cpu)"
    # the devices found, even where the backend hides them (the GPU machine lists its H200s here)
    from pytest_gpuenv.detect import detect

    assert (props["gpuenv_devices"] == "none") == (not detect().devices)
    assert "gpuenv_problems" in props
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_perf")
    perf = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert perf == {"gpuenv_perf[copy].median_s": "1.25e-05", "gpuenv_perf[copy].budget": "<= 250 us",
                    "gpuenv_perf[copy].verdict": "PASS"}


def test_no_perf_properties_without_junitxml(pytester):
    pytester.makepyfile(test_suite=SUITE)
    reprec = pytester.inline_run("--gpuenv-backend=cpu", "-k", "perf")
    reports = reprec.getreports("pytest_runtest_logreport")
    assert reports and not [n for r in reports for n, _ in r.user_properties if n.startswith("gpuenv_perf")]


# a shared or team (setgid) cache folder is never told to chmod 700: that case is
# tests/kernels/test_rtc_cache_folders.py::test_refusal_never_suggests_chmod_700_on_a_shared_folder


def test_help_texts_say_what_the_options_do(pytester):
    """--help agrees with the README: --gpuenv-backend's cuda/rocm skip (not stop), --gpuenv-json holds skips and
    outcomes too, --gpuenv-plan-profile takes @FILE.json; `gpuenv compile --help` lists the cpu target."""
    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())
    for words in ("tests that need the other one skip; to stop the run instead, --gpuenv-require",
                  "every hardware skip (category and cause), the outcomes",
                  "or @FILE.json (a runner's `gpuenv info --json`), written --gpuenv-plan-profile=@FILE.json"):
        assert words in text, words
    from pytest_gpuenv.rtc import _cli

    assert "or cpu (the CPU executor, built by the host C++ compiler)" in " ".join(_cli._parser().format_help().split())


CONTROL_NAME = "red\x1b[31m\nline\x00\x7f\u2028\ud800end"
ESCAPED_NAME = "red\\x1b[31m\\nline\\x00\\x7f\\u2028\\ud800end"


def test_control_characters_in_a_measurement_name_are_escaped(pytester):
    """The JUnit XML stays well-formed and the terminal gets no raw control character."""
    pytester.makepyfile(f"""
        from pytest_gpuenv.session.state import get_session
        from pytest_gpuenv.perf._entries import PerfEntry

        def test_perf(request):
            get_session(request.config).perf.add(PerfEntry(nodeid=request.node.nodeid, name={CONTROL_NAME!r},
                                                            median_s=1.25e-5, verdict="PASS"))
    """)
    result = pytester.runpytest_subprocess("--gpuenv-backend=cpu", "--junitxml=j.xml", "--gpuenv-json=r.json")
    result.assert_outcomes(passed=1)
    assert "\x1b" not in result.stdout.str() and ESCAPED_NAME in result.stdout.str()
    case = next(ET.parse(pytester.path / "j.xml").getroot().iter("testcase"))
    assert f"gpuenv_perf[{ESCAPED_NAME}].median_s" in {p.get("name") for p in case.iter("property")}
    assert json.loads((pytester.path / "r.json").read_text())["measurements"][0]["name"] == ESCAPED_NAME


def test_gpu_bench_escapes_a_callables_name_and_the_name_given():
    import contextlib

    from _perf_fake import FakeBackend, FakeClock

    from pytest_gpuenv.perf import GpuBench, PerfContext

    clock = FakeClock()
    ctx = PerfContext(backend_factory=lambda: FakeBackend([1e-4], clock=clock), nodeid="t.py::test_k",
                      perf_mode="warn", clock=clock, lock=lambda info: contextlib.nullcontext())
    bench = GpuBench(ctx)

    def fn():
        pass

    fn.__name__ = "k\x1b[2J"
    assert bench(fn).name == "k\\x1b[2J"
    assert bench(lambda: None, name="a\nb").name == "a\\nb"
