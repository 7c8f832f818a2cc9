"""The environment fixtures: ``gpu_env``, ``gpu_device`` and ``torch_device``."""

from __future__ import annotations

from typing import Optional

import pytest

from pytest_gpuenv._state import get_env, get_settings
from pytest_gpuenv.model import Device, GpuEnv


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


@pytest.fixture(scope="session")
def gpu_env(request: pytest.FixtureRequest) -> GpuEnv:
    """The environment model of this run (what ``gpuenv info --json`` prints)."""
    return get_env(request.config)


def current_device(request: pytest.FixtureRequest) -> Optional[Device]:
    """The GPU this test runs on: the torch_device's index when parametrized, else the first usable."""
    env = get_env(request.config)
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
    dev = current_device(request)
    if dev is None:
        env = get_env(request.config)
        pytest.skip(f"gpu_device requires a usable GPU: found {env.describe()}")
    return dev


@pytest.fixture
def torch_device(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A ``torch.device`` per ``--gpuenv-devices`` (ids ``cpu``, ``cuda:0``; ROCm devices are ``cuda:N``)."""
    value = getattr(request, "param", None)
    if value is None:
        value = torch_device_params(get_env(request.config), get_settings(request.config).devices)[0]
    if value == "cuda:none":
        pytest.skip(f"--gpuenv-devices=gpu requires a usable GPU: found {get_env(request.config).describe()}")
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising anything
        pytest.skip(f"torch_device requires torch: could not import 'torch': {exc}")
    return torch.device(value)
