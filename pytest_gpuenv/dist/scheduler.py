"""``--dist gpu``: xdist's load scheduling, with each test sent only to workers whose host can run it.

Every worker collects the same tests and, before the controller hands any out, tells it which of them
its host cannot run and why, and which are in an ``xdist_group`` (``dist.routing.routes``, over a channel
``dist.xdist`` opened for it). ``GpuScheduling`` keeps the work in units (a test, or an ``xdist_group``: a
group goes to one worker), each queued under the set of live workers (not shutting down) that can run
it. A worker asking for work takes from the queues it belongs to, the most restricted first (the ROCm
tests go to the ROCm workers before the tests any worker can run), in chunks sized as ``--dist load``
sizes them. A test no worker can run is skipped once here, on the controller, with each host and what it
lacked.

Workers that have GPUs get their tests by claims instead (``marks.claims``, ``dist.ledger``): one running
and one sent; a test starts only when its claim fits what its worker's GPUs have left, else the worker
waits until a test ends elsewhere. A test whose claim fits on no GPU of the workers that can run it is
skipped once here.

A worker that dies: its test in progress is xdist's crash report (the host is added to it, ``dist.xdist``);
the rest go back to the queues, to the workers that can still run them; what only the dead worker's
host (or workers already told to shut down) could run waits for the replacement xdist starts, or, where xdist will start none
(``--max-worker-restart``), is reported as failed, naming the worker and host.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

import pytest
from xdist.dsession import get_default_max_worker_restart
from xdist.report import report_collection_diff
from xdist.workermanage import parse_tx_spec_config

from pytest_gpuenv.dist.ledger import Ledger
from pytest_gpuenv.dist.routing import no_host_reason
from pytest_gpuenv.marks.claims import Claim
from pytest_gpuenv.session.runtest import SKIP_PROPERTY

if TYPE_CHECKING:  # pragma: no cover
    from xdist.workermanage import WorkerController

class Blocked(NamedTuple):
    """Why a worker's host cannot run one test, as the worker sent it (``dist.routing.routes``)."""

    category: str
    cause: str
    reason: str
    location: tuple[Any, ...]


#: the host of the skip of a test no host can run (the summary says ``[on every host]``)
NO_HOST = "every host"


class NodeRoutes:
    """What one worker sent: its host's name and the tests it cannot run (index -> ``Blocked``), with the
    ``xdist_group`` of grouped tests (index -> name); its GPUs (``dist.routing.gpu_facts``) and the tests'
    claims (index -> ``Claim``, the others ``default``)."""

    def __init__(self, host: str, cannot: dict[int, Blocked], groups: dict[int, str],
                 gpus: Optional[list[dict[str, Any]]] = None, claims: Optional[dict[int, Claim]] = None,
                 default: Claim = Claim()) -> None:
        self.host, self.cannot, self.groups = host, cannot, groups
        self.gpus, self.claims, self.default = gpus or [], claims or {}, default

    @classmethod
    def from_message(cls, node: Any, data: Any) -> NodeRoutes:
        """From the worker's message; a worker that sent none (no gpuenv there) can run everything."""
        if not isinstance(data, dict):
            return cls(str(node.gateway.id), {}, {})
        cannot = {int(i): Blocked(str(c[0]), str(c[1]), str(c[2]), tuple(c[3]))
                  for i, c in dict(data.get("cannot") or {}).items()}
        claims = {int(i): Claim.from_list(c) for i, c in dict(data.get("claims") or {}).items()}
        return cls(str(data.get("host") or node.gateway.id), cannot, dict(data.get("groups") or {}),
                   list(data.get("gpus") or []), claims, Claim.from_list(data.get("default") or []))


