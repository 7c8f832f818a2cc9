"""What the plugin does to each test: its marks at collection, its gate at setup, its reports.

``modify_items``: ``gpu_bench`` users get the ``gpuenv_perf`` mark (and ``perf`` where that name is the
plugin's), each item's plugin marks are read and checked once (a bad marker argument is kept to fail that
test alone; the others are kept in the item's stash for setup), ``xfail_on`` becomes an ``xfail`` mark,
``--gpuenv-perf=off`` skips perf tests, and ``--gpuenv-plan`` computes its table. Where some item carries a
plugin mark or uses a fixture of the plugin that may skip, it registers ``Gate``, the hooks of such tests
(a run whose tests are none of the plugin's never calls them):
``setup`` (for the items collection found something to check: plugin marks or a GPU fixture): the marks'
``Skip`` against this process's host (or a skip naming the test that poisoned the GPU context, asked of
``pytest_gpuenv.runtime.poisoned``); ``adjust_report``: a skip the plugin made carries its category, cause
and host in the report and points at the test rather than at this plugin, and a skip raised inside the
plugin is marked as the plugin's (``PLUGIN_SKIP``).
``Reports`` (registered at configure) sees every report in the process that logs it (``log_report``): where
the test ran in this process or in a forked child, a skip the suite wrote itself whose reason is a GPU one
(``suite_skip_cause``) is carried as category ``suite``, and a failure after a GPU fault says so; then it
counts the hardware skip the report carries (``hardware_skip``), wherever the test ran. The plugin's marks
are those ``marks.markers.plugin_marks`` gives.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn, Optional, Union

import pytest

from pytest_gpuenv.marks import markers, skip_patterns, skipping
from pytest_gpuenv.marks.skipping import Skip
from pytest_gpuenv.runtime import poisoned
from pytest_gpuenv.session.report import summary
from pytest_gpuenv.session.state import QUARANTINED, GpuenvSession, HardwareSkip, get_session

_SKIP_INFO = pytest.StashKey[Skip]()
#: what ``setup`` checks of an item, decided at collection, only for items that have something to check: its
#: plugin marks (read and checked; empty for a test that needs a GPU through a fixture only), or the error of a
#: bad marker argument
_GATE = pytest.StashKey[Union[str, list[markers.PluginMark]]]()
#: the package's folder: a skip raised from any of its modules is the plugin's (and points at the test)
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_GPU_FIXTURES = frozenset(("gpu_device", "gpu_bench", "hip_kernel"))
#: the plugin's fixtures that may skip a test (the GPU fixtures, and ``torch_device``)
_SKIPPING_FIXTURES = _GPU_FIXTURES | {"torch_device"}
#: the test report's user property that carries a hardware skip's [category, cause, host]
SKIP_PROPERTY = "gpuenv_skip"
#: the test report's attribute that marks a skip raised inside the plugin (its fixtures; not the suite's)
PLUGIN_SKIP = "gpuenv_plugin_skip"


class Gate:
    """The hooks of the tests the plugin decides about (``modify_items`` registers them where collection found
    one): the gate at setup, and the report of a skip the plugin made."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        setup(item)

    # trylast: the innermost wrapper, so other plugins' wrappers (a conftest's, pytest-html's) see the report as
    # this one leaves it, as they did when these were the plugin module's hooks
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        rep = yield
        adjust_report(item, rep, call)
        return rep


class Reports:
    """Every test report, in the process that logs it (``log_report``), and the modules the suite skips for a
    GPU reason (``pytest.skip("CUDA not available", allow_module_level=True)``): the run's hardware skips."""

    def __init__(self, session: GpuenvSession) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)  # before an xdist worker sends the report, and before others read it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        skip = log_report(report, self.session) if not report.passed else None
        if skip is not None:
            self.session.skips.append(skip)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        skip = collect_skip(report, self.session)
        if skip is not None:
            self.session.skips.append(skip)


