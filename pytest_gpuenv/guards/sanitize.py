"""``--gpuenv-sanitize=memcheck|racecheck|synccheck|initcheck`` and ``@gpuenv_sanitize(*tools)``: selected tests
run one by one in a child process under a sanitizer, and each gets its verdict from what the tool found.

Selection (``tools_for``): a test marked ``gpuenv_sanitize`` (its tools; none given: the option's, else
memcheck), and with the option, the tests that use ``hip_kernel`` (``--gpuenv-sanitize-select=kernels``, the
default) or every test (``all``); ``-k`` and ``-m`` narrow the run as always.

The route depends on the backend (``route``):

- ``cuda``: ``Sanitizer.pytest_runtest_protocol`` runs the test in ``compute-sanitizer --tool X --print-limit
  100 --report-api-errors no --target-processes all --log-file LOG.%p python -m pytest NODEID ...`` (host API
  errors are not findings: without ``--report-api-errors no`` the Python bindings' probes of driver entry
  points, ``cuGetProcAddress_v2``, log 34 ``CUDA_ERROR_INVALID_VALUE`` errors in a plain run). The child has
  ``GPUENV_SANITIZE_CHILD`` set: its plugin (``guards.sanitize_child``) builds every kernel with ``-lineinfo``
  (``rtc.instrument``)
  so findings name the source line, notes the kernels built, and writes its test reports, serialized by
  pytest's ``pytest_report_to_serializable``, after each one (a child the tool ends still leaves what it
  reported). For memcheck and initcheck torch's caching allocator is turned off in the child
  (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``): inside a cached block an access past a tensor's end is no access
  out of bounds to the tool, and memory torch reuses counts as initialised.
- ``rocm``: memcheck only, as AddressSanitizer (``detect.asan``: gfx90a/gfx942/gfx950, the ASan runtimes,
  hipcc, XNACK): the child builds ``hip_kernel`` sources with hipcc, ``-fsanitize=address -shared-libsan -g``
  for ``<arch>:xnack+``, and runs with ``HSA_XNACK=1``, the host ASan runtime preloaded, ROCm's instrumented
  libraries first on ``LD_LIBRARY_PATH`` where installed, and ``ASAN_OPTIONS=detect_leaks=0:log_path=...``.
- ``cpu``: no child: the CPU executor's checked mode, every build checked (``compile_kernel(check=False)``
  too); the header says so.

The parent turns the child's reports back into this run's reports (the test's own, with its captured output):
a finding fails the test (its ``call`` report, else the last), the failure naming the tool, the kernel, the
access, the thread and block and the source line, with the tool's own text attached as a report section
(``gpuenv sanitize: memcheck``). A finding in a kernel the test did not build (torch's, cuBLAS's: not one that
``rtc.instrument`` noted) does what ``--gpuenv-sanitize-foreign`` says: fail (default: the test drove that
kernel), show (in the section and the summary; the verdict stays) or hide.

Where the tool cannot run, the option is a ``pytest.UsageError`` before any test (the run was asked to
sanitize: a green run that sanitized nothing would mislead), naming what is missing; a test that only its
marker selects is skipped with that reason instead.

Cost: the summary gives, per tool, the tests' own time under the tool (the durations of their setup, call and
teardown in the child, so interpreter start-up is left out) against the same tests' time in one plain child
run at the session's end (no tool, the same builds: the compile cache is warm by then, so a test that
compiles pays that once, under the tool: the figure is an upper bound of the tool's cost). Under xdist each
worker times its own tests and hands the figures to the controller.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, NamedTuple, Optional, Union

import pytest

from pytest_gpuenv.base.model import safe_repr
from pytest_gpuenv.detect import asan as rocm_asan
from pytest_gpuenv.detect.compilers import cuda_homes, find_tool
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.guards import findings as parse
from pytest_gpuenv.guards import sanitize_child as child
from pytest_gpuenv.marks.markers import SANITIZE as MARKER
from pytest_gpuenv.rtc import instrument
from pytest_gpuenv.session.options import SANITIZE_CHILD_VAR, SANITIZE_TOOLS
from pytest_gpuenv.session.state import GpuenvSession

#: the report property that carries a sanitized test's figures to the process that summarises the run
PROPERTY = "gpuenv_sanitized"
PRINT_LIMIT = 100
#: the most of the tool's text attached to a report
TEXT_LIMIT = 40_000


class Route(NamedTuple):
    """How this process sanitizes: ``kind`` ``cuda``, ``rocm`` or ``cpu``; compute-sanitizer's path and version, or
    what ``detect.asan`` found; ``missing``: why it cannot (empty: it can)."""

    kind: str
    tool_path: Optional[str] = None
    version: str = ""
    asan: Optional[rocm_asan.RocmAsan] = None
    missing: str = ""


def compute_sanitizer(fs: Fs) -> Optional[str]:
    """compute-sanitizer on PATH, else in ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``."""
    return find_tool(fs, "compute-sanitizer", os.environ, cuda_homes(fs, os.environ))


def route(session: GpuenvSession) -> Route:
    """The route on this machine (``--gpuenv-root``: the files under that root say what is installed)."""
    env = session.env
    fs = Fs(session.settings.root)
    if not env.has_gpu:
        return Route("cpu")
    if env.backend == "cuda":
        path = compute_sanitizer(fs)
        if path is None:
            return Route("cuda", missing="compute-sanitizer was not found on PATH nor in $CUDA_HOME/bin, "
                                         "$CUDA_PATH/bin or /usr/local/cuda/bin (it comes with the CUDA toolkit)")
        return Route("cuda", path, "" if fs.root_mode else _version(path))
    dev = env.usable_devices[0]
    found = rocm_asan.rocm_asan(fs, env.rocm.get("path"), dev, os.environ)
    return Route("rocm", asan=found, missing="; ".join(found.missing))


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    words = [w for line in out.splitlines() if "Version" in line for w in line.split()]
    return words[-1] if words else ""


def unavailable(r: Route, tool: str) -> str:
    """Why ``tool`` cannot run on this route ('' when it can)."""
    if r.kind == "rocm" and tool != "memcheck":
        return f"{tool} has no ROCm counterpart: AMD GPUs are checked by AddressSanitizer, as memcheck"
    if r.missing:
        what = "AddressSanitizer on this AMD GPU needs: " if r.kind == "rocm" else ""
        return what + r.missing
    return ""


# ------------------------------------------------------------------------------------------ configure
def configure(config: pytest.Config, session: GpuenvSession, tool: str) -> None:
    """Register the sanitizer's hooks: in a child, the recorder; else the parent's (``tool``: the option's, or
    "off" where only markers ask for it, at collection)."""
    if any(config.pluginmanager.get_plugin(n) is not None for n in ("gpuenv-sanitize", "gpuenv-sanitize-child")):
        return
    if os.environ.get(SANITIZE_CHILD_VAR):
        child.configure(config)
        return
    r = route(session)
    if tool != "off":
        why = unavailable(r, tool)
        if why and not _nothing_runs(config):
            raise pytest.UsageError(f"gpuenv: --gpuenv-sanitize={tool}: {why}")
    if r.kind == "cpu" and tool != "off":
        instrument.use(CPU_CHECKED)
    config.pluginmanager.register(Sanitizer(config, session, r, tool), "gpuenv-sanitize")


#: a CPU runner's builds under the option, and in a test its marker selects
CPU_CHECKED = instrument.Instrumentation(cpu_checked=True)


def _nothing_runs(config: pytest.Config) -> bool:
    return any(getattr(config.option, n, False) for n in ("collectonly", "showfixtures", "show_fixtures_per_test"))


# ------------------------------------------------------------------------------------------ selection
def tools_for(item: pytest.Item, tool: str, select: str) -> Union[list[str], str]:
    """The tools ``item`` runs under (empty: none, it runs here), or the error of a bad marker argument."""
    mark = item.get_closest_marker(MARKER)
    if mark is not None:
        if mark.kwargs or any(not isinstance(a, str) or a.strip().lower() not in SANITIZE_TOOLS for a in mark.args):
            call = ", ".join([safe_repr(a) for a in mark.args]
                             + [f"{k}={safe_repr(v)}" for k, v in mark.kwargs.items()])
            return f"invalid marker {MARKER}({call}): takes tool names only, each one of {', '.join(SANITIZE_TOOLS)}"
        named = list(dict.fromkeys(str(a).strip().lower() for a in mark.args))
        return named or [tool if tool != "off" else "memcheck"]
    if tool == "off":
        return []
    if select == "all" or "hip_kernel" in getattr(item, "fixturenames", ()):
        return [tool]
    return []


# ------------------------------------------------------------------------------------------ the parent
class Outcome(NamedTuple):
    """One test under one tool: its reports, the findings in kernels it built and in others, the tool's text, the
    test's own seconds (its reports' durations) and the child's wall seconds."""

    reports: list[pytest.TestReport]
    own: list[parse.Finding]
    other: list[parse.Finding]
    text: str
    seconds: float
    wall: float

    def counted(self, foreign: str) -> list[parse.Finding]:
        """The findings that fail the test under ``--gpuenv-sanitize-foreign=foreign``."""
        return self.own + (self.other if foreign == "fail" else [])


