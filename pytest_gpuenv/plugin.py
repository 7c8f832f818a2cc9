"""pytest-gpuenv's hooks. The work lives in detect/, markers.py, report.py, rtc/ and perf/.

Loading and collecting never import torch and never start a GPU runtime: detection reads files
(and NVML, which creates no context); anything a runtime must answer runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import pytest

from pytest_gpuenv import _options, markers, report
from pytest_gpuenv._state import (
    ENV_KEY,
    SETTINGS_KEY,
    WORKER_GPU_KEY,
    get_env,
    get_settings,
    perf_records,
    skip_records,
)
from pytest_gpuenv.fixtures import gpu_device, gpu_env, torch_device, torch_device_params  # noqa: F401
from pytest_gpuenv.model import GpuEnv

_SKIP_INFO = pytest.StashKey[markers.Skip]()
_PLAN_PROFILES = pytest.StashKey[list]()
_PLAN_LINES = pytest.StashKey[list]()
_MARK_ERROR = pytest.StashKey[str]()
_SAVED_ENVIRON = pytest.StashKey[dict]()
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_WORKERINPUT_KEY = "gpuenv_env"


def _set_environ(config: pytest.Config, values: dict[str, str]) -> None:
    """Set variables for this process; pytest_unconfigure puts the old values back."""
    saved = config.stash[_SAVED_ENVIRON]
    for k, v in values.items():
        saved.setdefault(k, os.environ.get(k))
        os.environ[k] = v


def pytest_unconfigure(config: pytest.Config) -> None:
    for k, v in config.stash.get(_SAVED_ENVIRON, {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def hip_kernel(request: pytest.FixtureRequest) -> Any:
    """A factory: ``hip_kernel(path_or_source, name, **options)`` returns a compiled kernel, called as
    ``k(grid, block, *args, shared_mem=0, stream=None)``. Relative paths are looked up in
    ``gpuenv_kernel_dirs``. Options: ``arch``, ``options``, ``defines``, ``include_dirs``, ``compiler``,
    ``sync`` (default True). Without a GPU it compiles for ``gpuenv_compile_archs`` and skips."""
    from pytest_gpuenv.rtc.fixture import hip_kernel_factory  # imported on first use: keeps loading light

    yield from hip_kernel_factory(request)


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> Any:
    """Measure GPU work and assert on its speed: ``m = gpu_bench(fn, bytes=..., flops=...)``, then
    ``m.assert_faster_than("250us")``, ``m.assert_bandwidth(at_least=0.8)``,
    ``m.assert_no_regression("10%")``; ``gpu_bench.assert_ratio(fast, reference, at_most=1.2)``.
    Skips on a runner without a usable GPU."""
    from pytest_gpuenv.perf.fixture import make_gpu_bench

    return make_gpu_bench(request)


def pytest_addoption(parser: pytest.Parser) -> None:
    _options.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for _name, line in markers.MARKERS:
        config.addinivalue_line("markers", line)
    settings = _options.resolve(config)
    config.stash[SETTINGS_KEY] = settings

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _WORKERINPUT_KEY in workerinput:
        env = GpuEnv.from_dict(workerinput[_WORKERINPUT_KEY])
    else:
        env = _detect(config, settings)
    config.stash[ENV_KEY] = env

    config.stash[_SAVED_ENVIRON] = {}
    if env.forced_backend == "cpu":
        from pytest_gpuenv.detect import hide_gpus_env

        _set_environ(config, hide_gpus_env(env))
    if settings.plan and workerinput is None:
        from pytest_gpuenv.plan import profiles

        config.stash[_PLAN_PROFILES] = profiles(settings.plan_profiles)
    # torch.cuda.is_available() through NVML/amdsmi does not poison fork (DETECTION.md section 0.5)
    if "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ:
        _set_environ(config, {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"})
    config.pluginmanager.register(_SkipCollector(config), "gpuenv-skips")

    if config.pluginmanager.hasplugin("xdist"):
        from pytest_gpuenv._xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(config), "gpuenv-xdist")
        if workerinput is None:
            from pytest_gpuenv._xdist import check_controller

            check_controller(config, env, settings)
        else:
            from pytest_gpuenv._xdist import pin_worker

            info = pin_worker(config, env, settings)
            if info:
                config.stash[WORKER_GPU_KEY] = info


def _detect(config: pytest.Config, settings: _options.Settings) -> GpuEnv:
    from pytest_gpuenv.detect import apply_backend, detect

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
        return self._cache.get(f"gpuenv/probe/{key}", default)  # type: ignore[union-attr]

    def set(self, key: str, value: Any) -> None:
        self._cache.set(f"gpuenv/probe/{key}", value)  # type: ignore[union-attr]

    __getitem__ = get

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)


def pytest_report_header(config: pytest.Config) -> list[str]:
    env = get_env(config)
    lines = report.header_lines(env, verbose=config.get_verbosity(), worker=config.stash.get(WORKER_GPU_KEY, None))
    return lines


@pytest.hookimpl(tryfirst=True)
def pytest_markeval_namespace(config: pytest.Config) -> dict[str, Any]:
    """``@pytest.mark.skipif("gpuenv.backend == 'rocm'")`` can read the environment model."""
    return {"gpuenv": get_env(config)}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "torch_device" not in metafunc.fixturenames:
        return
    if any(getattr(m, "name", None) == "parametrize" and "torch_device" in str(m.args[0]) for m in metafunc.definition.iter_markers()):
        return
    env = get_env(metafunc.config)
    params = torch_device_params(env, get_settings(metafunc.config).devices)
    ids = ["gpu-none" if p == "cuda:none" else p for p in params]
    metafunc.parametrize("torch_device", params, ids=ids, indirect=True)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    env = get_env(config)
    settings = get_settings(config)
    if _PLAN_PROFILES in config.stash:
        from pytest_gpuenv.plan import plan_lines

        config.stash[_PLAN_LINES] = plan_lines(items, config.stash[_PLAN_PROFILES])
    for item in items:
        if "gpu_bench" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.perf)
        error = markers.check_marks(item.iter_markers())
        if error:
            item.stash[_MARK_ERROR] = error
            continue
        xf = markers.xfail_for(item.iter_markers(), env)
        if xf is not None:
            item.add_marker(pytest.mark.xfail(reason=xf[0], strict=xf[1]))
        if settings.perf == "off" and item.get_closest_marker("perf") is not None:
            item.add_marker(pytest.mark.skip(reason="performance test skipped by --gpuenv-perf=off"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    error = item.stash.get(_MARK_ERROR, None)
    if error:
        pytest.fail(error, pytrace=False)
    skip = markers.evaluate(item.iter_markers(), get_env(item.config))
    poison = _poisoned()
    if skip is None and poison is not None and _uses_gpu(item):
        skip = markers.Skip("problem", f"gpu-context-poisoned by {poison.by}", poison.reason())
    if skip is not None:
        item.stash[_SKIP_INFO] = skip
        pytest.skip(skip.reason)


_GPU_FIXTURES = ("gpu_device", "gpu_bench", "hip_kernel")


def _uses_gpu(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(n) is not None for n in ("requires_gpu", "requires_cuda", "requires_rocm",
                                                            "requires_hip", "requires_devices")):
        return True
    return any(f in getattr(item, "fixturenames", ()) for f in _GPU_FIXTURES)


def _poisoned() -> Any:
    """The record of a sticky GPU fault in this process (set by pytest_gpuenv.rtc), or None."""
    launch = sys.modules.get("pytest_gpuenv.rtc._launch")
    poison = getattr(launch, "POISON", None)
    return poison if poison is not None and poison.by is not None else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    skip = item.stash.get(_SKIP_INFO, None)
    if skip is not None and rep.skipped and rep.when == "setup":
        rep.user_properties.append(("gpuenv_skip", [skip.category, skip.cause]))
        # point at the test, not at this plugin (as pytest's own skip marks do)
        path, line = item.reportinfo()[:2]
        if line is not None:
            rep.longrepr = (str(path), line + 1, f"Skipped: {skip.reason}")
    elif rep.skipped and isinstance(rep.longrepr, tuple) and str(rep.longrepr[0]).startswith(_PKG_DIR):
        # a skip raised inside one of our fixtures (hip_kernel, gpu_bench, gpu_device): show the test's place
        path, line = item.reportinfo()[:2]
        if line is not None:
            rep.longrepr = (str(path), line + 1, rep.longrepr[2])
    if rep.failed and rep.when == "call":
        poison = _poisoned()
        if poison is not None and poison.by != item.nodeid:
            rep.sections.append(("gpuenv", f"this failure may follow from an earlier GPU fault: {poison.reason()}"))
    return rep


class _SkipCollector:
    """Gathers hardware skips from test reports, which reach the controller under xdist as well."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped:
            return
        for key, value in report.user_properties:
            if key == "gpuenv_skip":
                skip_records(self.config).append((report.nodeid, value[0], value[1]))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    plan = config.stash.get(_PLAN_LINES, None)
    if plan:
        terminalreporter.write_sep("-", "gpuenv: plan")
        for line in plan:
            terminalreporter.write_line(line)
    records = perf_records(config)
    skips = skip_records(config)
    lines = report.skip_summary_lines((c, cause) for _n, c, cause in skips)
    if lines:
        terminalreporter.write_sep("-", "gpuenv: hardware skips")
        for line in lines:
            terminalreporter.write_line(line)
    if records:
        from pytest_gpuenv.perf.report import summary_lines

        terminalreporter.write_sep("-", "gpuenv: performance")
        for line in summary_lines(records):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        config.workeroutput["gpuenv_perf"] = json.dumps(perf_records(config))  # type: ignore[attr-defined]
        return
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None or not settings.json_path:
        return
    _write_json(config, settings.json_path)


def _write_json(config: pytest.Config, path: str) -> None:
    env = get_env(config)
    data = {
        "environment": env.to_dict(),
        "measurements": perf_records(config),
        "skips": [{"nodeid": n, "category": c, "cause": cause} for n, c, cause in skip_records(config)],
    }
    target = os.path.join(str(config.invocation_params.dir), path) if not os.path.isabs(path) else path
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(tmp, target)

