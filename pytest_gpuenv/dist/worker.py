"""pytest-xdist, the worker's side: the model its controller sent or its own host's, its GPUs, and what it
hands back.

``worker_env`` takes the controller's model when this worker's detection inputs equal the controller's
(``dist.hosts.Host.inputs``), else leaves detection to this host. ``pin`` chooses this worker's GPUs (the
controller's assignment, or a plan over its gateway group claimed through ``dist.hosts.claim``), sets its
visible-devices variables and narrows the model to them. ``send_routes`` (``--dist gpu``) tells the
controller, before it hands out tests, which collected tests this worker's host cannot run and why
(``dist.routing``). ``finish_worker`` hands the measurements and the worker's host back in ``workeroutput``.
The keys of both directions are declared here; ``dist.xdist`` is the controller's side.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv.dist import hosts as _hosts
from pytest_gpuenv.dist.hosts import narrow, plan_assignment, visible_value
from pytest_gpuenv.session.options import Settings
from pytest_gpuenv.base.model import GpuEnv, Problem

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.session.state import GpuenvSession

#: controller -> worker: {"env": the controller's model (GpuEnv.to_dict()), "host": the controller's
#: {"name", "key", "inputs"}, "assigned": whether the controller planned this worker's GPUs,
#: "gpus": {"positions": [...], "vars": {VAR: value}, "workers_sharing": n} or None,
#: "group": [workers in this worker's gateway group, its rank there], "multihost": bool,
#: "share": whether workers see every GPU of their host, each from its own (``--dist gpu``)}
WORKERINPUT_KEY = "gpuenv"
#: worker -> controller: the worker's PerfSession.dump()
WORKEROUTPUT_KEY = "gpuenv_perf"
#: worker -> controller: {"name", "key", "summary", "worker", "gpus"} of the worker's host
HOST_OUTPUT_KEY = "gpuenv_host"
#: controller -> worker (``--dist gpu``): an execnet channel back to the controller, for ``send_routes``
ROUTES_KEY = "gpuenv_routes"


def _vars_text(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


@dataclass
class _WorkerState:
    """What a worker knows about its host and its controller's."""

    host: _hosts.Host
    controller: dict[str, Any]
    #: its detection inputs equal the controller's: it uses the controller's model (and assignment)
    local: bool
    #: the run has gateways other than plain popen ones (several hosts, maybe)
    multihost: bool = False
    seats: Optional[_hosts.Seats] = None
    #: its host's model in one line, before narrowing to its GPUs
    summary: str = ""


_WORKER: pytest.StashKey[_WorkerState] = pytest.StashKey()


def _workerinput(config: pytest.Config) -> Optional[dict[str, Any]]:
    return (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_KEY)


def worker_env(config: pytest.Config, settings: Settings, host: _hosts.Host) -> Optional[GpuEnv]:
    """In an xdist worker on its controller's host with the controller's detection inputs, the model the
    controller detected; None elsewhere (detect here). ``host`` is this process's, taken before this run
    set any variable."""
    data = _workerinput(config)
    if not data:
        return None
    controller = data.get("host") or {}
    local = controller.get("inputs") == host.inputs
    config.stash[_WORKER] = _WorkerState(host, controller, local, bool(data.get("multihost")))
    return GpuEnv.from_dict(data["env"]) if local else None


def torch_device_params(config: pytest.Config, params: list[str]) -> Optional[tuple[list[str], list[str]]]:
    """In a worker of a run over several hosts: (values, ids) for ``torch_device`` whose ids are the same
    on every host (xdist needs every worker to collect the same tests): ``best``, ``cpu``, ``gpu``
    (the worker's first GPU, or ``cuda:none`` to skip). None elsewhere (ids are the values)."""
    state = config.stash.get(_WORKER, None)
    if state is None or not state.multihost:
        return None
    from pytest_gpuenv.session.state import get_settings

    mode = get_settings(config).devices
    first = next((p for p in params if p.startswith("cuda:")), "cuda:none")
    if mode == "best":
        return params[:1], ["best"]
    if mode == "cpu":
        return ["cpu"], ["cpu"]
    if mode == "gpu":
        return [first], ["gpu"]
    return ["cpu", first], ["cpu", "gpu"]


def finish_worker(config: pytest.Config, session: GpuenvSession) -> bool:
    """Name this host in the performance records; in a worker, hand them and the worker's host to the
    controller and return True; else False."""
    if session.has_measurements:
        for entry in session.perf.entries:
            entry.host = entry.host or session.host
    if not hasattr(config, "workerinput"):
        return False
    output = config.workeroutput  # type: ignore[attr-defined]
    if session.has_measurements:
        output[WORKEROUTPUT_KEY] = session.perf.dump()
    state = config.stash.get(_WORKER, None)
    if state is not None:
        key = state.controller.get("key") if state.local else state.host.key
        output[HOST_OUTPUT_KEY] = {
            "name": session.host, "key": key, "summary": state.summary,
            "worker": config.workerinput.get("workerid"),
            "gpus": (session.worker_gpu or {}).get("desc"),
        }
    return True


