"""What a run reports besides the terminal: the run's own fields in ``--gpuenv-json`` and, with
``--junitxml``, JUnit properties that CI dashboards show.

``Outputs`` is one plugin object per run, registered by ``session.state.start``:

- ``run_fields()``: the plugin version, when the run started (ISO 8601, UTC), the outcome counts (pytest's
  own tally: the terminal reporter's, which sees every xdist worker's reports) and the tests whose
  kernels were only compile-checked (``hip_kernel`` without a GPU); the fixture marks such a test with a
  user property (``mark_compile_only``), which its report carries to the xdist controller.
- with ``--junitxml``: testsuite properties for the environment (``gpuenv_backend``, ``gpuenv_devices``,
  driver, ROCm and torch versions, ``gpuenv_problems``), added through the junitxml plugin's
  ``add_global_property``; and, on each performance test, properties per measurement
  (``gpuenv_perf[NAME].median_s``, ``.budget``, ``.verdict``) in the test's user properties, which
  junitxml writes as the test case's ``<property>`` elements.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.model import GpuEnv
    from pytest_gpuenv.session.state import GpuenvSession

#: the user property of a test whose kernels were compile-checked, not run: the arches built, comma-separated
COMPILE_ONLY = "gpuenv_compile_only"
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
                "compile_only": self.compile_only}