class GpuScheduling:
    """The ``xdist.scheduler.protocol.Scheduling`` of ``--dist gpu`` (see the module docstring)."""

    def __init__(self, config: pytest.Config, log: Any, routes_of: Callable[[Any], NodeRoutes]) -> None:
        self.config = config
        self.log = log.gpusched
        self.numnodes = len(parse_tx_spec_config(config))
        self.maxschedchunk: Optional[int] = config.getoption("maxschedchunk", None)
        self.routes_of = routes_of
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.node2routes: dict[WorkerController, NodeRoutes] = {}
        self.collection: Optional[list[str]] = None
        #: unit id -> its test indices (a test, or an xdist_group's tests)
        self.units: list[list[int]] = []
        #: the units not yet sent, under the set of live workers that can run them, in collection order
        self.queues: dict[frozenset[Any], list[int]] = {}
        #: units that only crashed workers could run, until their replacement collects
        self.waiting: list[int] = []
        #: workers this scheduler told to shut down: they take nothing more. (A worker that died is marked
        #: ``shutting_down`` by xdist's receiving thread at once, but stays live here until its removal, which
        #: requeues its tests; until then another worker's removal must not take them for lost.)
        self.told: set[Any] = set()
        self.crashes = 0
        self.max_restart = get_default_max_worker_restart(config)
        #: the GPUs and the claims of the tests admitted on them
        self.ledger = Ledger()
        #: workers whose next test waits for room on their GPUs
        self.blocked: set[Any] = set()

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.has_queued:
            return False
        # (a worker of GPUs starts its last test only when told to shut down: this scheduler tells it when
        # the test fits, not xdist's shutdown of every worker)
        return all(len(p) < 2 and not (p and self.ledger.has_gpus(n) and n not in self.told)
                   for n, p in self.node2pending.items())

    @property
    def has_queued(self) -> bool:
        return bool(self.waiting) or any(self.queues.values())

    @property
    def has_pending(self) -> bool:
        return self.has_queued or any(self.node2pending.values())

    def add_node(self, node: WorkerController) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        routes = self.routes_of(node)  # (sent before the collection, on the same connection: here already)
        if self.collection is not None and list(collection) != self.collection:
            first = next(iter(self.node2collection), None)
            self.log(report_collection_diff(self.collection, collection,
                                            first.gateway.id if first else "?", node.gateway.id))
            return
        self.node2collection[node] = list(collection)
        self.node2routes[node] = routes
        self.ledger.add_worker(node, routes.gpus)
        if self.collection is not None:  # a replacement worker: it takes its share, and what waited for its host
            waiting = [i for u in self.waiting for i in self.units[u]]
            self.waiting = self._requeue(waiting) + self._rekey()

    def mark_test_complete(self, node: WorkerController, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self.ledger.complete(node, item_index)
        self.check_schedule(node, duration=duration)
        self._unblock()

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.waiting.extend(self._requeue([self.collection.index(item)], first=True))
        for node in self.nodes:
            self.check_schedule(node)

    def remove_pending_tests_from_node(self, node: WorkerController, indices: Sequence[int]) -> None:
        raise NotImplementedError()

    def remove_node(self, node: WorkerController) -> Optional[str]:
        pending = self.node2pending.pop(node)
        routes = self.node2routes.pop(node, None)
        self.told.discard(node)
        self.ledger.remove_worker(node)  # (its claims are free again, also where it died mid-test)
        self.blocked.discard(node)
        crashed = None
        if pending:
            assert self.collection is not None
            crashed = self.collection[pending.pop(0)]
            self.crashes += 1
        orphans = self._requeue(pending) + self._rekey()
        if crashed is not None and (self.max_restart is None or self.crashes <= self.max_restart):
            self.waiting.extend(orphans)  # xdist starts a replacement on the same gateway spec
        else:
            for unit in orphans:
                for i in self.units[unit]:
                    self._report_lost(i, node, routes.host if routes else str(node.gateway.id), crashed is not None)
        for other in self.node2pending:
            self.check_schedule(other)
        return crashed

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._same_collections():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        self._make_units()
        if self.maxschedchunk is None:
            self.maxschedchunk = max(1, len(self.collection))
        if any(self.ledger.has_gpus(n) for n in self.nodes):  # workers of GPUs: a test at a time, by claims
            for node in self.nodes:
                self.check_schedule(node)
            return
        total = sum(len(self.units[u]) for q in self.queues.values() for u in q)
        if total < 2 * len(self.nodes):  # few tests: one at a time, round the workers
            nodes = cycle(self.nodes)
            for _ in range(total * len(self.nodes)):
                if not self.has_queued:
                    break
                self._send(next(nodes), 1)
        else:
            for node in self.nodes:
                self._send(node, max(2, min(int(self._share(node)) // 4, self.maxschedchunk)))
        for node in self.nodes:
            if not self._share(node):
                self._shut(node)

    def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if self.ledger.has_gpus(node):
            self._fill(node)
            return
        fair = self._share(node)
        if not fair:
            self._shut(node)
            return
        share = int(fair)
        pending = self.node2pending[node]
        if len(pending) < max(2, share // 4):
            if duration >= 0.1 and len(pending) >= 2:  # long tests, and enough to go on with
                return
            assert self.maxschedchunk is not None
            self._send(node, min(max(2, share // 2) - len(pending), max(2 - len(pending), self.maxschedchunk)))

    def _shut(self, node: Any) -> None:
        self.told.add(node)
        node.shutdown()

    # -- claims (workers of GPUs)

    def claim(self, index: int) -> Claim:
        routes = next(iter(self.node2routes.values()), None)
        return Claim() if routes is None else routes.claims.get(index, routes.default)

    def _fill(self, node: Any) -> None:
        """Keep the worker at one test running and one more sent: xdist's worker starts a test once it knows
        the next (or is told to shut down), so sending a test starts the one before it, which is admitted
        then, when its claim fits (``dist.ledger``); else the worker waits, in ``blocked``, until a test
        ends somewhere."""
        pending = self.node2pending[node]
        while len(pending) < 2:
            unit = self._peek(node)
            if unit is None:
                if not pending:
                    if not self._share(node):
                        self._shut(node)
                elif self._admit(node, pending[-1:]):
                    self._shut(node)
                return
            tests = self.units[unit[0]]
            if not self._admit(node, pending[-1:] + tests[:-1]):
                return
            self.queues[unit[1]].remove(unit[0])
            pending.extend(tests)
            node.send_runtest_some(tests)

    def _admit(self, node: Any, indices: list[int]) -> bool:
        """Admit ``indices`` on the worker if their claims fit; else it waits (``blocked``)."""
        claims = [self.claim(i) for i in indices]
        if not self.ledger.fits(node, claims):
            self.ledger.wait(node, claims)
            self.blocked.add(node)
            return False
        self.blocked.discard(node)
        for i, c in zip(indices, claims):
            self.ledger.admit(node, i, c)
        return True

    def _unblock(self) -> None:
        """After a test ended or a worker left: the waiting workers, longest waiting first."""
        for other in sorted(self.blocked, key=lambda n: self.ledger.waiting_since.get(n, 0.0)):
            if other in self.node2pending and not other.shutting_down:
                self._fill(other)

    def _peek(self, node: Any) -> Optional[tuple[int, frozenset[Any]]]:
        """(the next unit for this worker, its queue's key): the most restricted queue first."""
        for key in sorted((k for k in self.queues if node in k and self.queues[k]), key=len):
            return self.queues[key][0], key
        return None

    # -- the queues

    def _share(self, node: Any) -> float:
        """This worker's fair share of the queued units: each queue divided among the workers that can run it."""
        return sum(len(q) / len(key) for key, q in self.queues.items() if node in key and q)

    def _send(self, node: Any, num: int) -> None:
        """Send ``num`` tests (whole units) from the queues this worker can run, the most restricted first."""
        taken: list[int] = []
        for key in sorted((k for k in self.queues if node in k), key=len):
            queue = self.queues[key]
            while queue and len(taken) < num:
                taken.extend(self.units[queue.pop(0)])
            if len(taken) >= num:
                break
        if taken:
            self.node2pending[node].extend(taken)
            node.send_runtest_some(taken)

    def _able(self, unit: list[int]) -> frozenset[Any]:
        """The live workers that can run every test of ``unit``; for a group none can run whole, those
        that can run some of it (the rest skips there, as the group stays on one worker). A worker told to
        shut down is not live here: it runs nothing sent after that (xdist's remote.py queues it behind
        the shutdown), so a test it alone could run waits for a replacement or is reported, never queued
        for it."""
        live = {n: r for n, r in self.node2routes.items() if n not in self.told
                and all(self.ledger.ever_fits(n, self.claim(i)) for i in unit)}
        full = frozenset(n for n, r in live.items() if not any(i in r.cannot for i in unit))
        if full or len(unit) == 1:
            return full
        return frozenset(n for n, r in live.items() if any(i not in r.cannot for i in unit))

    def _rekey(self) -> list[int]:
        """Queue every queued unit again under the live workers that can run it; returns those none can."""
        units = sorted(u for q in self.queues.values() for u in q)
        self.queues.clear()
        orphans = []
        for unit in units:
            able = self._able(self.units[unit])
            if able:
                self.queues.setdefault(able, []).append(unit)
            else:
                orphans.append(unit)
        return orphans

    def _requeue(self, indices: list[int], first: bool = False) -> list[int]:
        """New units for tests sent back (a crashed worker's, a replacement's wait), grouped as collected,
        queued under the live workers that can run them; returns the units none can."""
        by_group: dict[str, list[int]] = {}
        groups = next(iter(self.node2routes.values())).groups if self.node2routes else {}
        new = []
        for i in indices:
            name = groups.get(i)
            if name is None:
                new.append([i])
            elif name in by_group:
                by_group[name].append(i)
            else:
                by_group[name] = [i]
                new.append(by_group[name])
        ids = list(range(len(self.units), len(self.units) + len(new)))
        self.units.extend(new)
        orphans = []
        for unit in ids:
            able = self._able(self.units[unit])
            if not able:
                orphans.append(unit)
            elif first:
                self.queues.setdefault(able, []).insert(0, unit)
            else:
                self.queues.setdefault(able, []).append(unit)
        return orphans

    def _make_units(self) -> None:
        """The units of the collection; a test no worker can run is reported skipped here instead."""
        assert self.collection is not None
        routes = list(self.node2routes.values())
        groups = routes[0].groups if routes else {}
        by_group: dict[str, list[int]] = {}
        for i in range(len(self.collection)):
            if routes and all(i in r.cannot for r in routes):
                self._report_no_host(i, routes)
                continue
            if not any(self.ledger.ever_fits(n, self.claim(i)) for n, r in self.node2routes.items()
                       if i not in r.cannot):
                self._report_no_room(i)
                continue
            name = groups.get(i)
            if name is None:
                self.units.append([i])
            elif name not in by_group:
                by_group[name] = [i]
                self.units.append(by_group[name])
            else:
                by_group[name].append(i)
        self.queues[frozenset()] = list(range(len(self.units)))
        for unit in self._rekey():  # (none: each unit has a test some worker can run)
            self.waiting.append(unit)

    def _same_collections(self) -> bool:
        (first, col), *rest = self.node2collection.items()
        same = True
        for node, collection in rest:
            msg = report_collection_diff(col, collection, first.gateway.id, node.gateway.id)
            if msg:
                same = False
                self.log(msg)
                self.config.hook.pytest_collectreport(
                    report=pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=msg, result=[]))
        return same

    # -- reports made here

    def _report_no_host(self, index: int, routes: list[NodeRoutes]) -> None:
        by_host = {r.host: r.cannot[index] for r in routes}
        category, cause, _reason, location = next(iter(by_host.values()))
        reason = no_host_reason({host: c.reason for host, c in by_host.items()})
        path, line = str(location[0]), location[1]
        longrepr = (path, int(line) + 1 if line is not None else -1, f"Skipped: {reason}")
        self._emit(index, tuple(location), "skipped", longrepr, [(SKIP_PROPERTY, [category, cause, NO_HOST])])

    def _report_no_room(self, index: int) -> None:
        """A test whose claim fits on no GPU of the workers that can run it: skipped once, here."""
        assert self.collection is not None
        nodeid = self.collection[index]
        claim = self.claim(index)
        reason = self.ledger.no_room_reason(claim)
        location = (nodeid.split("::")[0], None, nodeid)
        self._emit(index, location, "skipped", (location[0], -1, f"Skipped: {reason}"),
                   [(SKIP_PROPERTY, ["memory", f"claim of {claim.text()} fits on no GPU", NO_HOST])])

    def _report_lost(self, index: int, node: Any, host: str, crashed: bool) -> None:
        assert self.collection is not None
        nodeid = self.collection[index]
        why = (f"worker {node.gateway.id} on host {host} crashed, xdist starts no replacement "
               "(--max-worker-restart) and no other worker can run it" if crashed else
               f"the run stopped before it was sent (the last worker that could run it, {node.gateway.id} on "
               f"host {host}, has finished)")
        self._emit(index, (nodeid.split("::")[0], None, nodeid), "failed", f"not run: {why}", [], node)

    def _emit(self, index: int, location: tuple[Any, ...], outcome: str, longrepr: Any,
              props: list[tuple[str, Any]], node: Any = None) -> None:
        """The reports of a test that ran nowhere: setup with ``outcome``, then a passed teardown."""
        assert self.collection is not None
        nodeid = self.collection[index]
        loc = (str(location[0]), location[1], str(location[2]))
        hook = self.config.hook
        hook.pytest_runtest_logstart(nodeid=nodeid, location=loc)
        for when, result, text in (("setup", outcome, longrepr), ("teardown", "passed", None)):
            rep = pytest.TestReport(nodeid, loc, {}, result, text, when, user_properties=props)  # type: ignore[arg-type]
            if node is not None:
                rep.node = node  # type: ignore[attr-defined]
            hook.pytest_runtest_logreport(report=rep)
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=loc)
