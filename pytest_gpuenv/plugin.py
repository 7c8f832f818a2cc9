"""pytest-gpuenv's hooks; each hands its event to the module that does the work.

The package is drawn in layers, each importing only those below it (``docs/development.md``): ``base``
(the model, paths, tables), ``runtime``, ``detect``, ``rtc``, ``perf``, ``marks`` (the markers and their
evaluation), ``session`` (options, the per-run state in the stash, the per-test gate and reports, header
and summary text), ``guards`` (crash, leak), ``dist`` (pytest-xdist: workers' GPUs, hosts, ``--dist gpu``,
the plan preview), ``fixtures``; this module composes them.

The subsystems behind a boundary are imported where a run needs them: ``dist`` (with pytest-xdist, or
``--gpuenv-plan``), the kernel compiler (``rtc``, by ``hip_kernel``), the timer (``perf``, by ``gpu_bench``),
the tolerance profiles (``base.tolerance``, by ``gpu_assert_close`` and an ini ``gpuenv_tolerances``), the
expected values' keys (``base.expected``, by ``gpu_expected``), the capability table (``base.capabilities``, by
``requires_capability`` and ``--gpuenv-require=CAPS``), the leak check (``guards.leak``, by ``--gpuenv-leak-check`` or a test's ``@gpuenv_leak_check``), the quarantine list
(``session.quarantine``, by ``--gpuenv-quarantine`` or an ini ``gpuenv_quarantine``), the sanitizer runs
(``guards.sanitize``, by ``--gpuenv-sanitize``, a test's ``@gpuenv_sanitize`` or in a sanitizer's child), the crash guard
(``guards.crash``, where HIP kernels may run on an AMD GPU, or in an xdist controller) and the run's files
(``session.state.Outputs``, registered with ``--gpuenv-json`` or ``--junitxml``).

Loading and collecting never import torch and never start a GPU runtime: detection reads files
(and NVML, which creates no context); anything a runtime must answer runs in a subprocess.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import pytest

from pytest_gpuenv import fixtures
from pytest_gpuenv.base.model import GpuEnv
from pytest_gpuenv.fixtures import gpu_bench, gpu_device, gpu_env, hip_kernel, torch_device  # noqa: F401
from pytest_gpuenv.fixtures.expected import gpu_expected  # noqa: F401
from pytest_gpuenv.fixtures.tolerance import gpu_assert_close_fixture  # noqa: F401
from pytest_gpuenv.marks import dtypes, markers
from pytest_gpuenv.session import hide, options, report, runtest, state
from pytest_gpuenv.session.options import Settings
from pytest_gpuenv.session.state import get_env, get_session


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    options.add_options(parser)
    pluginmanager.register(options.DistChoice(parser), "gpuenv-dist-choice")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    options.settle_optional_values(early_config, parser, args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    markers.register_aliases(config)
    config.addinivalue_line("markers", dtypes.LINE)
    session = state.start(config, _worker_env)
    if session.settings.quarantine is not None:
        from pytest_gpuenv.session import quarantine  # boundary: quarantine lists, only where one is given

        session.quarantine = quarantine.configure(config, session)
    if session.settings.backend == "cpu":
        session.hidden = hide.install(session.settings.hide_modules)
    config.pluginmanager.register(runtest.Reports(session), "gpuenv-skips")
    if session.settings.leak_check != "off":
        from pytest_gpuenv.guards import leak  # boundary: the leak check, only where it is on (or at collection)

        leak.configure(config, session.settings.leak_check, session.settings.leak_threshold)
    if session.settings.sanitize != "off" or options.SANITIZE_CHILD_VAR in os.environ:
        from pytest_gpuenv.guards import sanitize  # boundary: sanitizer runs, only where asked (or at collection)

        sanitize.configure(config, session, session.settings.sanitize)
    if session.hip_on_gpu or state.xdist_controller(config):
        from pytest_gpuenv.guards import crash  # boundary: the crash guard, where a GPU fault can end a process

        crash.start(config, session)
    if session.settings.plan and not hasattr(config, "workerinput"):
        from pytest_gpuenv.dist import plan  # boundary: the plan preview, only with --gpuenv-plan

        session.plan_profiles = plan.profiles(session.settings.plan_profiles)
    if session.settings.dist:
        options.check_dist_request(config)
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_gpuenv.dist import xdist  # boundary: the pytest-xdist side

        if session.settings.dist and not hasattr(config, "workerinput"):  # --gpuenv-dist: as --dist gpu
            config.option.dist = options.DIST
        xdist.configure(config, session)


def _worker_env(config: pytest.Config, settings: Settings) -> Optional[GpuEnv]:
    """In an xdist worker, the model its controller sent (``dist.worker.worker_env``, given this host as it
    stands before the run sets any variable); None elsewhere."""
    if not hasattr(config, "workerinput"):
        return None
    from pytest_gpuenv.dist import hosts, worker

    return worker.worker_env(config, settings, hosts.here(settings.root, settings.backend, settings.probe))


@pytest.hookimpl(trylast=True, specname="pytest_configure")
def pytest_configure_last(config: pytest.Config) -> None:
    """After the ini file and the conftests loaded at start have registered their markers."""
    markers.register_unprefixed(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(state.SESSION_KEY, None)
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
    runtest.check_required(session.config, get_session(session.config))


@pytest.hookimpl(tryfirst=True)
def pytest_markeval_namespace(config: pytest.Config) -> dict[str, Any]:
    """``@pytest.mark.skipif("gpuenv.backend == 'rocm'")`` can read the environment model."""
    return {"gpuenv": get_env(config)}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    dtypes.parametrize(metafunc)
    if "hip_kernel" in names:
        fixtures.parametrize_hip_kernel(metafunc)
    if "torch_device" in names:
        fixtures.parametrize_torch_device(metafunc)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    markers.refresh(config)
    run = get_session(config)
    bad_dtypes = dtypes.mark_items(items, run.env)  # (before the plan, which reads the marks it adds)
    if run.plan_profiles is not None:  # --gpuenv-plan
        from pytest_gpuenv.dist import plan

        run.plan_lines = plan.plan_lines(items, run.plan_profiles, len(run.settings.plan_profiles))
    asked = runtest.modify_items(items, run)
    if markers.LEAK_CHECK in asked and run.settings.leak_check == "off":
        from pytest_gpuenv.guards import leak  # boundary: the leak check, entered where a test asks for it

        leak.configure(config, "off", run.settings.leak_threshold)
    for item, error in bad_dtypes:
        runtest.fail_at_setup(item, error)
    if markers.SANITIZE in asked and run.settings.sanitize == "off":
        from pytest_gpuenv.guards import sanitize  # boundary: sanitizer runs, entered where a test asks for them

        sanitize.configure(config, run, "off")


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
        ("gpuenv: quarantine", session.quarantine.summary_lines() if session.quarantine is not None else []),
        ("gpuenv: performance", session.perf.summary_lines() if session.has_measurements else []),
    ]
    for title, lines in sections:
        if lines:
            terminalreporter.write_sep("-", title)
            for line in lines:
                terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    run = config.stash.get(state.SESSION_KEY, None)
    if run is None:
        return
    if run.has_measurements or hasattr(config, "workerinput"):  # records to name; a worker's to hand over
        from pytest_gpuenv.dist import worker

        if worker.finish_worker(config, run):
            return
    run.write_outputs(str(config.invocation_params.dir))
