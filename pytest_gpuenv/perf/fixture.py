"""What the ``gpu_bench`` fixture (defined in plugin.py) does. Importing this module imports no GPU library
and not the measuring engine: the plugin imports it only when a test asks for ``gpu_bench``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.perf._bench import GpuBench, PerfContext


def _context(request: pytest.FixtureRequest) -> PerfContext:
    from pytest_gpuenv.perf._bench import PerfContext, default_monitor, select_backend

    config = request.config
    env: Any = None
    perf_mode, max_time, baselines = "check", 2.0, None
    records: list[dict[str, Any]] = []
    try:
        from pytest_gpuenv._state import get_env, get_settings, perf_records

        env = get_env(config)
        settings = get_settings(config)
        perf_mode, max_time, baselines = settings.perf, settings.perf_max_time, settings.baselines
        records = perf_records(config)
    except (KeyError, ImportError):  # plugin not configured (e.g. -p no:gpuenv with the fixture imported)
        pass
    if env is not None and getattr(env, "backend", "cpu") == "cpu":
        pytest.skip(f"perf test requires a usable GPU: found {env.describe()}")
    if perf_mode == "off":
        pytest.skip("performance test skipped by --gpuenv-perf=off")
    driver = None
    if env is not None:
        driver = (env.cuda or {}).get("driver_version") if env.backend == "cuda" else (env.rocm or {}).get("version")
    return PerfContext(
        backend_factory=lambda: select_backend(env),
        monitor_factory=default_monitor,
        nodeid=request.node.nodeid,
        test_name=getattr(request.node, "name", "test"),
        perf_mode=perf_mode,
        max_time=max_time,
        baselines=baselines,
        records=records,
        driver=driver,
    )


def make_gpu_bench(request: pytest.FixtureRequest) -> GpuBench:
    """Measure GPU work and assert on its speed: ``m = gpu_bench(fn, bytes=..., flops=...)``, then
    ``m.assert_faster_than("250us")``, ``m.assert_bandwidth(at_least=0.8)``,
    ``m.assert_no_regression("10%")``; ``gpu_bench.assert_ratio(fast, reference, at_most=1.2)``.
    Skips on a runner without a usable GPU."""
    from pytest_gpuenv.perf._bench import GpuBench

    return GpuBench(_context(request))
