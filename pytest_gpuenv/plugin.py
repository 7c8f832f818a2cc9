"""pytest-gpuenv's hooks; each hands its event to the module that does the work.

``_session`` (options, detection, the per-run state in the stash), ``markers`` and ``_skipping`` (the
markers and their evaluation), ``_runtest`` (what happens to each test: its hooks at setup and report are
registered by configure and collection, where a run needs them), ``report`` (header and
summary text), ``_xdist`` (workers: their GPUs, the model sent down, the measurements sent back),
``fixtures`` (the fixtures, found here by pytest).

The subsystems behind a boundary are imported where a run needs them: ``_xdist`` (with pytest-xdist; the
hosts, ``_hosts``, and the routing of ``--dist gpu``, ``_routing``, with it),
the kernel compiler (``rtc``, by ``hip_kernel``), the timer (``perf``, by ``gpu_bench``), the tolerance
profiles (``tolerance``, by ``gpu_assert_close`` and an ini ``gpuenv_tolerances``), the capability table
(``capabilities``, by ``requires_capability`` and ``--gpuenv-require=CAPS``), the plan preview (``plan``, by
``--gpuenv-plan``), the leak check (``_leak``, by ``--gpuenv-leak-check`` or a test's ``@gpuenv_leak_check``),
the crash guard (``_crash``, where HIP kernels may run on an AMD GPU, or in an xdist controller) and the
run's files (``_outputs``, with ``--gpuenv-json`` or ``--junitxml``).

Loading and collecting never import torch and never start a GPU runtime: detection reads files
(and NVML, which creates no context); anything a runtime must answer runs in a subprocess.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from pytest_gpuenv import _hide, _options, _runtest, _session, fixtures, markers, report
from pytest_gpuenv._options import Settings
from pytest_gpuenv._session import get_env, get_session
from pytest_gpuenv._tolerance_fixture import gpu_assert_close_fixture  # noqa: F401
from pytest_gpuenv.fixtures import gpu_bench, gpu_device, gpu_env, hip_kernel, torch_device  # noqa: F401
from pytest_gpuenv.model import GpuEnv


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    _options.add_options(parser)
    pluginmanager.register(_options.DistChoice(parser), "gpuenv-dist-choice")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    markers.register_aliases(config)
    session = _session.start(config, _worker_env)
    if session.settings.backend == "cpu":
        session.hidden = _hide.install(session.settings.hide_modules)
    config.pluginmanager.register(_runtest.Reports(session), "gpuenv-skips")
    if session.settings.leak_check != "off":
        from pytest_gpuenv import _leak  # boundary: the leak check, only where it is on (or, see modify_items)

        _leak.configure(config, session.settings.leak_check, session.settings.leak_threshold)
    if session.hip_on_gpu or _session.xdist_controller(config):
        from pytest_gpuenv import _crash  # boundary: the crash guard, where a GPU fault can end a process

        _crash.start(config, session)
    if session.settings.dist:
        _options.check_dist_request(config)
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_gpuenv import _xdist

        if session.settings.dist and not hasattr(config, "workerinput"):  # --gpuenv-dist: as --dist gpu
            config.option.dist = _options.DIST

        _xdist.configure(config, session)


def _worker_env(config: pytest.Config, settings: Settings) -> Optional[GpuEnv]:
    """In an xdist worker, the model its controller sent (``_xdist_worker.worker_env``, given this host as it
    stands before the run sets any variable); None elsewhere."""
    if not hasattr(config, "workerinput"):
        return None
    from pytest_gpuenv import _hosts, _xdist_worker

    return _xdist_worker.worker_env(config, settings, _hosts.here(settings.root, settings.backend, settings.probe))


@pytest.hookimpl(trylast=True, specname="pytest_configure")
def pytest_configure_last(config: pytest.Config) -> None:
    """After the ini file and the conftests loaded at start have registered their markers."""
    markers.register_unprefixed(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_session.SESSION_KEY, None)
    if session is not None:
        if session.hidden is not None:
            session.hidden.uninstall()
        session.restore_environ()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = get_session(config)
    lines = report.header_lines(session.env, verbose=config.get_verbosity(), worker=session.worker_gpu)
    hidden = session.hidden.header_line() if session.hidden is not None else None
    return lines + [x for x in (markers.header_line(config), hidden) if x]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _runtest.check_required(session.config, get_session(session.config))


@pytest.hookimpl(tryfirst=True)
def pytest_markeval_namespace(config: pytest.Config) -> dict[str, Any]:
    """``@pytest.mark.skipif("gpuenv.backend == 'rocm'")`` can read the environment model."""
    return {"gpuenv": get_env(config)}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if "hip_kernel" in names:
        fixtures.parametrize_hip_kernel(metafunc)
    if "torch_device" in names:
        fixtures.parametrize_torch_device(metafunc)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    markers.refresh(config)
    _runtest.modify_items(items, get_session(config))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    session = get_session(config)
    sections = [
        ("gpuenv: plan", session.plan_lines),
        ("gpuenv: markers", markers.late_lines(config)),
        ("gpuenv: hosts", report.host_lines(session.hosts)),
        ("gpuenv: hardware skips", report.skip_summary_lines(
            ((s.category, s.cause, s.host) for s in session.skips), session.hosts)),
        ("gpuenv: performance", session.perf.summary_lines() if session.has_measurements else []),
    ]
    for title, lines in sections:
        if lines:
            terminalreporter.write_sep("-", title)
            for line in lines:
                terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_session.SESSION_KEY, None)
    if state is None:
        return
    if state.has_measurements or hasattr(config, "workerinput"):  # records to name; a worker's to hand over
        from pytest_gpuenv import _xdist_worker

        if _xdist_worker.finish_worker(config, state):
            return
    state.write_outputs(str(config.invocation_params.dir))
