"""pytest-xdist integration: one GPU per worker, detection shared, results gathered.

The controller detects once and computes every worker's GPUs; ``pytest_configure_node`` hands both
to the worker in ``workerinput``. The worker sets its own visible-devices variables in its own
``pytest_configure`` (a controller hook cannot set a worker's environment), before any test module
starts a GPU runtime, and narrows its copy of the model to its GPUs. Skips travel back inside the
test reports; performance records come back in ``workeroutput``.

Assignment indexes into the visible set the user already chose: with ``CUDA_VISIBLE_DEVICES=2,3``
a worker gets ``2`` or ``3``, never a GPU outside the list; on AMD ``HIP_VISIBLE_DEVICES`` indexes
into what ``ROCR_VISIBLE_DEVICES`` left, as HIP itself does.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import pytest

from pytest_gpuenv._options import Settings
from pytest_gpuenv.model import Device, GpuEnv, Problem

WORKER_KEY = "gpuenv_worker"


def _split(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def plan_assignment(env: GpuEnv, n_workers: int, worker_gpus: str) -> list[list[int]]:
    """For each worker, the positions (in ``env.devices``) of the GPUs it gets.

    ``auto``: with at least as many GPUs as workers each worker gets ``len // n`` of its own;
    with fewer, workers share them round-robin (8 workers on 2 GPUs: four on each).
    ``N``: each worker gets N consecutive GPUs, wrapping round. ``off``: no assignment.
    Raises ``pytest.UsageError`` when the request cannot be satisfied.
    """
    devs = env.usable_devices
    if worker_gpus == "off" or n_workers <= 0 or not devs:
        return []
    n = len(devs)
    if worker_gpus == "auto":
        per = max(1, n // n_workers)
    else:
        per = int(worker_gpus)
        if per > n:
            raise pytest.UsageError(
                f"gpuenv: --gpuenv-worker-gpus={per} cannot be satisfied: only {n} GPU(s) visible "
                f"({env.describe_devices(devs)}); use a number <= {n}, 'auto', or 'off'"
            )
    out = []
    for w in range(n_workers):
        start = (w * per) % n
        out.append([(start + j) % n for j in range(per)])
    return out


def visible_value(env: GpuEnv, positions: list[int]) -> dict[str, str]:
    """The variables a worker sets so that its runtime sees exactly the GPUs at ``positions``."""
    devs = [env.usable_devices[p] for p in positions]
    if not devs:
        return {}
    vendor = devs[0].vendor
    vis = env.visible
    if vendor == "nvidia":
        user = vis.get("CUDA_VISIBLE_DEVICES")
        if user is not None and user.strip():
            tokens = _split(user)
            picked = [tokens[d.index] if d.index < len(tokens) else str(d.physical_index) for d in devs]
        else:
            picked = [str(d.physical_index if d.physical_index is not None else d.index) for d in devs]
        return {"CUDA_VISIBLE_DEVICES": ",".join(picked)}
    # AMD: HIP indexes into the ROCr-visible set
    hip = vis.get("HIP_VISIBLE_DEVICES")
    if hip is not None and hip.strip():
        tokens = _split(hip)
        picked = [tokens[d.index] if d.index < len(tokens) else str(d.index) for d in devs]
    else:
        picked = [str(d.index) for d in devs]
    out = {"HIP_VISIBLE_DEVICES": ",".join(picked)}
    if "CUDA_VISIBLE_DEVICES" in vis and "ROCR_VISIBLE_DEVICES" not in vis and hip is None:
        out["CUDA_VISIBLE_DEVICES"] = ",".join(picked)
    return out


def narrow(env: GpuEnv, positions: list[int]) -> GpuEnv:
    """The worker's model: its GPUs, renumbered from 0 as its runtime will number them."""
    data = env.to_dict()
    usable = env.usable_devices
    mine = [usable[p] for p in positions]
    others = [d for d in env.devices if d not in mine]
    new = GpuEnv.from_dict(data)
    new.devices = [Device(**{**d.to_dict(), "index": i}) for i, d in enumerate(mine)]
    new.hidden_devices = list(env.hidden_devices) + [Device(**d.to_dict()) for d in others]
    return new


