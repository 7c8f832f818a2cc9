"""pytest-xdist's side of ``--dist gpu``'s scheduler (``dist.scheduler.GpuScheduling``), for driving it directly
as xdist's DSession drives it (xdist dsession.py): a worker controller that runs what it is sent as xdist's worker
does, the hook that records what the scheduler reports, and the controller's config. No gateways, no processes.

Used by the scheduler tests (tests/distributed) and by benchmarks/dist_claims.py, which puts this folder on
``sys.path``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Iterable, Optional, Sequence

from pytest_gpuenv.dist.scheduler import GpuScheduling, NodeRoutes


class Worker:
    """A WorkerController as the scheduler sees it. Like xdist's worker (remote.py) it runs nothing sent after
    its shutdown (that is queued behind the shutdown marker), and a test starts once the worker knows the next
    one or was told to shut down (``running``). ``sent``: every index it was sent; ``queue``: those not yet
    completed (the caller pops a test it completes)."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []
        self.queue: list[int] = []

    def shutdown(self) -> None:
        self.shutting_down = True

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        assert not self.shutting_down, f"{self.gateway.id} was sent {indices} after its shutdown"
        self.sent.extend(indices)
        self.queue.extend(indices)

    def running(self) -> Optional[int]:
        """The test this worker runs now: its first, once it knows the next or was told to shut down."""
        if self.queue and (len(self.queue) >= 2 or self.shutting_down):
            return self.queue[0]
        return None


class Hook:
    """``config.hook``: every call recorded as ``(hook name, keyword arguments)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda **kw: self.calls.append((name, kw))

    def reports(self, outcome: str) -> list[str]:
        """The node ids of the ``pytest_runtest_logreport`` calls with this outcome (``failed``, ``skipped``)."""
        return [kw["report"].nodeid for name, kw in self.calls
                if name == "pytest_runtest_logreport" and kw["report"].outcome == outcome]


def scheduler(tx: Sequence[str], routes_of: Callable[[Any], NodeRoutes],
              maxworkerrestart: Optional[str] = None) -> GpuScheduling:
    """The scheduler of a controller started with ``--tx`` ``tx`` (``["4*popen"]``); ``routes_of(worker)``: what
    the worker's host can run. Its hook: ``sched.config.hook`` (a ``Hook``)."""
    config = SimpleNamespace(getvalue=lambda name: list(tx), getoption=lambda name, default=None: None,
                             option=SimpleNamespace(maxworkerrestart=maxworkerrestart, numprocesses=None), hook=Hook())
    return GpuScheduling(config, SimpleNamespace(gpusched=lambda *a: None), routes_of)  # type: ignore[arg-type]


def start(sched: GpuScheduling, workers: Iterable[Worker], tests: Sequence[str]) -> None:
    """Each worker added and its collection given (``tests``), then, once every worker has collected, the first
    tests sent (xdist: ``worker_workerready``, ``worker_collectionfinish``)."""
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, list(tests))
    if sched.collection_is_completed:
        sched.schedule()
