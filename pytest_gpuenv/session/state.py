"""The plugin's state for one run: one ``GpuenvSession`` in ``config.stash`` under ``SESSION_KEY``.

``start(config, worker_env)`` resolves the options, names this host (``host_name``), detects the environment (or
takes the model an xdist controller sent down), sets the variables the run needs and stores the
session; hooks and fixtures read it with ``get_session`` (or ``get_env`` / ``get_settings``). The
session holds the hardware skips, the ``--gpuenv-plan`` table, the xdist worker's GPUs, the hosts of
the run, the variables to restore at the end and the run's ``PerfSession`` (created on first use: the
timer is a subsystem the run imports only where a test measures). ``start`` also registers the run's ``Outputs``
(below) when ``--gpuenv-json`` or ``--junitxml`` is given.

What a run reports besides the terminal: the run's own fields in ``--gpuenv-json`` and, with
``--junitxml``, JUnit properties that CI dashboards show.

``Outputs`` is one plugin object per run, registered by ``start``:

- ``run_fields()``: the plugin version, when the run started (ISO 8601, UTC), the outcome counts (pytest's
  own tally: the terminal reporter's, which sees every xdist worker's reports) and the tests whose
  kernels were only compile-checked (``hip_kernel`` without a GPU); the fixture marks such a test with a
  user property (``mark_compile_only``), which its report carries to the xdist controller; and each
  ``gpu_expected`` choice (the user property ``EXPECTED``, carried likewise).
- with ``--junitxml``: testsuite properties for the environment (``gpuenv_backend``, ``gpuenv_devices``,
  driver, ROCm and torch versions, ``gpuenv_problems``), added through the junitxml plugin's
  ``add_global_property``; and, on each performance test, properties per measurement
  (``gpuenv_perf[NAME].median_s``, ``.budget``, ``.verdict``) in the test's user properties, which
  junitxml writes as the test case's ``<property>`` elements.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.model import GpuEnv
from pytest_gpuenv.detect import apply_backend, detect, hide_gpus_env
from pytest_gpuenv.detect.visible import MASK_VARS
from pytest_gpuenv.session import options as _options
from pytest_gpuenv.session.hide import HiddenModules
from pytest_gpuenv.session.options import Settings
from pytest_gpuenv.session.report import hosts_json

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.perf.session import PerfSession
    from pytest_gpuenv.session.quarantine import Quarantine


class HardwareSkip(NamedTuple):
    """A test skipped for a hardware reason; ``category`` and ``cause`` group it in the summary; ``host``: the
    host the test ran on (``GpuenvSession.host`` of the process that ran it)."""

    nodeid: str
    category: str
    cause: str
    host: str = ""

    def to_dict(self) -> dict[str, str]:
        return self._asdict()


class GpuenvSession:
    """The run's state, made by ``start``."""

    def __init__(self, env: GpuEnv, settings: Settings, host: str = "") -> None:
        self.env = env
        self.settings = settings
        #: hardware skips of the run (on the xdist controller: every worker's, from the test reports)
        self.skips: list[HardwareSkip] = []
        #: in an xdist worker, what it was given: {"id", "desc", "vars", "shared"}; else None
        self.worker_gpu: Optional[dict[str, Any]] = None
        #: the host this process runs on, for people (``dist.hosts.Host.name``); ``remote``: an xdist worker on a
        #: host other than its controller's (its skip reasons name the host)
        self.host = host
        self.remote = False
        #: on the xdist controller: each host its workers reported, by host key:
        #: {"name", "summary", "controller": bool, "workers": {worker id: its GPUs}}
        self.hosts: dict[str, dict[str, Any]] = {}
        #: on the ``--dist gpu`` controller: each GPU's figures of the claims (``dist.ledger.Gpu.to_dict``)
        self.gpu_claims: list[dict[str, Any]] = []
        #: ``--gpuenv-plan``: the runner profiles, then the table printed at the end
        self.plan_profiles: Optional[list[tuple[str, GpuEnv]]] = None
        self.plan_lines: list[str] = []
        #: variables this session set, with the values pytest_unconfigure puts back (None: was unset)
        self.saved_environ: dict[str, Optional[str]] = {}
        #: the JSON report's run fields and the JUnit properties (registered as a plugin by ``start``)
        self.outputs: Optional[Outputs] = None
        #: ``--gpuenv-backend=cpu``: the finder that hides GPU-only packages from imports (``session.hide``)
        self.hidden: Optional[HiddenModules] = None
        #: the run's quarantine list (``session.quarantine``), where one is given
        self.quarantine: Optional[Quarantine] = None
        self._perf: Optional[PerfSession] = None

    @property
    def perf(self) -> PerfSession:
        """The run's performance records (created on first use)."""
        if self._perf is None:
            from pytest_gpuenv.perf.session import PerfSession

            self._perf = PerfSession()
        return self._perf

    @property
    def hip_on_gpu(self) -> bool:
        """HIP kernels may run on an AMD GPU in this process: backend rocm, or an AMD GPU detected (kept out by
        a problem such as a permission). ROCm installed without a driver (a CPU runner) cannot fault."""
        env = self.env
        return env.backend == "rocm" or any(d.vendor == "amd" for d in env.devices)

    @property
    def has_measurements(self) -> bool:
        return self._perf is not None and bool(self._perf.entries)

    def set_environ(self, values: dict[str, str]) -> None:
        """Set variables for this process; ``restore_environ`` puts the old values back."""
        for k, v in values.items():
            self.saved_environ.setdefault(k, os.environ.get(k))
            os.environ[k] = v

    def restore_environ(self) -> None:
        for k, v in self.saved_environ.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.saved_environ.clear()

    def write_outputs(self, invocation_dir: str) -> None:
        """The files the run was asked for: ``--gpuenv-json``, then ``--gpuenv-perf-plot``."""
        self.write_json(invocation_dir)
        self.write_plot(invocation_dir)

    def write_json(self, invocation_dir: str) -> None:
        """Write ``--gpuenv-json`` (a relative path is taken from where pytest was invoked; the options
        made it absolute and checked it): the run's fields (``gpuenv_version``, ``timestamp``, ``outcomes``,
        ``compile_only``), then environment, measurements and hardware skips. A failed write ends the run
        with one line saying why."""
        path = self.settings.json_path
        if not path:
            return
        target = os.path.join(invocation_dir, path)
        run = self.outputs.run_fields() if self.outputs is not None else None
        if self.hosts:
            run = {**(run or {}), "hosts": hosts_json(self.hosts)}
        if self.quarantine is not None:
            run = {**(run or {}), "quarantine": self.quarantine.to_json()}
        if self.gpu_claims:
            run = {**(run or {}), "gpu_claims": self.gpu_claims}
        try:
            self.perf.write_json(target, self.env.to_dict(), [s.to_dict() for s in self.skips], run)
        except OSError as exc:
            pytest.exit(f"gpuenv: cannot write --gpuenv-json {target}: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)

    def write_plot(self, invocation_dir: str) -> None:
        """Draw ``--gpuenv-perf-plot`` (after the JSON report, so a broken matplotlib loses nothing else):
        a failure ends the run with one line saying why."""
        plot = self.settings.perf_plot
        if not plot:
            return
        try:
            self.perf.write_plot(os.path.join(invocation_dir, plot))
        except Exception as exc:  # OSError, or a matplotlib that fails to import in this process
            pytest.exit(f"gpuenv: cannot write --gpuenv-perf-plot {plot}: {type(exc).__name__}: {exc}",
                        returncode=pytest.ExitCode.USAGE_ERROR)


SESSION_KEY = pytest.StashKey[GpuenvSession]()


def get_session(config: pytest.Config) -> GpuenvSession:
    """The run's session (made in pytest_configure). Raises KeyError when the plugin is not configured."""
    return config.stash[SESSION_KEY]


def get_env(config: pytest.Config) -> GpuEnv:
    """The session's environment model (detected once in pytest_configure)."""
    return config.stash[SESSION_KEY].env


def xdist_controller(config: pytest.Config) -> bool:
    """An xdist controller: workers asked for (``-n``, ``--tx``), and this process is not one of them."""
    opt = config.option
    return not hasattr(config, "workerinput") and bool(getattr(opt, "numprocesses", None) or getattr(opt, "tx", None))


def get_settings(config: pytest.Config) -> Settings:
    return config.stash[SESSION_KEY].settings


def host_name(root: Optional[str]) -> str:
    """This host for people (``GpuenvSession.host``, ``dist.hosts.Host.name``): the host name, with the root the
    detection reads and the visible-devices masks where set, as the environment stands now."""
    root = root or "/"
    bits = [f"root {root}"] if root != "/" else []  # the whole path: trees /a/gpu and /b/gpu are two hosts
    masks = {k: os.environ[k] for k in MASK_VARS if k in os.environ}
    bits += [f"{k}={v}" if v else f"{k}=''" for k, v in masks.items()]
    return (socket.gethostname() or "localhost") + (f" ({', '.join(bits)})" if bits else "")


def _check_cpu_executor_variables() -> None:
    """The CPU executor's own variables (``GPUENV_CPU_WATCHDOG``, ``GPUENV_CPU_WORKERS``) checked at start, as the
    options' variables are, rather than at the first launch; its runtime is imported only where one is set."""
    if not any(name.startswith("GPUENV_CPU_") for name in os.environ):
        return
    from pytest_gpuenv.runtime import cpu  # boundary: the CPU executor's runtime, only to parse its variables

    try:
        cpu.watchdog_seconds()
        cpu.worker_limit()
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: {exc} (from the environment)") from None


def start(config: pytest.Config,
          worker_env: Callable[[pytest.Config, Settings], Optional[GpuEnv]]) -> GpuenvSession:
    """Resolve the options, detect (unless ``worker_env`` gives the model an xdist controller sent), store
    the session. ``worker_env`` runs before this run sets any variable."""
    settings = _options.resolve(config)
    if not hasattr(config, "workerinput"):
        _options.warn_rootdir_candidates(config)
    _check_cpu_executor_variables()
    name = host_name(settings.root)
    env = worker_env(config, settings)
    env = env if env is not None else _detect(config, settings)
    session = GpuenvSession(env, settings, host=name)
    config.stash[SESSION_KEY] = session
    if settings.json_path or config.getoption("xmlpath", None):  # its per-test hooks only where read
        session.outputs = Outputs(config, session)
        config.pluginmanager.register(session.outputs, "gpuenv-outputs")
    if env.forced_backend == "cpu":
        session.set_environ(hide_gpus_env(env))
    # torch.cuda.is_available() through NVML/amdsmi does not poison fork (DETECTION.md section 0.5)
    if "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ:
        session.set_environ({"PYTORCH_NVML_BASED_CUDA_CHECK": "1"})
    return session


def _detect(config: pytest.Config, settings: Settings) -> GpuEnv:
    cache = _ProbeCache(config) if getattr(config, "cache", None) is not None and settings.root is None else None
    t0 = time.perf_counter()
    env = detect(
        root=settings.root,
        probe="never" if settings.root else settings.probe,
        probe_timeout=settings.probe_timeout,
        probe_cache=cache,
    )
    if env.detect_seconds is None:
        env.detect_seconds = time.perf_counter() - t0
    return apply_backend(env, settings.backend)


class _ProbeCache:
    """dict-like view on pytest's cache for the runtime probe's answers."""

    def __init__(self, config: pytest.Config) -> None:
        self._cache = config.cache

    def get(self, key: str, default: Any = None) -> Any:
        assert self._cache is not None  # made only where pytest has its cache
        return self._cache.get(f"gpuenv/probe/{key}", default)

    def set(self, key: str, value: Any) -> None:
        assert self._cache is not None
        self._cache.set(f"gpuenv/probe/{key}", value)

    __getitem__ = get

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)


