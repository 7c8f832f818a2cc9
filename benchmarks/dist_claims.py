"""What ``--dist gpu``'s scheduling by memory claims costs per test: 10,000 tests over 16 workers that share
two 80 GiB GPUs, driven as xdist's DSession drives the scheduler (no processes: the controller's CPU time
alone, which is where the scheduler runs).

Each simulated worker runs its tests as xdist's does (a test starts once the worker knows the next, or is told
to shut down: the scheduler tests' stand-ins, tests/_xdist_standin.py); completions come in a random order. A third of the tests claim 30 GiB, one in fifty is
exclusive, one in twenty needs both GPUs, the rest claim the default 1 GiB. Printed: CPU microseconds per
test for the whole run (collection handling, scheduling, completions), the median of ``--rounds``, and, for
comparison, the same tests with no GPUs (the ``--dist load``-like path of ``--dist gpu``).

    python benchmarks/dist_claims.py [--tests 10000] [--workers 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [REPO, os.path.join(REPO, "tests")]

from _xdist_standin import Worker, scheduler, start  # noqa: E402

from pytest_gpuenv.dist.scheduler import NodeRoutes  # noqa: E402
from pytest_gpuenv.marks.claims import Claim  # noqa: E402

GiB = 1 << 30


def one_run(n_tests: int, n_workers: int, gpus: bool, seed: int) -> float:
    """CPU seconds of one simulated run."""
    rng = random.Random(seed)
    tests = [f"t.py::test_{i}" for i in range(n_tests)]
    claims = {}
    for i in range(n_tests):
        r = rng.random()
        if r < 0.02:
            claims[i] = Claim(1, GiB, exclusive=True)
        elif r < 0.07:
            claims[i] = Claim(2, 10 * GiB, declared=True)
        elif r < 0.4:
            claims[i] = Claim(1, 30 * GiB, declared=True)
    facts = [{"id": f"GPU-{g}", "name": "GPU", "total": 80 * GiB, "others": 0} for g in range(2)]
    routes = {f"gw{w}": NodeRoutes("host", {}, {}, (facts[w % 2:] + facts[:w % 2]) if gpus else [], claims,
                                   Claim(1, GiB)) for w in range(n_workers)}
    t0 = time.process_time()
    sched = scheduler([f"{n_workers}*popen"], lambda node: routes[node.gateway.id])
    nodes = [Worker(f"gw{w}") for w in range(n_workers)]
    start(sched, nodes, tests)
    done = 0
    while done < n_tests:
        busy = [n for n in nodes if n.running() is not None]
        assert busy, "stalled"
        n = busy[rng.randrange(len(busy))]
        index = n.queue.pop(0)
        sched.mark_test_complete(n, index)
        done += 1
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for label, gpus in (("by claims (2 GPUs)", True), ("no GPUs (chunks)", False)):
        times = [one_run(args.tests, args.workers, gpus, seed) for seed in range(args.rounds)]
        per = statistics.median(times) / args.tests * 1e6
        print(f"{label:20s} {args.tests} tests, {args.workers} workers: {statistics.median(times):.2f} s CPU, "
              f"{per:.1f} us per test (median of {args.rounds})")


if __name__ == "__main__":
    main()