def pin(config: pytest.Config, session: GpuenvSession) -> None:
    """In a worker: choose its GPUs, set its visible-devices variables and narrow the model to them."""
    from pytest_gpuenv.session import report

    data = _workerinput(config) or {}
    state = config.stash.get(_WORKER, None)
    if state is None:  # the controller sent nothing (it runs without this plugin): nothing to pin
        return
    env = session.env
    state.summary = report.summary(env)
    session.host = (state.controller.get("name") or state.host.name) if state.local else state.host.name
    session.remote = state.host.key != state.controller.get("key")
    if state.local and data.get("assigned"):
        gpus = data.get("gpus")
        if not gpus:
            return
        load = {p: int(gpus.get("workers_sharing", 1)) for p in gpus["positions"]}
        state.seats = _hosts.claim(state.host.key, len(env.usable_devices), gpus["positions"], load, forced=True)
        problems: list[Problem] = []
    else:
        if session.settings.worker_gpus == "off" or not env.usable_devices:
            return
        state.seats, problems = _claim_own(env, data, state.host, session.settings.worker_gpus)
        gpus = {"positions": state.seats.positions, "vars": visible_value(env, state.seats.positions),
                "workers_sharing": state.seats.shared}
    config.add_cleanup(state.seats.release)
    if state.seats.error:
        problems.append(Problem("xdist-gpu-seats", f"could not record this worker's GPUs on host {state.host.name}: "
                                f"{state.seats.error}", "set GPUENV_LOCK_DIR to a writable directory of this user",
                                severity="warning", category="xdist"))
    _narrow_to(config, session, gpus, problems)


def _claim_own(env: GpuEnv, data: dict[str, Any], host: _hosts.Host, worker_gpus: str
               ) -> tuple[_hosts.Seats, list[Problem]]:
    """This worker's GPUs on its own host: the plan over its gateway group, claimed through seats."""
    size, rank = (list(data.get("group") or [1, 0]) + [0])[:2]
    n = len(env.usable_devices)
    problems = []
    try:
        plan = plan_assignment(env, max(1, int(size)), worker_gpus, bool(data.get("share")))
    except pytest.UsageError:
        plan = plan_assignment(env, max(1, int(size)), str(n))
        problems.append(Problem(
            "xdist-worker-gpus-short",
            f"--gpuenv-worker-gpus={worker_gpus} cannot be satisfied on host {host.name}: only {n} GPU(s) "
            f"visible ({env.describe_devices(env.usable_devices)}); this worker takes all {n}",
            "give that host's gateway group fewer GPUs per worker (--gpuenv-worker-gpus), or route multi-GPU "
            "tests to bigger hosts", severity="warning", category="xdist"))
    load = Counter(p for entry in plan for p in entry)
    return _hosts.claim(host.key, n, plan[int(rank) % len(plan)], dict(load)), problems


def _narrow_to(config: pytest.Config, session: GpuenvSession, gpus: dict[str, Any], problems: list[Problem]) -> None:
    env = session.env
    session.set_environ(gpus["vars"])
    late = _runtime_already_started()
    narrowed = narrow(env, gpus["positions"])
    narrowed.problems.extend(problems)
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
                "run with --dist gpu (every worker sees every GPU; tests share them by memory claims), or run "
                "multi-GPU tests in a second pass: pytest -p gpuenv -n 0 -m requires_devices "
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


class RouteSender:
    """``--dist gpu``, in a worker: before the collection goes to the controller, send it the tests this
    host cannot run (``dist.routing.routes``) on the channel the controller opened."""

    def __init__(self, session: GpuenvSession, channel: Any) -> None:
        self.session = session
        self.channel = channel

    @pytest.hookimpl(tryfirst=True)  # (before xdist's own hook sends the collection)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_gpuenv.dist.routing import routes

        from pytest_gpuenv.dist.routing import gpu_facts

        env = self.session.env
        data = routes(session.items, env, self.session.settings.default_claim)
        data["host"] = self.session.host
        data["gpus"] = gpu_facts(env, self.session.host, _used_now(env, self.session.settings.root))
        self.channel.send(data)


def _used_now(env: GpuEnv, root: Optional[str]) -> Optional[list[Optional[int]]]:
    """Per usable device, the bytes other processes hold now (``dist.gpu_memory.held``: NVML, amdsmi; none when
    reading another system's files): at collection no test of this run has touched them."""
    if root or not env.usable_devices:
        return None
    from pytest_gpuenv.dist.gpu_memory import held

    return held(env.usable_devices)
