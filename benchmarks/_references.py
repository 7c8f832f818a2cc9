"""Reference kernel durations for benchmarks/timer_quality.py, each in its own process: ncu's
gpu__time_duration.sum, and the kernel durations torch.profiler records (CUPTI through Kineto; a
process of its own because CUPTI has one activity client per process).

Both run the same target: per size, 5 (ncu) or 30 (profiler) launches of torch.add, each after
gpu_bench's own flush and settle (``TorchBackend.flush_fn``: on NVIDIA one kernel reading 1.25x the L2,
then a memory fence), as gpu_bench's cold mode does.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = ("reduce", "fill", "sleep", "spin", "distribution")


def _is_add(name: str) -> bool:
    low = name.lower()
    return "add" in low and not any(x in low for x in SKIP)


TARGET = r'''
import sys, torch
sys.path.insert(0, {repo!r})
sizes = [int(s) for s in sys.argv[1].split(",") if s]
flush_mode = sys.argv[2]
vec = sys.argv[3] == "1"
dev = torch.device("cuda")
from pytest_gpuenv.perf._torch import TorchBackend
flush = TorchBackend(flush=flush_mode).flush_fn(2e-6)  # gpu_bench's own flush and settle, default stream
def run(fn):
    for _ in range(5):
        flush()
        fn()
    torch.cuda.synchronize()
for n in sizes:
    a = torch.ones(n, device=dev); b = torch.ones(n, device=dev); c = torch.empty(n, device=dev)
    run(lambda: torch.add(a, b, out=c))
if vec:
    from pytest_gpuenv.rtc import compile_kernel
    k = compile_kernel("vector_add.hip", "vector_add", kernel_dirs=[{kdir!r}])
    n = sizes[-1]
    a = torch.ones(n, device=dev); b = torch.ones(n, device=dev); c = torch.empty(n, device=dev)
    run(lambda: k(((n + 255) // 256,), (256,), c, a, b, n))
'''


def ncu_times(sizes: list[int], flush_mode: str, cache_control: str, vec: bool, outdir: str) -> dict:
    """Median gpu__time_duration.sum (us) of the 5 launches per size, by ncu."""
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)
    if ncu is None:
        return {"error": "ncu not found"}
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(TARGET.format(repo=REPO, kdir=os.path.join(REPO, "kernels")))
        target = f.name
    cmd = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--metrics", "gpu__time_duration.sum",
           "--print-kernel-base", "demangled", "--print-units", "base", "--csv",
           sys.executable, target, ",".join(map(str, sizes)), flush_mode, "1" if vec else "0"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    wall = time.perf_counter() - t
    with open(os.path.join(outdir, f"ncu_{flush_mode}_{cache_control}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + "\n--- stderr\n" + p.stderr)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    vals = []
    for r in rows:
        name = r.get("Kernel Name", "")
        if r.get("Metric Name") != "gpu__time_duration.sum" or not _is_add(name):
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        vals.append((name, v * scale))
    out: dict = {"wall_s": wall, "rc": p.returncode}
    labels = [f"add {n}" for n in sizes] + (["vector_add"] if vec else [])
    for i, label in enumerate(labels):
        chunk = [v for _n, v in vals[5 * i: 5 * i + 5]]
        if chunk:
            out[label] = statistics.median(chunk)
    out["kernels"] = sorted({n[:80] for n, _v in vals})
    return out


PROFILE = r'''
import json, statistics, sys, torch
from torch.profiler import ProfilerActivity, profile
sizes = [int(s) for s in sys.argv[1].split(",")]
reps, out = int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])
from pytest_gpuenv.perf._torch import TorchBackend
flush = TorchBackend(flush="read").flush_fn(2e-6)  # gpu_bench's own flush and settle, default stream
dev = torch.device("cuda")
fns = []
for n in sizes:
    a = torch.ones(n, device=dev); b = torch.ones(n, device=dev); c = torch.empty(n, device=dev)
    fns.append(lambda a=a, b=b, c=c: torch.add(a, b, out=c))
for f in fns:
    f()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for f in fns:
        for _ in range(reps):
            flush()
            f()
        torch.cuda.synchronize()
prof.export_chrome_trace(out)
'''


def profiler_times(sizes: list[int], outdir: str, reps: int = 30) -> dict:
    """Median duration (us) of the add kernels torch.profiler recorded, per size, and all of them."""
    trace = os.path.join(outdir, "profiler_trace.json")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROFILE)
        target = f.name
    t = time.perf_counter()
    p = subprocess.run([sys.executable, target, ",".join(map(str, sizes)), str(reps), trace, REPO],
                       capture_output=True, text=True, timeout=240)
    out: dict = {"wall_s": time.perf_counter() - t, "rc": p.returncode}
    if p.returncode != 0 or not os.path.exists(trace):
        out["error"] = p.stderr[-2000:]
        return out
    with open(trace) as f:
        events = json.load(f).get("traceEvents", [])
    durs = [float(e["dur"]) for e in sorted((e for e in events if e.get("cat") == "kernel" and _is_add(e.get("name", ""))),
                                            key=lambda e: float(e.get("ts", 0)))]
    for i, n in enumerate(sizes):
        chunk = durs[reps * i: reps * (i + 1)]
        if chunk:
            out[f"add {n}"] = statistics.median(chunk)
            out[f"add {n} all"] = chunk
    os.remove(trace)
    return out