#: the user property of a test whose kernels were compile-checked, not run: the arches built, comma-separated
COMPILE_ONLY = "gpuenv_compile_only"
#: the user property of each ``gpu_expected`` choice of a test: {"key", "value", "device"}
EXPECTED = "gpuenv_expected"
#: the user property of a quarantined test: the ``FILE:LINE`` of its entry (``session.quarantine``)
QUARANTINED = "gpuenv_quarantine"
#: the outcome counts of the JSON report, as pytest's summary line names them
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


def mark_compile_only(item: pytest.Item, built: list[str]) -> None:
    """Record on ``item`` that its kernels were compiled for ``built`` but not run (no GPU)."""
    item.user_properties.append((COMPILE_ONLY, ",".join(built)))


def environment_properties(env: GpuEnv) -> list[tuple[str, str]]:
    """The testsuite properties of the environment (those with a value)."""
    props = [
        ("gpuenv_backend", env.backend + (f" (forced by --gpuenv-backend={env.forced_backend})"
                                          if env.forced_backend else "")),
        ("gpuenv_devices", env.describe_devices() if env.devices else "none"),
        ("gpuenv_cuda_driver", env.cuda.get("driver_version")),
        ("gpuenv_rocm", env.rocm.get("version")),
        ("gpuenv_amdgpu_driver", env.rocm.get("driver_version")),
        ("gpuenv_torch", (env.torch or {}).get("version")),
        ("gpuenv_problems", ", ".join(p.code for p in env.problems if p.severity != "info") or "none"),
        ("gpuenv_notes", ", ".join(p.code for p in env.problems if p.severity == "info")),
    ]
    return [(k, str(v)) for k, v in props if v]


