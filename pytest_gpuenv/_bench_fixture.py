"""What the ``gpu_bench`` fixture (defined in fixtures.py) does: a ``GpuBench`` wired to the session.

Its ``PerfContext`` carries the settings (``--gpuenv-perf``, ``--gpuenv-perf-max-time``, the
baselines file), the run's ``PerfSession`` (where the records go) and the environment's backend and
driver. The timer (``perf``) is imported when a test first asks for ``gpu_bench``.
``--gpuenv-perf=off`` is applied at collection (``_runtest``), before this runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import pytest

from pytest_gpuenv._runtest import skip_without_gpu
from pytest_gpuenv._session import get_session

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.model import GpuEnv
    from pytest_gpuenv.perf import GpuBench, PerfContext


def _driver(env: GpuEnv) -> Optional[str]:
    return (env.cuda or {}).get("driver_version") if env.backend == "cuda" else (env.rocm or {}).get("version")


def _context(request: pytest.FixtureRequest) -> PerfContext:
    from pytest_gpuenv.perf._bench import PerfContext, default_monitor, select_backend

    nodeid, name = request.node.nodeid, getattr(request.node, "name", "test")
    try:
        session = get_session(request.config)
    except KeyError:  # plugin not configured (e.g. -p no:gpuenv with the fixture imported): defaults
        return PerfContext(
            backend_factory=lambda: select_backend(None), monitor_factory=default_monitor, nodeid=nodeid, test_name=name
        )
    env, settings = session.env, session.settings
    if env.backend == "cpu":
        skip_without_gpu(request.node, "perf test")
    return PerfContext(
        backend_factory=lambda: select_backend(env),
        monitor_factory=default_monitor,
        nodeid=nodeid,
        test_name=name,
        perf_mode=settings.perf,
        max_time=settings.perf_max_time,
        baselines=settings.baselines,
        session=session.perf,
        driver=_driver(env),
    )


def make_gpu_bench(request: pytest.FixtureRequest) -> GpuBench:
    """The ``gpu_bench`` fixture's value for this test (skips on a runner without a usable GPU)."""
    from pytest_gpuenv.perf._bench import GpuBench

    return GpuBench(_context(request))
