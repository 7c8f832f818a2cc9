"""pytest-xdist integration: one GPU per worker, detection shared, results gathered.

The controller detects once and computes every worker's GPUs; ``pytest_configure_node`` hands both
to the worker in ``workerinput[WORKERINPUT_KEY]``. The worker takes the model from there
(``worker_env``), sets its own visible-devices variables in its own ``pytest_configure``
(``configure``: a controller hook cannot set a worker's environment), before any test module starts
a GPU runtime, and narrows its copy of the model to its GPUs. Skips travel back inside the test
reports; performance records come back in ``workeroutput[WORKEROUTPUT_KEY]`` (``finish_worker``)
and the controller merges them in ``pytest_testnodedown``. This module owns both directions.

Assignment indexes into the visible set the user already chose: with ``CUDA_VISIBLE_DEVICES=2,3``
a worker gets ``2`` or ``3``, never a GPU outside the list; on AMD ``HIP_VISIBLE_DEVICES`` indexes
into what ``ROCR_VISIBLE_DEVICES`` left, as HIP itself does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv._options import Settings
from pytest_gpuenv.model import Device, GpuEnv, Problem

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv._session import GpuenvSession

#: controller -> worker: {"env": the controller's model (GpuEnv.to_dict()),
#: "gpus": {"positions": [...], "vars": {VAR: value}, "workers_sharing": n} or None}
WORKERINPUT_KEY = "gpuenv"
#: worker -> controller: the worker's PerfSession.dump()
WORKEROUTPUT_KEY = "gpuenv_perf"


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


def _vars_text(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


class XdistHooks:
    """The controller's side of the protocol; registered only when pytest-xdist is installed."""

    def __init__(self, config: pytest.Config, session: GpuenvSession) -> None:
        self.config = config
        self.session = session
        self._plan: Optional[list[list[int]]] = None

    def _worker_plan(self, n_workers: int) -> list[list[int]]:
        if self._plan is None:
            self._plan = plan_assignment(self.session.env, n_workers, self.session.settings.worker_gpus)
        return self._plan

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        env = self.session.env
        n_workers = int(node.workerinput.get("workercount") or _numprocesses(self.config) or 1)
        plan = self._worker_plan(n_workers)
        wid = node.workerinput.get("workerid", node.gateway.id)
        try:
            number = int(str(wid).lstrip("gw"))
        except ValueError:
            number = 0
        gpus = None
        if plan:
            positions = plan[number % len(plan)]
            gpus = {
                "positions": positions,
                "vars": visible_value(env, positions),
                "workers_sharing": sum(1 for p in plan if p == positions),
            }
        node.workerinput[WORKERINPUT_KEY] = {"env": env.to_dict(), "gpus": gpus}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        """One line per worker in the controller's output: which GPU(s) it has."""
        gpus = (node.workerinput.get(WORKERINPUT_KEY) or {}).get("gpus")
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if not gpus or tr is None or self.config.get_verbosity() < 0:
            return
        env = self.session.env
        devices = env.describe_devices([env.usable_devices[p] for p in gpus["positions"]])
        shared = gpus.get("workers_sharing", 1)
        tr.write_line(
            f"gpuenv: [{node.gateway.id}] {devices} via {_vars_text(gpus['vars'])}"
            + (f" (shared by {shared} workers)" if shared > 1 else "")
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        raw = (getattr(node, "workeroutput", None) or {}).get(WORKEROUTPUT_KEY)
        if raw:
            self.session.perf.merge(raw)


def _numprocesses(config: pytest.Config) -> Optional[int]:
    n = getattr(config.option, "numprocesses", None)
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


def worker_env(config: pytest.Config) -> Optional[GpuEnv]:
    """In an xdist worker, the model its controller detected; None elsewhere (detect here)."""
    data = (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_KEY)
    return GpuEnv.from_dict(data["env"]) if data else None


def configure(config: pytest.Config, session: GpuenvSession) -> None:
    """Register the controller's hooks; check the request (controller) or pin this worker's GPUs."""
    config.pluginmanager.register(XdistHooks(config, session), "gpuenv-xdist")
    if hasattr(config, "workerinput"):
        _pin_worker(config, session)
    else:
        _check_controller(config, session.env, session.settings)


def finish_worker(config: pytest.Config, session: GpuenvSession) -> bool:
    """In a worker: hand the performance records to the controller and return True; else False."""
    if not hasattr(config, "workerinput"):
        return False
    if session.has_measurements:
        config.workeroutput[WORKEROUTPUT_KEY] = session.perf.dump()  # type: ignore[attr-defined]
    return True


def _check_controller(config: pytest.Config, env: GpuEnv, settings: Settings) -> None:
    """Clear errors before any test runs (controller of an xdist run only)."""
    n = _numprocesses(config)
    if not n or settings.worker_gpus == "off":
        return
    hide_all = env.problem("visible-devices-hide-all")
    if hide_all is not None:
        raise pytest.UsageError(f"gpuenv: cannot assign GPUs to {n} xdist workers: {hide_all.message}")
    plan_assignment(env, n, settings.worker_gpus)


def _pin_worker(config: pytest.Config, session: GpuenvSession) -> None:
    """In a worker: set its visible-devices variables and narrow the model to its GPUs."""
    gpus = (config.workerinput.get(WORKERINPUT_KEY) or {}).get("gpus")  # type: ignore[attr-defined]
    if not gpus:
        return
    env = session.env
    session.set_environ(gpus["vars"])
    late = _runtime_already_started()
    narrowed = narrow(env, gpus["positions"])
    narrowed.problems.extend(_worker_problems(len(narrowed.devices), len(env.usable_devices), gpus, late))
    session.env = narrowed
    desc = narrowed.describe_devices(narrowed.devices)
    shared = gpus.get("workers_sharing", 1)
    session.worker_gpu = {
        "id": config.workerinput.get("workerid"),  # type: ignore[attr-defined]
        "desc": f"{desc} via {_vars_text(gpus['vars'])}" + (f", shared by {shared} workers" if shared > 1 else ""),
        "vars": gpus["vars"],
        "shared": shared,
    }


def _worker_problems(mine: int, total: int, gpus: dict[str, Any], late: bool) -> list[Problem]:
    out = []
    if total > mine:
        out.append(
            Problem(
                "xdist-worker-gpus",
                f"this xdist worker was given {mine} of the {total} visible GPUs",
                "run multi-GPU tests in a second pass: pytest -p gpuenv -n 0 -m requires_devices "
                "(or give workers more GPUs with --gpuenv-worker-gpus=N)",
                severity="info",
                category="xdist",
            )
        )
    if late:
        out.append(
            Problem(
                "worker-pinned-too-late",
                f"the GPU runtime started in this worker before pytest-gpuenv set {', '.join(gpus['vars'])} "
                "(a conftest initialised CUDA/HIP at import)",
                "do not touch the GPU at import time in conftest.py; create tensors inside fixtures or tests",
                severity="warning",
                category="xdist",
            )
        )
    return out


def _runtime_already_started() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False