def perf_properties(entries: list[Any]) -> list[tuple[str, str]]:
    """A test's properties for its measurements: median, budget and verdict of each (those it has)."""
    out = []
    for r in entries:
        for field in ("median_s", "budget", "verdict"):
            value = getattr(r, field, None)
            if value is not None:
                out.append((f"gpuenv_perf[{r.name}].{field}", f"{value:.6g}" if isinstance(value, float) else str(value)))
    return out


def _junit(config: pytest.Config) -> Any:
    """The junitxml plugin's LogXML of this run (None without ``--junitxml``, and in an xdist worker)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it
        return None
    return config.stash.get(xml_key, None)


class Outputs:
    """The run fields of ``--gpuenv-json`` and the JUnit properties (see the module docstring)."""

    def __init__(self, config: pytest.Config, session: GpuenvSession) -> None:
        self.config = config
        self.session = session
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        #: {"nodeid", "archs"} of each test that compiled its kernels without running them
        self.compile_only: list[dict[str, Any]] = []
        #: {"nodeid", "key", "value", "device"} of each ``gpu_expected`` call
        self.expected: list[dict[str, Any]] = []
        #: properties only with --junitxml (in a worker, the option is set though junitxml is not active)
        self.junit = bool(config.getoption("xmlpath", None))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        xml = _junit(self.config)
        if xml is not None:
            for name, value in environment_properties(self.session.env):
                xml.add_global_property(name, value)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        rep = yield
        if self.junit and call.when == "call" and self.session.has_measurements:
            props = perf_properties([r for r in self.session.perf.entries if r.nodeid == item.nodeid])
            item.user_properties.extend(props)  # the teardown report, which junitxml reads, copies them
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == COMPILE_ONLY:
                self.compile_only.append({"nodeid": report.nodeid, "archs": str(value).split(",")})
            elif name == EXPECTED and isinstance(value, dict):
                self.expected.append({"nodeid": report.nodeid, **value})

    def outcomes(self) -> Optional[dict[str, int]]:
        """pytest's outcome counts (None without the terminal reporter, ``-p no:terminal``)."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(tr, "stats", None)
        if stats is None:
            return None
        return {k: sum(1 for r in stats.get(k, []) if getattr(r, "count_towards_summary", True)) for k in OUTCOMES}

    def run_fields(self) -> dict[str, Any]:
        from pytest_gpuenv import __version__

        return {"gpuenv_version": __version__, "timestamp": self.started, "outcomes": self.outcomes(),
                "compile_only": self.compile_only, "expected": self.expected}
