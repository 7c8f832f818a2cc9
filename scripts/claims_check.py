"""``--dist gpu`` by memory claims on a real NVIDIA GPU: a generated suite of tests that allocate what they claim.

    python3 scripts/claims_check.py [--workers 8] [--hold 3]

On GPU 0 (``CUDA_VISIBLE_DEVICES=0``, PCI order, so NVML and CUDA name the same GPU), sized from its memory so it
holds on any model: 12 tests claim and allocate ``0.375 x`` the GPU's memory each (30 GiB on an 80 GiB GPU: two
fit at once, three do not), six small tests take the default claim and allocate 256 MiB, one exclusive test
allocates 1 GiB, and one test claims 1 GiB but allocates 3 GiB (it must be reported). The suite runs three times:
``-n 1``; ``-n WORKERS --dist gpu``; ``-n WORKERS --dist load`` (xdist's own: eight big tests at once, which
runs out of memory). A process beside each run samples the GPU's used memory through NVML every 20 ms.

Printed per run: wall time, passed/failed, out-of-memory failures, NVML's peak of used memory against the GPU's
total, and for ``--dist gpu`` whether anything ran beside the exclusive test and the over-use warning.
Exit status 1 when ``--dist gpu`` ran out of memory, overlapped the exclusive test, missed the over-use, or
went above the GPU's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1 << 30

SUITE = """
import json, os, pathlib, time
import pytest
import torch
from pytest_gpuenv import exclusive_gpu, requires_memory

HOLD = {hold}


def _hold(request, nbytes, seconds=HOLD):
    start = time.time()
    x = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    x.fill_(1.0)  # touch every page: the memory is the test's for real
    torch.cuda.synchronize()
    time.sleep(seconds)
    del x
    torch.cuda.empty_cache()
    rec = {{"start": start, "end": time.time(), "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}}
    pathlib.Path(os.environ["REC_DIR"], request.node.name).write_text(json.dumps(rec))


@requires_memory({big})
@pytest.mark.parametrize("i", range(12))
def test_big(i, request):
    _hold(request, {big} - (512 << 20))


@pytest.mark.parametrize("i", range(6))
def test_small(i, request):
    _hold(request, 256 << 20, 1.0)


@exclusive_gpu
def test_exclusive(request):
    _hold(request, 1 << 30, 2.0)


@requires_memory("1GiB")
def test_over_uses(request):
    _hold(request, 3 << 30, 1.0)
"""

SAMPLER = """
import json, sys, time
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
peak, stop = 0, sys.argv[1]
import os
while not os.path.exists(stop):
    peak = max(peak, pynvml.nvmlDeviceGetMemoryInfo(h).used)
    time.sleep(0.02)
print(json.dumps({"peak_used": peak}))
"""


def gpu_total() -> int:
    import pynvml

    pynvml.nvmlInit()
    total = int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
    pynvml.nvmlShutdown()
    return total


def run(directory: str, label: str, args: list[str]) -> dict:
    rec = os.path.join(directory, "rec-" + label.split()[0].replace("-", ""))
    os.makedirs(rec, exist_ok=True)
    stop = os.path.join(directory, "stop-" + str(time.time()))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "REC_DIR": rec,
           "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    sampler = subprocess.Popen([sys.executable, "-c", SAMPLER, stop], stdout=subprocess.PIPE, text=True, env=env)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEw",
                           "-o", "console_output_style=classic", *args, "test_claims_gpu.py"],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=400)
    wall = time.perf_counter() - t0
    open(stop, "w").close()
    peak = json.loads(sampler.communicate(timeout=30)[0] or "{}").get("peak_used", 0)
    out = proc.stdout + proc.stderr
    with open(os.path.join(directory, label.split()[0].replace("-", "") + ".log"), "w") as f:
        f.write(out)
    tail = re.findall(r"=+ (.*(?:passed|failed|error).*) in [\d.]+s", out)
    records = {name: json.loads(pathlib.Path(rec, name).read_text()) for name in os.listdir(rec)}
    return {"label": label, "wall": wall, "peak": peak, "summary": tail[-1] if tail else out[-300:],
            "oom": len(re.findall(r"^FAILED .*(?:OutOfMemoryError|out of memory)", out, re.M | re.I)),
            "failed": len(re.findall(r"^FAILED ", out, re.M)), "records": records, "out": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--hold", type=float, default=3.0)
    args = ap.parse_args()
    total = gpu_total()
    big = int(total * 0.375) // (1 << 20) << 20
    print(f"GPU 0: {total / GiB:.1f} GiB; big tests claim {big / GiB:.1f} GiB each (two fit at once, three do not)")
    directory = tempfile.mkdtemp(prefix="gpuenv-claims-")
    with open(os.path.join(directory, "test_claims_gpu.py"), "w") as f:
        f.write(SUITE.format(big=big, hold=args.hold))
    runs = [run(directory, "-n 1", ["-n", "1"]),
            run(directory, f"-n {args.workers} --dist gpu", ["-n", str(args.workers), "--dist", "gpu"]),
            run(directory, f"-n {args.workers} --dist load", ["-n", str(args.workers), "--dist", "load"])]
    print(f"{'run':24s} {'wall s':>7s} {'peak used GiB':>14s} {'OOM':>4s}  outcome")
    for r in runs:
        print(f"{r['label']:24s} {r['wall']:7.1f} {r['peak'] / GiB:8.1f} of {total / GiB:.0f} {r['oom']:4d}  {r['summary']}")
    gpu = runs[1]
    recs = gpu["records"]
    excl = recs.get("test_exclusive")
    beside = [n for n, r in recs.items() if excl and n != "test_exclusive"
              and r["start"] < excl["end"] and excl["start"] < r["end"]]
    over = "test_over_uses used" in gpu["out"] and "but claimed 1.0 GiB" in gpu["out"]
    most = max((sum(1 for o in recs.values() if o["start"] <= r["start"] < o["end"]) for n, r in recs.items()
                if n.startswith("test_big")), default=0)
    claims = [ln for ln in gpu["out"].splitlines() if "peak claimed" in ln]
    print("--dist gpu: tests beside the exclusive one:", beside or "none")
    print("--dist gpu: over-use reported:", over)
    print("--dist gpu: most tests running when a big test started:", most)
    print("--dist gpu summary:", *claims, sep="\n  ")
    ok = gpu["oom"] == 0 and gpu["failed"] == 0 and not beside and over and gpu["peak"] <= total
    print("claims check", "OK" if ok else "FAILED", f"(logs in {directory})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
