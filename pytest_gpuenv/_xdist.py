"""pytest-xdist integration: GPUs per worker on each worker's own host, results gathered.

**One host** (``-n N``, or popen gateways that inherit the controller's environment unchanged): the
controller detects once and computes every worker's GPUs; ``pytest_configure_node`` hands both to
the worker in ``workerinput[WORKERINPUT_KEY]``. The worker takes the model from there
(``worker_env``), sets its own visible-devices variables in its own ``pytest_configure``
(``configure``: a controller hook cannot set a worker's environment), before any test module starts
a GPU runtime, and narrows its copy of the model to its GPUs.

**Several hosts** (``--tx ssh=gpu-a ...``, ``--tx 2*popen//env:GPUENV_ROOT=<tree>``): the controller
cannot see a remote host's GPUs, so it sends its model with its host identity (``_hosts.Host``). A
worker whose detection inputs differ from the controller's detects its own host (milliseconds, files
only, with its own environment and the run's options) and plans over the workers of its gateway group
(``--tx 4*ssh=gpu-a`` is one group of 4), claiming seats on its GPUs through per-host file locks
(``_hosts.claim``) so that gateways sharing a host still spread over its GPUs. Markers are evaluated in
the worker against its host; skips on a host other than the controller's name it.

Back to the controller: skips inside the test reports (with their host), performance records and
the worker's host (name, model summary, GPUs) in ``workeroutput`` (``finish_worker``), merged in
``pytest_testnodedown``: the summary lists every host. This module owns both directions; ``_hosts``
holds the host identity, the assignment functions and the seats.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv import _hosts
from pytest_gpuenv._hosts import narrow, plan_assignment, visible_value
from pytest_gpuenv._options import Settings
from pytest_gpuenv.model import GpuEnv, Problem

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv._session import GpuenvSession

#: controller -> worker: {"env": the controller's model (GpuEnv.to_dict()), "host": the controller's
#: {"name", "key", "inputs"}, "assigned": whether the controller planned this worker's GPUs,
#: "gpus": {"positions": [...], "vars": {VAR: value}, "workers_sharing": n} or None,
#: "group": [workers in this worker's gateway group, its rank there], "multihost": bool}
WORKERINPUT_KEY = "gpuenv"
#: worker -> controller: the worker's PerfSession.dump()
WORKEROUTPUT_KEY = "gpuenv_perf"
#: worker -> controller: {"name", "key", "summary", "worker", "gpus"} of the worker's host
HOST_OUTPUT_KEY = "gpuenv_host"


def _vars_text(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


def _plain_popen(spec: Any) -> bool:
    """A gateway that inherits the controller's environment unchanged (what ``-n N`` starts)."""
    return bool(spec.popen) and not (spec.env or spec.python or spec.chdir or spec.via)


def _spec_text(spec: Any) -> str:
    return "//".join(p for p in str(spec._spec).split("//") if not p.startswith("execmodel="))


def _group(node: Any) -> tuple[list[Any], int, bool]:
    """(the specs of this node's group, its rank in it, whether the group is the plain popen one)."""
    spec = node.gateway.spec
    specs = list(getattr(getattr(node, "nodemanager", None), "specs", None) or [spec])
    plain = _plain_popen(spec)
    group = [s for s in specs if _plain_popen(s)] if plain else [s for s in specs if s._spec == spec._spec]
    group = group or [spec]
    rank = next((i for i, s in enumerate(group) if s is spec), None)
    if rank is None:
        try:
            rank = int(str(node.gateway.id).lstrip("gw")) % len(group)
        except ValueError:
            rank = 0
    return group, rank, plain


