"""Collection overhead of pytest-gpuenv and the cost of one detection.

Generates a suite of 2,000 tests (a quarter with gpuenv markers), then times
``pytest --collect-only -q`` with the plugin and without it (``-p no:gpuenv``), interleaved, and
prints the median of the per-pair ratios. Then times ``detect()`` in-process and checks that loading
the plugin and detecting imported no torch. Goals (2-core CI machine): ratio <= 1.05, detection
<= 10 ms, no torch import.

    python benchmarks/overhead.py [--tests 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

MARKS = [
    "@pytest.mark.requires_gpu",
    "@pytest.mark.requires_cuda",
    "@pytest.mark.requires_rocm",
    '@pytest.mark.requires_memory("16GiB")',
    '@pytest.mark.requires_arch("gfx94*", "sm_80+")',
    "@pytest.mark.requires_devices(2)",
    '@pytest.mark.skip_on("wsl")',
]


def make_suite(path: str, n_tests: int, per_file: int = 50) -> None:
    for f in range(n_tests // per_file):
        lines = ["import pytest", ""]
        for t in range(per_file):
            i = f * per_file + t
            if i % 4 == 0:
                lines.append(MARKS[i % len(MARKS)])
            lines.append(f"def test_{i}():\n    assert True\n")
        with open(os.path.join(path, f"test_gen_{f:03d}.py"), "w") as fh:
            fh.write("\n".join(lines))
    with open(os.path.join(path, "pytest.ini"), "w") as fh:
        fh.write("[pytest]\n")


def collect_time(path: str, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"collection failed ({' '.join(extra)}):\n{r.stdout.decode()[-2000:]}")
    return dt


DETECT_SNIPPET = r"""
import sys, time, statistics, json
import pytest_gpuenv.plugin
from pytest_gpuenv.detect import detect
t = []
for _ in range(50):
    t0 = time.perf_counter(); env = detect(probe="never"); t.append(time.perf_counter() - t0)
t0 = time.perf_counter(); env2 = detect(); first_auto = time.perf_counter() - t0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "hip", "cuda", "cupy", "triton", "numpy"})
print(json.dumps({"median_s": statistics.median(t), "min_s": min(t), "auto_s": first_auto,
                  "backend": env2.backend, "devices": len(env2.devices), "heavy": heavy}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        make_suite(d, args.tests)
        collect_time(d, [])  # warm the file cache and bytecode
        collect_time(d, ["-p", "no:gpuenv"])
        with_, without, ratios = [], [], []
        for _ in range(args.rounds):
            a = collect_time(d, ["-p", "no:gpuenv"])
            b = collect_time(d, [])
            without.append(a)
            with_.append(b)
            ratios.append(b / a)
    import json

    out = subprocess.run([sys.executable, "-c", DETECT_SNIPPET], stdout=subprocess.PIPE, timeout=120, check=True)
    det = json.loads(out.stdout.decode().strip().splitlines()[-1])
    print(f"suite: {args.tests} tests, {args.tests // 4} with gpuenv markers; {args.rounds} interleaved rounds")
    print(f"collect-only without plugin: median {statistics.median(without):.3f} s")
    print(f"collect-only with plugin:    median {statistics.median(with_):.3f} s")
    print(f"ratio with/without (median of pairs): {statistics.median(ratios):.3f}   (goal <= 1.05)")
    print(f"detect(probe='never'): median {det['median_s'] * 1e3:.2f} ms, min {det['min_s'] * 1e3:.2f} ms   (goal <= 10 ms)")
    print(f"detect() as the plugin runs it (probe=auto): {det['auto_s'] * 1e3:.2f} ms -> backend {det['backend']}, "
          f"{det['devices']} device(s)")
    print(f"heavy modules imported by plugin + detection: {det['heavy'] or 'none'}   (goal: none)")


if __name__ == "__main__":
    main()
