"""What ``--dist gpu`` costs over ``--dist load``: 2,000 trivial tests on 4 popen workers.

The two runs alternate (load, gpu, load, gpu, ...) so that a loaded machine slows both alike; the figures
are medians. Two measures: the wall time of the run, and the CPU time of the controller process alone
(user + system, written by a small plugin at the end of the run), where the scheduler's work happens
(the workers' own routing check, one pass over their collection, is in the wall time). The goal: at most
5 % over ``--dist load``.

    python benchmarks/dist_gpu.py [--rounds 7] [--tests 2000] [--workers 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLUGIN = """
import os

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        t = os.times()
        with open(os.environ["BENCH_CPU_FILE"], "w") as f:
            f.write(str(t.user + t.system))
"""


def run(directory: str, dist: str, workers: int) -> tuple[float, float]:
    """(wall seconds, controller CPU seconds) of one run."""
    cpu_file = os.path.join(directory, f"cpu-{dist}.txt")
    env = {**os.environ, "BENCH_CPU_FILE": cpu_file, "PYTHONPATH": os.pathsep.join(
        [directory, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "bench_cpu", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "--dist", dist, "--tx", f"{workers}*popen", directory],
                          cwd=directory, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"--dist {dist} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    with open(cpu_file) as f:
        return wall, float(f.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "bench_cpu.py"), "w") as f:
            f.write(PLUGIN)
        with open(os.path.join(directory, "pytest.ini"), "w") as f:
            f.write("[pytest]\n")
        per_file = 100
        for n in range(0, args.tests, per_file):
            with open(os.path.join(directory, f"test_trivial_{n // per_file:03d}.py"), "w") as f:
                f.write("".join(f"def test_{i}():\n    pass\n\n\n" for i in range(min(per_file, args.tests - n))))
        results: dict[str, list[tuple[float, float]]] = {"load": [], "gpu": []}
        run(directory, "load", args.workers)  # warm the file cache and the bytecode
        for _ in range(args.rounds):
            for dist in ("load", "gpu"):
                results[dist].append(run(directory, dist, args.workers))
    wall = {d: statistics.median(w for w, _c in r) for d, r in results.items()}
    cpu = {d: statistics.median(c for _w, c in r) for d, r in results.items()}
    print(f"{args.tests} trivial tests, {args.workers} popen workers, {args.rounds} interleaved rounds (medians):")
    for d in ("load", "gpu"):
        print(f"  --dist {d:<4}  wall {wall[d]:6.2f} s   controller CPU {cpu[d]:6.2f} s")
    print(f"  --dist gpu over --dist load: wall {100 * (wall['gpu'] / wall['load'] - 1):+.1f} %, "
          f"controller CPU {100 * (cpu['gpu'] / cpu['load'] - 1):+.1f} % (goal: at most +5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
