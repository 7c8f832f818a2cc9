"""The plugin's fixtures: ``gpu_env``, ``gpu_device``, ``torch_device``, ``hip_kernel``, ``gpu_bench``.

The environment fixtures read the session (``_session``). ``hip_kernel`` imports its machinery
(``_kernel_fixture``, which needs the kernel compiler ``rtc``) when a test first asks for it; ``gpu_bench``'s
(``_bench_fixture``) imports the timer (``perf``) likewise.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from pytest_gpuenv._bench_fixture import make_gpu_bench
from pytest_gpuenv._runtest import ensure_gate, skip_without_gpu
from pytest_gpuenv._session import get_env, get_session, get_settings
from pytest_gpuenv.model import Device, GpuEnv
from pytest_gpuenv.runtime import running


def torch_device_params(env: GpuEnv, mode: str) -> list[str]:
    """The ``torch_device`` values for ``--gpuenv-devices``: ``cpu``, ``cuda:0``, ...

    ROCm devices are ``cuda:N`` in torch. A GPU is only offered when the installed torch is a build
    for that backend (a CPU wheel on a GPU host gives the CPU, and the header says why).
    """
    gpus = [f"cuda:{d.index}" for d in _torch_gpus(env)]
    if mode == "cpu":
        return ["cpu"]
    if mode == "gpu":
        return gpus or ["cuda:none"]
    if mode == "all":
        return ["cpu"] + gpus
    return gpus[:1] or ["cpu"]  # best


def _torch_gpus(env: GpuEnv) -> list[Device]:
    if not env.has_gpu:
        return []
    build = env.torch_build
    if build is not None and build != env.backend:
        return []
    return env.usable_devices


def cpu_warp_sizes(env: GpuEnv, kernels: str, sizes: list[int]) -> list[int]:
    """The warp sizes ``hip_kernel`` tests run at on the CPU executor: none on a runner with a usable
    GPU, with ``--gpuenv-kernels`` other than ``run``, or without a C++ compiler."""
    if kernels != "run" or (env.has_gpu and env.usable_devices) or not env.compilers.get("cxx"):
        return []
    return list(sizes)


def parametrize_hip_kernel(metafunc: pytest.Metafunc) -> None:
    """A test using ``hip_kernel`` on the CPU executor runs once per warp size (ids wave64, wave32)."""
    settings = get_settings(metafunc.config)
    sizes = cpu_warp_sizes(get_env(metafunc.config), settings.kernels, settings.cpu_warp_sizes)
    if sizes:
        metafunc.parametrize("hip_kernel", sizes, ids=[f"wave{w}" for w in sizes], indirect=True)


def parametrize_torch_device(metafunc: pytest.Metafunc) -> None:
    """A test using ``torch_device`` runs once per ``--gpuenv-devices`` value (unless it parametrizes
    ``torch_device`` itself); in an xdist worker of a run over several hosts, with ids every host shares."""
    if any(m.name == "parametrize" and "torch_device" in str(m.args[0]) for m in metafunc.definition.iter_markers()):
        return
    session = get_session(metafunc.config)
    params = torch_device_params(session.env, session.settings.devices)
    ids = ["gpu-none" if p == "cuda:none" else p for p in params]
    if hasattr(metafunc.config, "workerinput"):
        from pytest_gpuenv import _xdist_worker

        params, ids = _xdist_worker.torch_device_params(metafunc.config, params) or (params, ids)
    metafunc.parametrize("torch_device", params, ids=ids, indirect=True)


@pytest.fixture(scope="session")
def gpu_env(request: pytest.FixtureRequest) -> GpuEnv:
    """The environment model of this run (what ``gpuenv info --json`` prints)."""
    return get_env(request.config)


def current_device(request: pytest.FixtureRequest, env: Optional[GpuEnv] = None) -> Optional[Device]:
    """The GPU this test runs on: the torch_device's index when parametrized, else the first usable
    (of ``env``, by default the session's)."""
    env = env if env is not None else get_env(request.config)
    devs = env.usable_devices if env.has_gpu else []
    if not devs:
        return None
    param = getattr(request.node, "callspec", None)
    want = param.params.get("torch_device") if param is not None else None
    if isinstance(want, str) and want.startswith("cuda:"):
        try:
            idx = int(want.split(":", 1)[1])
        except ValueError:
            idx = None
        for d in devs:
            if d.index == idx:
                return d
    return devs[0]


@pytest.fixture
def gpu_device(request: pytest.FixtureRequest) -> Device:
    """The GPU this test runs on (index, vendor, name, arch, memory, warp size); skips when none is usable."""
    ensure_gate(request.config)  # (it may skip: asked for at run time too)
    dev = current_device(request)
    if dev is None:
        skip_without_gpu(request.node, "gpu_device")
    return dev


@pytest.fixture
def torch_device(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A ``torch.device`` per ``--gpuenv-devices`` (ids ``cpu``, ``cuda:0``; ROCm devices are ``cuda:N``)."""
    ensure_gate(request.config)
    value = getattr(request, "param", None)
    if value is None:
        value = torch_device_params(get_env(request.config), get_settings(request.config).devices)[0]
    if value == "cuda:none":
        skip_without_gpu(request.node, "--gpuenv-devices=gpu")
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising anything
        pytest.skip(f"torch_device requires torch: could not import 'torch': {exc}")
    return torch.device(value)


@pytest.fixture
def hip_kernel(request: pytest.FixtureRequest) -> Any:
    """A factory: ``hip_kernel(path_or_source, name, **options)`` returns a compiled kernel, called as
    ``k(grid, block, *args, shared_mem=0, stream=None, cooperative=False)`` (``cooperative=True``: a cooperative
    launch, for ``cooperative_groups::this_grid().sync()``; the CPU executor holds up to 64 blocks and 16,384 threads at once); ``name`` is a C++ name (``vector_add``,
    ``ns::scale``, ``transpose<16>``). ``hip_kernel(path_or_source, names=[...])`` returns a Module
    (``module.kernel(name)``, ``module.get_global(name)``). Relative paths are looked up in
    ``gpuenv_kernel_dirs`` when set, then beside the test file and in ``kernels/`` folders up to the rootdir.
    Options: ``arch``, ``options``, ``defines``, ``include_dirs``, ``compiler``,
    ``sync`` (default True), ``names``. Without a GPU it runs the kernel on the CPU executor, once per warp size of
    ``gpuenv_cpu_warp_sizes`` (``--gpuenv-kernels=run``, the default where a C++ compiler exists), or
    compiles for ``gpuenv_compile_archs`` and skips (``compile``), or skips (``off``)."""
    ensure_gate(request.config)
    from pytest_gpuenv._kernel_fixture import HipKernelFactory  # the kernel compiler (rtc)

    with running(request.node.nodeid):  # a GPU fault in this test is recorded against it
        yield HipKernelFactory(request, current_device)


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> Any:
    """Measure GPU work and assert on its speed: ``m = gpu_bench(fn, bytes=..., flops=...)``, then
    ``m.assert_faster_than("250us")``, ``m.assert_bandwidth(at_least=0.8)``,
    ``m.assert_no_regression("10%")``; ``gpu_bench.assert_ratio(fast, reference, at_most=1.2)``.
    Skips on a runner without a usable GPU."""
    ensure_gate(request.config)
    return make_gpu_bench(request)