def modify_items(items: list[pytest.Item], session: GpuenvSession) -> set[str]:
    """Mark and gate the collected tests; return the guards' markers (``@gpuenv_leak_check``,
    ``@gpuenv_sanitize``) that some test or node above one carries."""
    if not items:
        return set()
    config = items[0].config
    run_names = markers.names(config)
    perf_off = session.settings.perf == "off"
    parents: dict[object, list[markers.PluginMark]] = {}  # each module's (class's...) marks, walked once
    gated = False  # some item carries a plugin mark or uses a fixture of the plugin that may skip
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "gpu_bench" in fixtures:
            item.add_marker(pytest.mark.gpuenv_perf)
            if run_names.owns("perf"):
                item.add_marker(pytest.mark.perf)
        marks = markers.plugin_marks(item, parents, run_names)
        if not marks:  # most tests: nothing to check, warn about or mark
            if not _GPU_FIXTURES.isdisjoint(fixtures):  # (a poisoned GPU context skips it)
                item.stash[_GATE] = marks
            gated = gated or not _SKIPPING_FIXTURES.isdisjoint(fixtures)
            continue
        gated = True
        error = markers.check_marks(marks)
        item.stash[_GATE] = error or marks
        if error:
            continue
        markers.warn_small_sizes(item, marks)
        xf = skipping.xfail_for(marks, session.env)
        if xf is not None:
            item.add_marker(pytest.mark.xfail(reason=xf[0], strict=xf[1]))
        if perf_off and any(m.name == "perf" for m in marks):
            item.add_marker(pytest.mark.skip(reason="performance test skipped by --gpuenv-perf=off"))
    if gated:
        ensure_gate(config)
    nodes: list[Any] = [*items, *parents]  # every item and every node above one (plugin_marks walked them all)
    guards = (markers.LEAK_CHECK, markers.SANITIZE)
    return {m.name for node in nodes for m in node.own_markers if m.name in guards}


def ensure_gate(config: pytest.Config) -> None:
    """Register ``Gate`` once: at collection where a test needs it, or by a plugin fixture that may skip when a test
    asks for it at run time (``request.getfixturevalue``), so that its skip is reported as the plugin's."""
    if config.pluginmanager.get_plugin("gpuenv-gate") is None:
        config.pluginmanager.register(Gate(), "gpuenv-gate")


def fail_at_setup(item: pytest.Item, error: str) -> None:
    """Fail ``item`` at setup with ``error``: a bad argument of a plugin marker read at collection (``@gpu_dtypes``)."""
    item.stash[_GATE] = error
    ensure_gate(item.config)


def setup(item: pytest.Item) -> None:
    """Fail on a bad marker argument; skip when a marker's requirement is not met on this host, or when
    the GPU context of this process was poisoned by an earlier test and this one needs a GPU. An xdist
    worker on another host than its controller's names the host in the reason."""
    if _GATE not in item.stash:  # most tests: no plugin mark and no GPU fixture (seen at collection)
        return
    marks = item.stash[_GATE]
    if isinstance(marks, str):
        pytest.fail(marks, pytrace=False)
    session = get_session(item.config)
    skip = skipping.evaluate(marks, session.env) if marks else None
    poison = poisoned() if skip is None else None
    if poison is not None and _uses_gpu(item, marks):
        skip = Skip("problem", f"gpu-context-poisoned by {poison.by}", poison.reason())
    if skip is not None:
        skip = skip.noted(_host_note(session))
        item.stash[_SKIP_INFO] = skip
        pytest.skip(skip.reason)


def skip_without_gpu(item: pytest.Item, what: str, reason: Optional[str] = None) -> NoReturn:
    """Skip from a fixture that needs a usable GPU (``gpu_device``, ``torch_device``, ``gpu_bench``, and
    ``hip_kernel`` where it only compiles or is off: ``reason`` its own words), counted as a hardware skip like
    a marker's: grouped by the same cause ``requires_gpu`` would give."""
    try:
        session = get_session(item.config)
    except KeyError:  # the plugin is not configured (-p no:gpuenv with the fixture imported)
        pytest.skip(reason or f"{what} requires a usable GPU")
    cause = skipping.missing_gpu(session.env)
    reason = reason or f"{what} requires a usable GPU: found {session.env.describe()}"
    skip = Skip(cause.category, cause.cause, reason + _host_note(session))
    item.stash[_SKIP_INFO] = skip
    pytest.skip(skip.reason)


def _host_note(session: GpuenvSession) -> str:
    return f" [on host {session.host}]" if session.remote else ""