class Sanitizer:
    def __init__(self, config: pytest.Config, session: GpuenvSession, r: Route, tool: str) -> None:
        self.config, self.session, self.route, self.tool = config, session, r, tool
        self.settings = session.settings
        self.tmp = tempfile.mkdtemp(prefix="gpuenv-sanitize-")
        self.runs = itertools.count()  # names each child's files in ``tmp``
        self.ran: dict[str, float] = {}  # nodeid -> seconds under a tool (this process's children)
        #: tool -> nodeid -> (seconds under the tool, findings that fail it, findings shown only)
        self.totals: dict[str, dict[str, tuple[float, int, int]]] = {}
        self.plain: dict[str, float] = {}  # nodeid -> seconds in the plain run

    # -------------------------------------------------------------- header and summary
    def pytest_report_header(self) -> list[str]:
        r, tool = self.route, self.tool
        if r.kind == "cpu":
            name = tool if tool != "off" else "tests marked gpuenv_sanitize"
            return [f"gpuenv: sanitize {name}: no GPU here: kernels run on the CPU executor's checked mode (bounds, "
                    "races, barriers, uninitialised reads), compile_kernel(check=False) included; no child process"]
        if tool == "off":
            return []
        which = "every test" if self.settings.sanitize_select == "all" else "tests using hip_kernel"
        if r.kind == "cuda":
            how = f"compute-sanitizer {r.version} ({r.tool_path})".replace("  ", " ")
        else:
            a = r.asan
            how = (f"AddressSanitizer (hipcc -fsanitize=address, xnack {a.xnack if a else '?'}"
                   + (f", instrumented ROCm libraries {a.lib_dir}" if a and a.lib_dir else "") + ")")
        return [f"gpuenv: sanitize {tool}: {how}; {which} and those marked gpuenv_sanitize, each in a child process; "
                f"findings in other libraries' kernels: {self.settings.sanitize_foreign}"]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == PROPERTY and isinstance(value, dict):
                seen = self.totals.setdefault(str(value.get("tool")), {})
                seen[report.nodeid] = (float(value.get("seconds") or 0.0), int(value.get("findings") or 0),
                                       int(value.get("foreign") or 0))

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker's plain timings."""
        plain = getattr(node, "workeroutput", {}).get("gpuenv_sanitize_plain")
        if isinstance(plain, dict):
            self.plain.update({str(k): float(v) for k, v in plain.items()})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.ran:
            self.plain.update(self._plain_run())
            workeroutput = getattr(self.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput["gpuenv_sanitize_plain"] = dict(self.plain)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.totals:
            return
        terminalreporter.write_sep("-", "gpuenv: sanitize")
        for tool, seen in sorted(self.totals.items()):
            n, seconds = len(seen), sum(t for t, _, _ in seen.values())
            bad = sum(1 for _, f, _ in seen.values() if f)
            foreign = sum(1 for _, f, o in seen.values() if o and not f)
            timed = [i for i in seen if i in self.plain]
            plain, under = sum(self.plain[i] for i in timed), sum(seen[i][0] for i in timed)
            ratio = f" (x{under / plain:.1f})" if plain > 0 else ""
            against = f" against {_secs(plain)} plain{ratio}" if timed else \
                ", no plain time (the plain run did not report)"
            if timed and len(timed) != n:
                against += f" for the {len(timed)} of {n} timed plain ({_secs(under)} of it under the tool)"
            extra = f", {foreign} with findings only in other libraries' kernels" if foreign else ""
            terminalreporter.write_line(f"{tool}: {n} test(s), {bad} with findings{extra}; {_secs(seconds)} under the "
                                        f"tool{against} (the tests' own setup, call and teardown time)")

    # -------------------------------------------------------------- running a test
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """A CPU runner without the option: a marked test's builds are checked while it runs."""
        if self.route.kind == "cpu" and self.tool == "off" and item.get_closest_marker(MARKER) is not None:
            instrument.use(CPU_CHECKED)

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if self.route.kind == "cpu" and self.tool == "off":
            instrument.use(None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Optional[bool]:
        tools = tools_for(item, self.tool, self.settings.sanitize_select)
        if not tools or self.route.kind == "cpu":
            if isinstance(tools, str):  # a bad marker argument on a CPU runner still errors the test
                return self._emit(item, [self._made(item, "failed", tools, "setup")])
            return None
        if isinstance(tools, str):
            return self._emit(item, [self._made(item, "failed", tools, "setup")])
        why = next((w for w in (unavailable(self.route, t) for t in tools) if w), "")
        if why:
            return self._emit(item, [self._made(item, "skipped", (str(item.path), (item.location[1] or 0) + 1,
                                                                  f"Skipped: gpuenv_sanitize: {why}"), "setup")])
        outcomes = [self._run(item, t) for t in tools]
        return self._emit(item, self._verdict(item, tools, outcomes))

    def _emit(self, item: pytest.Item, reports: list[pytest.TestReport]) -> bool:
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for rep in reports:
            item.ihook.pytest_runtest_logreport(report=rep)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def _made(self, item: pytest.Item, outcome: str, longrepr: Any, when: Any) -> pytest.TestReport:
        keywords = {k: 1 for k in item.keywords}
        return pytest.TestReport(item.nodeid, item.location, keywords, outcome,  # type: ignore[arg-type]
                                 longrepr, when)

    def _env(self, tool: str, out: str, log: str) -> dict[str, str]:
        return child.environment(self.config, self.route.kind, self.route.asan, tool, out, log)

    def _run(self, item: pytest.Item, tool: str) -> Outcome:
        n = next(self.runs)
        out, log = os.path.join(self.tmp, f"{n}.json"), os.path.join(self.tmp, f"{n}.log")
        cmd = child.command(self.config, [item.nodeid])
        if self.route.kind == "cuda":
            cmd = [self.route.tool_path or "compute-sanitizer", "--tool", tool, "--print-limit", str(PRINT_LIMIT),
                   "--report-api-errors", "no", "--target-processes", "all", "--log-file", log + ".%p", *cmd]
        t = time.perf_counter()
        limit = self.settings.sanitize_timeout
        rc, output = child.run(cmd, self._env(tool, out, log), str(self.config.invocation_params.dir), limit)
        wall = time.perf_counter() - t
        text = "".join(_read_text(os.path.join(self.tmp, f)) for f in sorted(os.listdir(self.tmp))
                       if f.startswith(f"{n}.log"))
        if self.route.kind == "cuda":
            found, counted = parse.compute_sanitizer(text)
            if counted > len(found):  # what the parser did not read is still the tool's verdict
                found.append(parse.Finding(f"{counted - len(found)} more error(s) counted by the tool", None, "", None,
                                           None, ""))
        else:
            found = parse.asan(text + output)
        lines = child.results(out)
        reports = [self.config.hook.pytest_report_from_serializable(config=self.config, data=d["report"])
                   for d in lines if isinstance(d.get("report"), dict)]
        kernels = [str(k) for d in lines for k in d.get("kernels") or ()]
        own = [f for f in found if parse.owned(f, kernels)]
        other = [] if self.settings.sanitize_foreign == "hide" else [f for f in found if not parse.owned(f, kernels)]
        if rc is None:
            why = f"the test ran past --gpuenv-sanitize-timeout ({limit:g} s) under {tool}; its child process was ended"
            ended = self._made(item, "failed", f"gpuenv sanitize: {why}\n{output[-4000:]}", "call")
            reports = [r for r in reports if r.when == "setup"] + [ended]
        elif not reports:
            why = f"the child process under {tool} ended (exit status {rc}) before reporting"
            reports = [self._made(item, "failed", f"gpuenv sanitize: {why}\n{output[-4000:]}", "call")]
        seconds = sum(float(getattr(r, "duration", 0.0)) for r in reports) if rc is not None else wall
        if rc is not None:  # (a test that ran out of time is not timed plain: it has no time to compare)
            self.ran[item.nodeid] = self.ran.get(item.nodeid, 0.0) + seconds
        return Outcome(reports, own, other, text, seconds, wall)

    def _verdict(self, item: pytest.Item, tools: list[str], outcomes: list[Outcome]) -> list[pytest.TestReport]:
        """The reports of the test: those of the first tool whose run failed (else the last tool's), with every
        tool's findings."""
        foreign = self.settings.sanitize_foreign
        pick = next((o for o in outcomes if o.counted(foreign) or any(r.failed for r in o.reports)), outcomes[-1])
        reports = pick.reports
        target = next((r for r in reports if r.when == "call"), reports[-1])
        lines: list[str] = []
        for tool, o in zip(tools, outcomes):
            if o.own:
                lines.append(f"gpuenv sanitize ({tool}): {len(o.own)} finding(s) in kernels this test built")
                lines += [f"  {f.describe()}" for f in o.own[:20]]
            if o.other:
                how = ("they fail it; --gpuenv-sanitize-foreign=show or hide to let them pass" if foreign == "fail"
                       else "shown only: --gpuenv-sanitize-foreign=show")
                lines.append(f"gpuenv sanitize ({tool}): {len(o.other)} finding(s) in kernels this test did not build "
                             f"(a library's, torch's; {how})")
                lines += [f"  {f.describe()}" for f in o.other[:20]]
            if o.own or o.other:
                target.sections.append((f"gpuenv sanitize: {tool}", o.text[-TEXT_LIMIT:]))
            target.user_properties.append((PROPERTY, {"tool": tool, "findings": len(o.counted(foreign)),
                                                      "foreign": len(o.other), "seconds": o.seconds, "wall": o.wall}))
        failing = next((t for t, o in zip(tools, outcomes) if o.counted(foreign)), None)
        if failing is not None and not hasattr(target, "wasxfail") and not target.skipped:
            text = "\n".join(lines + [f"(the tool's own text: section 'gpuenv sanitize: {failing}' below)"])
            if target.failed and target.longrepr is not None:
                text += "\n\n" + str(target.longrepr)
            target.outcome, target.longrepr = "failed", text
        elif lines:
            target.sections.append(("gpuenv sanitize", "\n".join(lines)))
        return reports

    def _plain_run(self) -> dict[str, float]:
        """The same tests, once, in one child without the tool: each test's own seconds."""
        ids = list(self.ran)
        out = os.path.join(self.tmp, "plain.json")
        budget = 60.0 + sum(self.ran.values()) * 2
        with contextlib.suppress(OSError):
            child.run(child.command(self.config, ids), self._env("plain", out, os.path.join(self.tmp, "plain.log")),
                      str(self.config.invocation_params.dir), budget)
        times: dict[str, float] = {}
        root = str(self.config.rootpath)
        for d in (line.get("report") or {} for line in child.results(out)):
            nodeid = str(d.get("nodeid", ""))
            nodeid = os.path.relpath(nodeid, root) if os.path.isabs(nodeid.split("::")[0]) else nodeid
            times[nodeid] = times.get(nodeid, 0.0) + float(d.get("duration") or 0.0)
        return times


def _secs(x: float) -> str:
    return f"{x:.2f} s" if x >= 1 else f"{x:.3f} s"


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4 << 20)
    except OSError:
        return ""