class XdistHooks:
    """The controller's side of the protocol; registered only when pytest-xdist is installed."""

    def __init__(self, config: pytest.Config, session: GpuenvSession) -> None:
        self.config = config
        self.session = session
        self._plans: dict[int, list[list[int]]] = {}
        self._host: Optional[_hosts.Host] = None

    def _controller_host(self) -> _hosts.Host:
        """This host as the workers inherit it (computed when the first gateway has started)."""
        if self._host is None:
            s = self.session.settings
            self._host = _hosts.here(s.root, s.backend, s.probe)
        return self._host

    def _assignment(self, n_workers: int, rank: int) -> Optional[dict[str, Any]]:
        env = self.session.env
        if n_workers not in self._plans:
            self._plans[n_workers] = plan_assignment(env, n_workers, self.session.settings.worker_gpus)
        plan = self._plans[n_workers]
        if not plan:
            return None
        positions = plan[rank % len(plan)]
        return {
            "positions": positions,
            "vars": visible_value(env, positions),
            "workers_sharing": sum(1 for p in plan if p == positions),
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        group, rank, plain = _group(node)
        specs = list(getattr(getattr(node, "nodemanager", None), "specs", None) or [node.gateway.spec])
        host = self._controller_host()
        node.workerinput[WORKERINPUT_KEY] = {
            "env": self.session.env.to_dict(),
            "host": {"name": self.session.host, "key": host.key, "inputs": host.inputs},
            "assigned": plain,
            "gpus": self._assignment(len(group), rank) if plain else None,
            "group": [len(group), rank],
            "multihost": not all(_plain_popen(s) for s in specs),
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        """One line per worker in the controller's output: which GPU(s) it has, or that its host chooses."""
        data = node.workerinput.get(WORKERINPUT_KEY) or {}
        gpus = data.get("gpus")
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None or self.config.get_verbosity() < 0:
            return
        if not data.get("assigned"):
            tr.write_line(f"gpuenv: [{node.gateway.id}] {_spec_text(node.gateway.spec)}: chooses its GPUs on its "
                          "own host (listed under 'gpuenv: hosts' at the end)")
            return
        if not gpus:
            return
        env = self.session.env
        devices = env.describe_devices([env.usable_devices[p] for p in gpus["positions"]])
        shared = gpus.get("workers_sharing", 1)
        tr.write_line(
            f"gpuenv: [{node.gateway.id}] {devices} via {_vars_text(gpus['vars'])}"
            + (f" (shared by {shared} workers)" if shared > 1 else "")
        )

    @pytest.hookimpl(optionalhook=True, tryfirst=True)  # (before xdist prints the worker's traceback)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        why = _usage_error(error)
        if why is not None:  # (xdist would start it again, forever: the same environment gives the same error)
            pytest.exit(f"gpuenv: worker {node.gateway.id} ({_spec_text(node.gateway.spec)}) cannot start: {why}",
                        returncode=pytest.ExitCode.USAGE_ERROR)
        output = getattr(node, "workeroutput", None) or {}
        raw = output.get(WORKEROUTPUT_KEY)
        if raw:
            self.session.perf.merge(raw)
        info = output.get(HOST_OUTPUT_KEY)
        if isinstance(info, dict) and info.get("key"):
            entry = self.session.hosts.setdefault(str(info["key"]), {
                "name": str(info.get("name")), "summary": str(info.get("summary")), "workers": {},
                "controller": info["key"] == self._controller_host().key,
            })
            entry["workers"][str(info.get("worker"))] = info.get("gpus") or "no GPU assigned"


def _usage_error(error: Any) -> Optional[str]:
    """gpuenv's usage error that stopped a worker at start-up (a bad ``GPUENV_*`` value in its gateway's
    environment), from the traceback xdist reports; None for any other end."""
    lines = str(error or "").splitlines()
    last = next((ln for ln in reversed(lines) if ln.strip()), "")
    head, found, message = last.partition("UsageError: gpuenv: ")
    return message if found and "Error" not in head else None  # (head: "pytest." or "_pytest.config.")


def _numprocesses(config: pytest.Config) -> Optional[int]:
    n = getattr(config.option, "numprocesses", None)
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


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


def configure(config: pytest.Config, session: GpuenvSession) -> None:
    """Register the controller's hooks; check the request (controller) or pin this worker's GPUs."""
    config.pluginmanager.register(XdistHooks(config, session), "gpuenv-xdist")
    if hasattr(config, "workerinput"):
        _pin_worker(config, session)
    else:
        _check_controller(config, session.env, session.settings)


def torch_device_params(config: pytest.Config, params: list[str]) -> Optional[tuple[list[str], list[str]]]:
    """In a worker of a run over several hosts: (values, ids) for ``torch_device`` whose ids are the same
    on every host (xdist needs every worker to collect the same tests): ``best``, ``cpu``, ``gpu``
    (the worker's first GPU, or ``cuda:none`` to skip). None elsewhere (ids are the values)."""
    state = config.stash.get(_WORKER, None)
    if state is None or not state.multihost:
        return None
    from pytest_gpuenv._session import get_settings

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
            "worker": config.workerinput.get("workerid"),  # type: ignore[attr-defined]
            "gpus": (session.worker_gpu or {}).get("desc"),
        }
    return True


def _check_controller(config: pytest.Config, env: GpuEnv, settings: Settings) -> None:
    """Clear errors before any test runs (controller of an xdist run only)."""
    n = _numprocesses(config)
    if not n or settings.worker_gpus == "off":
        return
    hide_all = env.problem("visible-devices-hide-all")
    # a variable set empty hides every GPU on purpose (clr: "HIP_VISIBLE_DEVICES= should disable the device"):
    # the workers inherit it and run without GPUs; any other value that hides all is taken for a mistake
    deliberate = any(env.visible.get(v) == "" for v in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                                        "CUDA_VISIBLE_DEVICES"))
    if hide_all is not None and not deliberate:
        raise pytest.UsageError(f"gpuenv: cannot assign GPUs to {n} xdist workers: {hide_all.message}")
    plan_assignment(env, n, settings.worker_gpus)


def _pin_worker(config: pytest.Config, session: GpuenvSession) -> None:
    """In a worker: choose its GPUs, set its visible-devices variables and narrow the model to them."""
    from pytest_gpuenv import report

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
        plan = plan_assignment(env, max(1, int(size)), worker_gpus)
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