def _uses_gpu(item: pytest.Item, marks: list[markers.PluginMark]) -> bool:
    if any(m.name in markers.GPU_MARKERS for m in marks):
        return True
    return not _GPU_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def adjust_report(item: pytest.Item, rep: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """A skip the plugin made, in the process that ran the test (the report carries what it says)."""
    if not rep.skipped:
        return
    skip = item.stash.get(_SKIP_INFO, None)
    if skip is not None:
        _note_skip(rep, skip.category, skip.cause, get_session(item.config))
        # point at the test, not at this plugin (as pytest's own skip marks do)
        path, line = item.reportinfo()[:2]
        if line is not None:
            rep.longrepr = (str(path), line + 1, f"Skipped: {skip.reason}")
    elif _raised_in_plugin(call):  # not the suite's: ``log_report`` leaves it
        setattr(rep, PLUGIN_SKIP, True)
        if isinstance(rep.longrepr, tuple) and str(rep.longrepr[0]).startswith(_PKG_DIR):
            # raised inside one of our fixtures (hip_kernel, gpu_bench, gpu_device): show the test's place
            path, line = item.reportinfo()[:2]
            if line is not None:
                rep.longrepr = (str(path), line + 1, rep.longrepr[2] + _host_note(get_session(item.config)))


def log_report(report: pytest.TestReport, session: GpuenvSession) -> Optional[HardwareSkip]:
    """A report that did not pass, in the process that logs it; returns the hardware skip it carries. Where the
    test ran in this process or in a forked child (not an xdist worker's report, which carries its ``node`` and
    was seen there): a skip the suite wrote itself for a GPU reason is noted as category ``suite``, and a
    failure after a GPU fault says so."""
    made_here = getattr(report, "node", None) is None
    theirs = not (hasattr(report, "wasxfail") or hasattr(report, PLUGIN_SKIP)  # the suite's skip, not an xfail
                  or any(k == QUARANTINED for k, _ in report.user_properties))  # nor a quarantine's
    if made_here and report.skipped and theirs and hardware_skip(report) is None:
        cause = suite_skip_cause(report.longrepr, session)
        if cause is not None:
            _note_skip(report, "suite", cause, session)
    elif made_here and report.failed and report.when == "call":
        poison = poisoned()
        if poison is not None and poison.by != report.nodeid:
            report.sections.append(("gpuenv", f"this failure may follow from an earlier GPU fault: {poison.reason()}"))
    return hardware_skip(report)


def _note_skip(rep: pytest.TestReport, category: str, cause: str, session: GpuenvSession) -> None:
    """A hardware skip, in the report: the process that logs the report counts it (``hardware_skip``), so a
    test run in an xdist worker or in a forked child (pytest-forked) is counted where the run is summarised."""
    rep.user_properties.append((SKIP_PROPERTY, [category, cause, session.host]))


def _raised_in_plugin(call: pytest.CallInfo[None]) -> bool:
    """Whether the skip came from this package (a fixture's own skip), not from the suite."""
    excinfo = call.excinfo
    return excinfo is not None and any(str(e.path).startswith(_PKG_DIR) for e in excinfo.traceback)


def suite_skip_cause(longrepr: object, session: GpuenvSession) -> Optional[str]:
    """The summary cause of a skip the suite wrote itself (``pytest.skip("CUDA not available")``, a
    ``skipif``, ``unittest.skipUnless``) when its reason is a hardware one (``marks.skip_patterns``), else None."""
    reason = skip_patterns.reason_of(longrepr)
    if reason is None or not skip_patterns.is_hardware_reason(reason, session.settings.skip_patterns):
        return None
    return skip_patterns.cause_of(reason)


def collect_skip(report: pytest.CollectReport, session: GpuenvSession) -> Optional[HardwareSkip]:
    """A module (or class) the suite skipped at collection for a hardware reason, as a hardware skip."""
    cause = suite_skip_cause(report.longrepr, session) if report.skipped else None
    return HardwareSkip(report.nodeid, "suite", cause, session.host) if cause is not None else None


def check_required(config: pytest.Config, session: GpuenvSession) -> None:
    """``--gpuenv-require``: a ``pytest.UsageError`` (exit code 4) before any test when the backend is not
    usable, saying what was found, each problem and its fix. Not with ``--collect-only`` or ``--fixtures``
    (nothing runs)."""
    if session.settings.require == "off" or any(
            getattr(config.option, name, False) for name in ("collectonly", "showfixtures", "show_fixtures_per_test")):
        return
    failure = skipping.require_failure(session.env, session.settings.require, summary(session.env))
    if failure is not None:
        raise pytest.UsageError(failure)


def hardware_skip(report: pytest.TestReport) -> Optional[HardwareSkip]:
    """The hardware skip a test report carries (made in this process, an xdist worker, a forked child or the
    ``--dist gpu`` scheduler), or None."""
    if not report.skipped:
        return None
    for key, value in report.user_properties:
        if key == SKIP_PROPERTY and isinstance(value, (list, tuple)) and len(value) >= 2:
            return HardwareSkip(report.nodeid, str(value[0]), str(value[1]), str(value[2]) if len(value) > 2 else "")
    return None
