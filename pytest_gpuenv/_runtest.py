"""What the plugin does to each test: its marks at collection, its gate at setup, its report.

``modify_items``: ``gpu_bench`` users get the ``gpuenv_perf`` mark (and ``perf`` where that name is the
plugin's), each item's plugin marks are read and checked once (a bad marker argument is kept to fail that
test alone; the others are kept in the item's stash for setup), ``xfail_on`` becomes an ``xfail`` mark,
``--gpuenv-perf=off`` skips perf tests, and ``--gpuenv-plan`` computes its table. ``setup`` (for the items
collection found something to check: plugin marks or a GPU fixture): the marks'
``Skip`` against this process's host (or a skip naming the test that poisoned the GPU context, asked of
``pytest_gpuenv.runtime.poisoned``).
``adjust_report``: a hardware skip carries its category, cause and host in the report (the process that
logs the report counts it through ``hardware_skip``, wherever the test ran) and points at the test rather
than at this plugin; a skip the suite wrote itself whose reason is a GPU one (``suite_skip_cause``) is
carried as category ``suite``; a failure after a GPU fault says so. The plugin's marks are those ``markers.plugin_marks`` gives.
"""

from __future__ import annotations

import os
from typing import NoReturn, Optional, Union

import pytest

from pytest_gpuenv import _skip_patterns, _skipping, markers
from pytest_gpuenv._session import GpuenvSession, HardwareSkip, get_session
from pytest_gpuenv._skipping import Skip
from pytest_gpuenv.report import summary
from pytest_gpuenv.runtime import poisoned

_SKIP_INFO = pytest.StashKey[Skip]()
#: what ``setup`` checks of an item, decided at collection, only for items that have something to check: its
#: plugin marks (read and checked; empty for a test that needs a GPU through a fixture only), or the error of a
#: bad marker argument
_GATE = pytest.StashKey[Union[str, list[markers.PluginMark]]]()
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_GPU_FIXTURES = ("gpu_device", "gpu_bench", "hip_kernel")
#: the test report's user property that carries a hardware skip's [category, cause, host]
SKIP_PROPERTY = "gpuenv_skip"


def modify_items(items: list[pytest.Item], session: GpuenvSession) -> None:
    if session.plan_profiles is not None:  # --gpuenv-plan (whose profiles _session.start read)
        from pytest_gpuenv.plan import plan_lines

        session.plan_lines = plan_lines(items, session.plan_profiles, len(session.settings.plan_profiles))
    perf_off = session.settings.perf == "off"
    parents: dict[object, list[markers.PluginMark]] = {}  # each module's (class's...) marks, walked once
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "gpu_bench" in fixtures:
            item.add_marker(pytest.mark.gpuenv_perf)
            if markers.owns(item.config, "perf"):
                item.add_marker(pytest.mark.perf)
        marks = markers.plugin_marks(item, parents)
        if not marks:  # most tests: nothing to check, warn about or mark
            if any(f in fixtures for f in _GPU_FIXTURES):  # (a poisoned GPU context skips it)
                item.stash[_GATE] = marks
            continue
        error = markers.check_marks(marks)
        item.stash[_GATE] = error or marks
        if error:
            continue
        markers.warn_small_sizes(item, marks)
        xf = _skipping.xfail_for(marks, session.env)
        if xf is not None:
            item.add_marker(pytest.mark.xfail(reason=xf[0], strict=xf[1]))
        if perf_off and any(m.name == "perf" for m in marks):
            item.add_marker(pytest.mark.skip(reason="performance test skipped by --gpuenv-perf=off"))
    settings = session.settings
    if settings.leak_check == "off" and any(markers.LEAK_CHECK in item.keywords for item in items):
        from pytest_gpuenv import _leak  # boundary: the leak check, entered where a test asks for it

        _leak.configure(items[0].config, "off", settings.leak_threshold)


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
    skip = _skipping.evaluate(marks, session.env) if marks else None
    poison = poisoned() if skip is None else None
    if poison is not None and _uses_gpu(item, marks):
        skip = Skip("problem", f"gpu-context-poisoned by {poison.by}", poison.reason())
    if skip is not None:
        skip = skip.noted(_host_note(session))
        item.stash[_SKIP_INFO] = skip
        pytest.skip(skip.reason)


def skip_without_gpu(item: pytest.Item, what: str) -> NoReturn:
    """Skip from a fixture that needs a usable GPU (``gpu_device``, ``torch_device``, ``gpu_bench``),
    counted as a hardware skip like a marker's: grouped by the same cause ``requires_gpu`` would give."""
    session = get_session(item.config)
    cause = _skipping.missing_gpu(session.env)
    skip = Skip(cause.category, cause.cause,
                          f"{what} requires a usable GPU: found {session.env.describe()}" + _host_note(session))
    item.stash[_SKIP_INFO] = skip
    pytest.skip(skip.reason)


def _host_note(session: GpuenvSession) -> str:
    return f" [on host {session.host}]" if session.remote else ""


def _uses_gpu(item: pytest.Item, marks: list[markers.PluginMark]) -> bool:
    if any(m.name in markers.GPU_MARKERS for m in marks):
        return True
    return any(f in getattr(item, "fixturenames", ()) for f in _GPU_FIXTURES)


def adjust_report(item: pytest.Item, rep: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    if rep.outcome == "passed":  # most reports: nothing below applies to them
        return
    skip = item.stash[_SKIP_INFO] if _SKIP_INFO in item.stash else None
    if skip is not None and rep.skipped:
        _note_skip(rep, skip.category, skip.cause, get_session(item.config))
        # point at the test, not at this plugin (as pytest's own skip marks do)
        path, line = item.reportinfo()[:2]
        if line is not None:
            rep.longrepr = (str(path), line + 1, f"Skipped: {skip.reason}")
    elif rep.skipped and isinstance(rep.longrepr, tuple) and str(rep.longrepr[0]).startswith(_PKG_DIR):
        # a skip raised inside one of our fixtures (hip_kernel, gpu_bench, gpu_device): show the test's place
        path, line = item.reportinfo()[:2]
        if line is not None:
            rep.longrepr = (str(path), line + 1, rep.longrepr[2] + _host_note(get_session(item.config)))
    elif rep.skipped and not hasattr(rep, "wasxfail") and not _raised_in_plugin(call):
        session = get_session(item.config)
        cause = suite_skip_cause(rep.longrepr, session)
        if cause is not None:
            _note_skip(rep, "suite", cause, session)
    if rep.failed and rep.when == "call":
        poison = poisoned()
        if poison is not None and poison.by != item.nodeid:
            rep.sections.append(("gpuenv", f"this failure may follow from an earlier GPU fault: {poison.reason()}"))


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
    ``skipif``, ``unittest.skipUnless``) when its reason is a hardware one (``_skip_patterns``), else None."""
    reason = _skip_patterns.reason_of(longrepr)
    if reason is None or not _skip_patterns.is_hardware_reason(reason, session.settings.skip_patterns):
        return None
    return _skip_patterns.cause_of(reason)


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
    failure = _skipping.require_failure(session.env, session.settings.require, summary(session.env))
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
