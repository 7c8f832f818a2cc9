"""``--dist gpu``: the GPUs of the run and the claims of the tests running on them (``marks.claims``).

Each worker sends its GPUs in its device order (``dist.routing.gpu_facts``): an id that is the same for
every worker that sees that GPU (its UUID, else its host and bus or index), its total memory and what other
processes held on it when the worker started (``dist.gpu_memory``: NVML on NVIDIA, amdsmi on AMD; 0 where
neither can tell). A test of ``devices`` GPUs runs on the first ``devices`` of its worker's GPUs. Several
workers may share a GPU: claims are counted per GPU over every worker.

A worker holds on each of its GPUs the largest claim among its admitted tests there (it runs them one at a
time). A test fits a worker when, on each of its GPUs, what the other workers hold plus the worker's own
largest claim stays within the GPU's total memory less what other processes held, and no other worker's
test holds it exclusively; an exclusive test fits only where no other worker holds anything; and no test
waits there for room since earlier (no overtaking: a big or exclusive test is not starved by a stream of small
ones; the GPU drains until it fits, and the scheduler tries the waiting workers longest first). A GPU whose
memory is unknown admits any amount (exclusivity still holds). ``ever_fits`` is the same check on an
otherwise empty GPU: a claim that fails it waits for nothing and is skipped instead.

The ledger also keeps the summary: per GPU the tests admitted, the peak of claimed memory, the time tests
waited for room, the largest use a test reported and how many used more than they claimed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_gpuenv.base.model import format_size
from pytest_gpuenv.marks.claims import Claim


@dataclass
class Gpu:
    """One GPU of the run and what the tests admitted on it hold."""

    id: str
    name: str
    #: total memory in bytes; None: unknown (claims are not counted against it)
    total: Optional[int]
    #: bytes other processes held when the first worker that sees it started
    others: int = 0
    #: worker -> bytes its admitted tests hold here (the largest of their claims)
    held: dict[Any, int] = field(default_factory=dict)
    #: workers whose admitted tests hold it exclusively
    exclusive: set[Any] = field(default_factory=set)
    tests: int = 0
    peak_claimed: int = 0
    waited: float = 0.0
    peak_used: int = 0
    over: int = 0

    @property
    def capacity(self) -> Optional[int]:
        return None if self.total is None else max(0, self.total - self.others)

    @property
    def claimed(self) -> int:
        return sum(self.held.values())

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "total": self.total, "others": self.others, "tests": self.tests,
                "peak_claimed": self.peak_claimed, "peak_used": self.peak_used, "waited": round(self.waited, 3),
                "over_claim": self.over}


class Ledger:
    """The GPUs, each worker's GPUs and the tests admitted on them (see the module docstring)."""

    def __init__(self) -> None:
        self.gpus: dict[str, Gpu] = {}
        #: worker -> its GPUs' ids, in its device order
        self.order: dict[Any, list[str]] = {}
        #: worker -> {test index: claim} of its admitted tests not yet complete
        self.admitted: dict[Any, dict[int, Claim]] = {}
        #: worker -> when its next test started waiting for room (``monotonic``), and on which GPUs
        self.waiting_since: dict[Any, float] = {}
        self.waiting_on: dict[Any, set[str]] = {}

    # -- workers

    def add_worker(self, worker: Any, gpus: list[dict[str, Any]]) -> None:
        ids = []
        for g in gpus:
            gid = str(g["id"])
            total = g.get("total")
            gpu = self.gpus.get(gid)
            if gpu is None:  # (a replacement worker's reading would count this run's own tests)
                gpu = self.gpus[gid] = Gpu(gid, str(g.get("name") or gid), int(total) if total else None,
                                           int(g.get("others") or 0))
            ids.append(gid)
        self.order[worker] = ids
        self.admitted[worker] = {}

    def remove_worker(self, worker: Any) -> None:
        """Release everything the worker held (it finished, or died mid-test)."""
        for gid in self.order.pop(worker, []):
            self.gpus[gid].held.pop(worker, None)
            self.gpus[gid].exclusive.discard(worker)
        self.admitted.pop(worker, None)
        self.waiting_since.pop(worker, None)
        self.waiting_on.pop(worker, None)

    def has_gpus(self, worker: Any) -> bool:
        return bool(self.order.get(worker))

    # -- admission

    def _mine(self, worker: Any, claim: Claim) -> list[str]:
        return self.order.get(worker, [])[: claim.devices]

    def _wanted(self, worker: Any, claims: list[Claim]) -> dict[str, tuple[int, bool]]:
        """GPU id -> (largest claim, any exclusive) of ``claims`` on this worker."""
        out: dict[str, tuple[int, bool]] = {}
        for c in claims:
            for gid in self._mine(worker, c):
                mem, excl = out.get(gid, (0, False))
                out[gid] = (max(mem, c.memory), excl or c.exclusive)
        return out

    def fits(self, worker: Any, claims: list[Claim]) -> bool:
        """Whether the worker may admit ``claims`` besides its admitted tests now."""
        order = self.order.get(worker)
        if not order:
            return True
        if any(c.devices > len(order) for c in claims):
            return False
        want = self._wanted(worker, list(self.admitted[worker].values()) + claims)
        since = self.waiting_since.get(worker, float("inf"))
        for gid, (mem, excl) in want.items():
            if any(t < since and gid in self.waiting_on.get(w, ()) for w, t in self.waiting_since.items()):
                return False  # (no overtaking: a test waiting longer for this GPU goes first)
            gpu = self.gpus[gid]
            others = [w for w in gpu.held if w != worker]
            if gpu.exclusive - {worker} or (excl and others):
                return False
            cap = gpu.capacity
            if cap is not None and gpu.claimed - gpu.held.get(worker, 0) + mem > cap:
                return False
        return True

    def ever_fits(self, worker: Any, claim: Claim) -> bool:
        """Whether ``claim`` fits this worker's GPUs with nothing else on them."""
        order = self.order.get(worker)
        if not order:
            return True
        if claim.devices > len(order):
            return False
        return all(self.gpus[g].capacity is None or claim.memory <= (self.gpus[g].capacity or 0)
                   for g in self._mine(worker, claim))

    def admit(self, worker: Any, index: int, claim: Claim) -> None:
        mine = self.admitted.setdefault(worker, {})
        mine[index] = claim
        waited = self.waiting_since.pop(worker, None)
        self.waiting_on.pop(worker, None)
        elapsed = time.monotonic() - waited if waited is not None else 0.0
        for gid in self._mine(worker, claim):
            gpu = self.gpus[gid]
            gpu.tests += 1
            gpu.waited += elapsed
        self._hold(worker)

    def complete(self, worker: Any, index: int) -> None:
        if self.admitted.get(worker, {}).pop(index, None) is not None:
            self._hold(worker)

    def _hold(self, worker: Any) -> None:
        """Recompute what the worker holds on its GPUs from its admitted tests."""
        want = self._wanted(worker, list(self.admitted.get(worker, {}).values()))
        for gid in self.order.get(worker, []):
            gpu = self.gpus[gid]
            if gid in want:
                gpu.held[worker] = want[gid][0]
                if want[gid][1]:
                    gpu.exclusive.add(worker)
                else:
                    gpu.exclusive.discard(worker)
                gpu.peak_claimed = max(gpu.peak_claimed, gpu.claimed)
            else:
                gpu.held.pop(worker, None)
                gpu.exclusive.discard(worker)

    def wait(self, worker: Any, claims: list[Claim]) -> None:
        """The worker's next tests (``claims``) found no room: its wait starts now (if it had not started)."""
        self.waiting_since.setdefault(worker, time.monotonic())
        self.waiting_on[worker] = {g for c in claims for g in self._mine(worker, c)}

    # -- what is known of a test

    def beside(self, worker: Any, index: int) -> list[tuple[Any, int, Claim]]:
        """(worker, test index, claim) of the tests admitted on other workers that share a GPU with ``index``."""
        claim = self.admitted.get(worker, {}).get(index)
        mine = set(self._mine(worker, claim or Claim()))
        out = []
        for other, tests in self.admitted.items():
            if other == worker:
                continue
            for i, c in tests.items():
                if mine & set(self._mine(other, c)):
                    out.append((other, i, c))
        return out

    def gpus_of(self, worker: Any, claim: Claim) -> list[str]:
        return self._mine(worker, claim)

    def record_use(self, gid: str, used: int, claimed: int) -> None:
        gpu = self.gpus.get(gid)
        if gpu is not None:
            gpu.peak_used = max(gpu.peak_used, used)
            gpu.over += used > claimed

    def no_room_reason(self, claim: Claim) -> str:
        """Why ``claim`` fits no worker's GPUs, for its skip."""
        sizes = sorted({(g.capacity, g.total, g.others) for g in self.gpus.values() if g.capacity is not None})
        if not sizes:
            return f"claim of {claim.text()}: no worker holds {claim.devices} GPU(s)"
        cap, total, others = sizes[-1]
        held = f" ({format_size(others)} held by other processes)" if others else ""
        return (f"claim of {claim.text()} fits on no GPU of this run: the largest has {format_size(cap or 0)} "
                f"free of {format_size(total or 0)}{held}")

    def summary_lines(self) -> list[str]:
        lines = []
        for g in self.gpus.values():
            total = f" of {format_size(g.total)}" if g.total is not None else " (memory unknown)"
            others = f", {format_size(g.others)} held by other processes" if g.others else ""
            used = f", peak used by a test {format_size(g.peak_used)}" if g.peak_used else ""
            over = f", {g.over} over their claim" if g.over else ""
            lines.append(f"{g.name} [{g.id}]: {g.tests} test(s), peak claimed {format_size(g.peak_claimed)}{total}"
                         f"{others}{used}, waited for room {g.waited:.1f} s{over}")
        return lines