class XdistHooks:
    """Registered only when pytest-xdist is installed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._plan: Optional[list[list[int]]] = None

    def _worker_plan(self, n_workers: int) -> list[list[int]]:
        if self._plan is None:
            from pytest_gpuenv._state import get_env, get_settings

            env = get_env(self.config)
            self._plan = plan_assignment(env, n_workers, get_settings(self.config).worker_gpus)
        return self._plan

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        from pytest_gpuenv._state import get_env

        env = get_env(self.config)
        node.workerinput["gpuenv_env"] = env.to_dict()
        n_workers = int(node.workerinput.get("workercount") or _numprocesses(self.config) or 1)
        plan = self._worker_plan(n_workers)
        wid = node.workerinput.get("workerid", node.gateway.id)
        try:
            number = int(str(wid).lstrip("gw"))
        except ValueError:
            number = 0
        if plan:
            positions = plan[number % len(plan)]
            node.workerinput[WORKER_KEY] = {
                "positions": positions,
                "vars": visible_value(env, positions),
                "workers_sharing": sum(1 for p in plan if p == positions),
            }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        """One line per worker in the controller's output: which GPU(s) it has."""
        info = node.workerinput.get(WORKER_KEY)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if not info or tr is None or self.config.get_verbosity() < 0:
            return
        from pytest_gpuenv._state import get_env

        env = get_env(self.config)
        devs = [env.usable_devices[p] for p in info["positions"]]
        vars_text = " ".join(f"{k}={v}" for k, v in info["vars"].items())
        shared = info.get("workers_sharing", 1)
        tr.write_line(
            f"gpuenv: [{node.gateway.id}] {env.describe_devices(devs)} via {vars_text}"
            + (f" (shared by {shared} workers)" if shared > 1 else "")
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from pytest_gpuenv._state import perf_records

        out = getattr(node, "workeroutput", None) or {}
        raw = out.get("gpuenv_perf")
        if raw:
            try:
                perf_records(self.config).extend(json.loads(raw))
            except (TypeError, ValueError):
                pass


def _numprocesses(config: pytest.Config) -> Optional[int]:
    n = getattr(config.option, "numprocesses", None)
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


def check_controller(config: pytest.Config, env: GpuEnv, settings: Settings) -> None:
    """Clear errors before any test runs (controller of an xdist run only)."""
    n = _numprocesses(config)
    if not n or settings.worker_gpus == "off":
        return
    hide_all = env.problem("visible-devices-hide-all")
    if hide_all is not None:
        raise pytest.UsageError(f"gpuenv: cannot assign GPUs to {n} xdist workers: {hide_all.message}")
    plan_assignment(env, n, settings.worker_gpus)


def pin_worker(config: pytest.Config, env: GpuEnv, settings: Settings) -> Optional[dict[str, Any]]:
    """In a worker: set its visible-devices variables and narrow the model. Returns what it got."""
    info = config.workerinput.get(WORKER_KEY)  # type: ignore[attr-defined]
    if not info:
        return None
    for var, value in info["vars"].items():
        os.environ[var] = value
    late = _runtime_already_started()
    narrowed = narrow(env, info["positions"])
    total = len(env.usable_devices)
    if total > len(narrowed.devices):
        narrowed.problems.append(
            Problem(
                "xdist-worker-gpus",
                f"this xdist worker was given {len(narrowed.devices)} of the {total} visible GPUs",
                "run multi-GPU tests in a second pass: pytest -p gpuenv -n 0 -m requires_devices "
                "(or give workers more GPUs with --gpuenv-worker-gpus=N)",
                severity="info",
                category="xdist",
            )
        )
    if late:
        narrowed.problems.append(
            Problem(
                "worker-pinned-too-late",
                f"the GPU runtime started in this worker before pytest-gpuenv set {', '.join(info['vars'])} "
                "(a conftest initialised CUDA/HIP at import)",
                "do not touch the GPU at import time in conftest.py; create tensors inside fixtures or tests",
                severity="warning",
                category="xdist",
            )
        )
    from pytest_gpuenv._state import ENV_KEY

    config.stash[ENV_KEY] = narrowed
    desc = narrowed.describe_devices(narrowed.devices)
    shared = info.get("workers_sharing", 1)
    vars_text = " ".join(f"{k}={v}" for k, v in info["vars"].items())
    return {
        "id": config.workerinput.get("workerid"),  # type: ignore[attr-defined]
        "desc": f"{desc} via {vars_text}" + (f", shared by {shared} workers" if shared > 1 else ""),
        "vars": info["vars"],
        "shared": shared,
    }


def _runtime_already_started() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False
