"""pytest-xdist integration: GPUs per worker on each worker's own host, results gathered.

**One host** (``-n N``, or popen gateways that inherit the controller's environment unchanged): the
controller detects once and computes every worker's GPUs; ``pytest_configure_node`` hands both to
the worker in ``workerinput[WORKERINPUT_KEY]``. The worker takes the model from there
(``worker_env``), sets its own visible-devices variables in its own ``pytest_configure``
(``configure``: a controller hook cannot set a worker's environment), before any test module starts
a GPU runtime, and narrows its copy of the model to its GPUs.

**Several hosts** (``--tx ssh=gpu-a ...``, ``--tx 2*popen//env:GPUENV_ROOT=<tree>``): the controller
cannot see a remote host's GPUs, so it sends its model with its host identity (``dist.hosts.Host``). A
worker whose detection inputs differ from the controller's detects its own host (milliseconds, files
only, with its own environment and the run's options) and plans over the workers of its gateway group
(``--tx 4*ssh=gpu-a`` is one group of 4), claiming seats on its GPUs through per-host file locks
(``dist.hosts.claim``) so that gateways sharing a host still spread over its GPUs. Markers are evaluated in
the worker against its host; skips on a host other than the controller's name it.

**``--dist gpu``** (``dist.routing``, ``dist.scheduler``): ``pytest_configure_node`` opens an execnet channel to the
worker (in its ``workerinput``), on which the worker sends, before its collection, the tests its host
cannot run; ``pytest_xdist_make_scheduler`` returns the scheduler that reads them.

Back to the controller: skips inside the test reports (with their host), performance records and
the worker's host (name, model summary, GPUs) in ``workeroutput`` (``finish_worker``), merged in
``pytest_testnodedown``: the summary lists every host with its tests' outcomes (counted here from the
reports). This module is the controller's side, ``dist.worker`` the worker's; ``dist.hosts`` holds the
host identity, the assignment functions and the seats.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv.dist import claim_reports
from pytest_gpuenv.dist import hosts as _hosts
from pytest_gpuenv.dist import routing
from pytest_gpuenv.dist.hosts import plan_assignment, visible_value
from pytest_gpuenv.session.options import Settings
from pytest_gpuenv.dist.worker import (
    HOST_OUTPUT_KEY,
    ROUTES_KEY,
    WORKERINPUT_KEY,
    WORKEROUTPUT_KEY,
    RouteSender,
    _vars_text,
    pin,
)
from pytest_gpuenv.base.model import GpuEnv

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.dist.scheduler import NodeRoutes
    from pytest_gpuenv.session.state import GpuenvSession

#: seconds to wait for a worker's routes once its collection has arrived (they come first: a worker without
#: gpuenv sends none)
_ROUTES_TIMEOUT = 5.0


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
        #: ``--dist gpu``: each worker's channel for its routes, until they are read
        self._channels: dict[Any, Any] = {}
        #: worker id -> host name, from its routes (``--dist gpu``)
        self._worker_host: dict[str, str] = {}
        #: worker id -> {nodeid: outcome} of the tests it ran; test -> the worker that last reported it
        self._outcomes: dict[str, dict[str, str]] = {}
        self._ran_on: dict[str, str] = {}
        #: worker id -> the key of its host's entry in ``session.hosts`` (from its output, when it ended well)
        self._worker_entry: dict[str, str] = {}
        #: ``--dist gpu``'s scheduler, for its ledger of claims
        self._sched: Any = None

    def _controller_host(self) -> _hosts.Host:
        """This host as the workers inherit it (computed when the first gateway has started)."""
        if self._host is None:
            s = self.session.settings
            self._host = _hosts.here(s.root, s.backend, s.probe)
        return self._host

    def _assignment(self, n_workers: int, rank: int) -> Optional[dict[str, Any]]:
        env = self.session.env
        if n_workers not in self._plans:
            self._plans[n_workers] = plan_assignment(env, n_workers, self.session.settings.worker_gpus,
                                                     routing.wanted(self.config))
        plan = self._plans[n_workers]
        if not plan:
            return None
        positions = plan[rank % len(plan)]
        return {
            "positions": positions,
            "vars": visible_value(env, positions),
            "workers_sharing": sum(1 for p in plan if p[:1] == positions[:1]),
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
            "share": routing.wanted(self.config),
        }
        if routing.wanted(self.config):
            self._channels[node] = channel = node.gateway.newchannel()
            node.workerinput[ROUTES_KEY] = channel

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if not routing.wanted(config):
            return None
        from pytest_gpuenv.dist.scheduler import GpuScheduling

        self._sched = GpuScheduling(config, log, self._routes_of)
        return self._sched

    def _routes_of(self, node: Any) -> NodeRoutes:
        """The routes the worker sent (arrived before its collection, on the same connection)."""
        from pytest_gpuenv.dist.scheduler import NodeRoutes

        channel = self._channels.pop(node, None)
        try:
            data = channel.receive(timeout=_ROUTES_TIMEOUT) if channel is not None else None
        except Exception:  # execnet's TimeoutError, RemoteError or EOFError: a worker that sent nothing
            data = None
        routes = NodeRoutes.from_message(node, data)
        self._worker_host[str(node.gateway.id)] = routes.host
        return routes

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count each worker's outcomes (failed over skipped over passed), for the hosts' summary."""
        node = getattr(report, "node", None)
        worker = str(node.gateway.id) if node is not None else self._ran_on.get(report.nodeid)
        if worker is None:
            return
        if self._sched is not None and node is not None:
            claim_reports.on_report(self._sched, node, report)
        self._ran_on[report.nodeid] = worker  # (xdist's report of a test whose worker crashed may carry no node)
        seen = self._outcomes.setdefault(worker, {})
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        if _RANK[outcome] >= _RANK[seen.get(report.nodeid, "passed")]:
            seen[report.nodeid] = outcome

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """``--dist gpu``: per GPU, its tests, the peaks of claimed and used memory and the waits for room."""
        lines = self._sched.ledger.summary_lines() if self._sched is not None else []
        if lines:
            terminalreporter.write_sep("-", "gpuenv: GPU claims")
            for line in lines:
                terminalreporter.write_line(line)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """Name the host of the worker that crashed (where it is known: ``--dist gpu``)."""
        node = getattr(report, "node", None)
        host = self._worker_host.get(str(node.gateway.id)) if node is not None else None
        if host and isinstance(report.longrepr, str):
            report.longrepr += f" on host {host}"

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
            self._worker_entry[str(node.gateway.id)] = str(info["key"])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        """Each worker's outcomes onto its host's entry, now that every report is in (xdist logs the report of a
        test whose worker crashed after that worker is down). A worker that died sent no host: its tests count
        on the host it routed under (``--dist gpu``), or on an entry of their own, so the counts add up."""
        for worker, tests in self._outcomes.items():
            outcomes = Counter(tests.values())
            key = self._worker_entry.get(worker)
            if key is None:
                name = self._worker_host.get(worker, f"the host of {worker}")
                key = next((k for k, e in self.session.hosts.items() if e["name"] == name), f"(died) {name}")
                self.session.hosts.setdefault(key, {"name": name, "summary": "its workers died before they reported it",
                                                    "workers": {}, "controller": False})
            self.session.hosts[key].setdefault("tests", Counter()).update(outcomes)
        self._outcomes.clear()
        if self._sched is not None:
            self.session.gpu_claims = [g.to_dict() for g in self._sched.ledger.gpus.values()]


#: which outcome a test keeps when its reports differ (a failed teardown after a pass is a failure)
_RANK = {"passed": 0, "skipped": 1, "failed": 2}


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


def configure(config: pytest.Config, session: GpuenvSession) -> None:
    """Register the controller's hooks; check the request (controller) or pin this worker's GPUs."""
    config.pluginmanager.register(XdistHooks(config, session), "gpuenv-xdist")
    if hasattr(config, "workerinput"):
        pin(config, session)
        channel = config.workerinput.get(ROUTES_KEY)
        if channel is not None:
            from pytest_gpuenv.dist.use import UseMeter

            config.pluginmanager.register(RouteSender(session, channel), "gpuenv-routes")
            config.pluginmanager.register(UseMeter(session), "gpuenv-use")
    else:
        _check_controller(config, session.env, session.settings)


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


