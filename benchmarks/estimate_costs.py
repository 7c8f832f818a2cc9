"""Where the wall time of one gpu_bench estimate goes, for the CUPTI timer in cold mode (issue 13's 0.03 s
per estimate at 4,096 elements).

Run on a GPU machine with torch and cupti-python:

    python3 benchmarks/estimate_costs.py [--elements 4096] [--estimates 20]

Prints, for torch.add (float32) at --elements:
- the wall time, sample count and batches of --estimates estimates, and the milliseconds per estimate
  spent in each step of the sampler and the backend (steps nest: ``_batch`` holds ``enqueue`` and
  ``collect``, ``collect`` holds the sync and the drain);
- the host's cost of each call of one cold sample (flush and settle, the callable, external id push and pop)
  with the device busy, and the drain's cost per sample;
- the device's time per sample, read from CUPTI's records of 200 samples queued behind a delay (so the
  device never waits for the host): flush, delay (where no fence settles the flush) and callable durations
  and the gaps between them.

A sample costs the larger of the host's enqueue and the device's time, plus the drain and the statistics,
which the host does while the device idles.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def log(*a: object) -> None:
    print(*a, flush=True)


class Phases:
    """Seconds and calls per wrapped method, summed over the estimates."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, owner: Any, name: str, key: str) -> None:
        orig = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - t
                self.calls[key] = self.calls.get(key, 0) + 1

        setattr(owner, name, timed)


def host_us(backend: Any, f: Callable[[], Any], n: int = 300) -> tuple[float, float]:
    """(host us per call of f with the device busy behind a 20 ms delay, drain us per call afterwards)."""
    ev, act = backend.events, backend.act
    ev.sync()
    act.drain()
    ev.delay(20e-3)
    t = time.perf_counter()
    for _ in range(n):
        f()
    host = (time.perf_counter() - t) / n
    ev.sync()
    t = time.perf_counter()
    act.drain()
    return host * 1e6, (time.perf_counter() - t) / n * 1e6


def device_timeline(backend: Any, fn: Callable[[], Any], n: int = 200) -> dict[str, float]:
    """Median durations and gaps (us) of the flush, delay (if any) and callable kernels of n cold samples queued
    behind a delay, and the device's time per sample."""
    ev, act = backend.events, backend.act
    ev.sync()
    act.drain()
    ev.delay(30e-3)
    ids, _take = backend.enqueue([fn], [0] * n, flush=True, delay_s=2e-6, head_delay_s=0.0, repeat=1)
    ev.sync()
    ops, _ext = act.drain()
    # per sample of a one-kernel callable: the flush, a delay where no fence settles the flush, the callable
    names = ("flush", "callable") if (len(ops) - 1) // n == 2 else ("flush", "delay", "callable")
    k = len(names)
    ops = sorted(ops, key=lambda o: o[1])[-k * n:]
    durs: dict[str, list[int]] = {x: [] for x in names}
    gaps: dict[str, list[int]] = {x: [] for x in names}
    for i, (_corr, start, end) in enumerate(ops):
        durs[names[i % k]].append(end - start)
        if i + 1 < len(ops):
            gaps[names[i % k]].append(ops[i + 1][1] - end)
    out = {"per sample": (ops[-1][2] - ops[0][1]) / n / 1e3}
    for x in names:
        out[x] = statistics.median(durs[x]) / 1e3
        out[f"gap after {x}"] = statistics.median(gaps[x]) / 1e3
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=4096)
    ap.add_argument("--estimates", type=int, default=20)
    args = ap.parse_args()
    import torch
    from tabulate import tabulate
    from timer_quality import make_bench

    from pytest_gpuenv.perf import _cupti, _engine

    if not torch.cuda.is_available():
        log("no CUDA device: nothing to measure")
        return 0
    warnings.simplefilter("ignore")
    x, y = (torch.randn(args.elements, device="cuda") for _ in range(2))

    def fn() -> Any:
        return torch.add(x, y)

    bench = make_bench()
    m = bench(fn, name="add")
    b = m.sampler.backend
    if not isinstance(b, _cupti.CuptiBackend):
        log(f"the CUPTI timer is not measuring here: {m.sampler.timer_note}")
        return 0
    log(f"torch.add at {args.elements:,} elements, CUPTI timer ({b.cupti_records}), flush {b.info.flush_bytes >> 20} MiB "
        f"({getattr(b.events, 'flush_note', None) or 'the gpuenv_read kernel'})")

    ph = Phases()
    for name in ("_start", "_warmup", "_batch", "precise", "_check_foreign"):
        ph.wrap(_engine.Sampler, name, name)
    for name in ("prepare", "enqueue", "collect"):
        ph.wrap(_cupti.CuptiBackend, name, name)
    ph.wrap(type(b.events), "sync", "sync")
    ph.wrap(type(b.act), "drain", "drain")
    walls, ns, batches, warm = [], [], [], []
    for _ in range(args.estimates):
        t = time.perf_counter()
        m = bench(fn, name="add")
        walls.append(time.perf_counter() - t)
        ns.append(m.n)
        batches.append(m.sampler.batches)
        warm.append(len(m.sampler.warmup_medians))
    k = args.estimates
    log(f"\n{k} estimates: wall {statistics.median(walls) * 1e3:.2f} ms (median), n {statistics.median(ns)}, "
        f"batches {statistics.median(batches)}, warm-up batches {statistics.median(warm)}; "
        f"wall / n {statistics.median(w / n for w, n in zip(walls, ns)) * 1e6:.1f} us")
    rows = [[key, f"{ph.seconds[key] / k * 1e3:.3f}", f"{ph.calls[key] / k:.1f}"]
            for key in sorted(ph.seconds, key=lambda s: -ph.seconds[s])]
    log(tabulate(rows, headers=["step", "ms per estimate", "calls per estimate"]))

    ev, act = b.events, b.act

    def push_pop() -> None:
        act.push(7)
        act.pop()

    flush = ev.flush_fn(2e-6)  # as a batch makes it: once

    def sample() -> None:
        flush()
        act.push(7)
        fn()
        act.pop()

    calls = {"flush and settle": flush, "push + pop": push_pop, "callable": fn, "one cold sample": sample}
    rows = []
    for label, f in calls.items():
        h, d = host_us(b, f)
        rows.append([label, f"{h:.2f}", f"{d:.2f}"])
    log("\nhost, device busy:")
    log(tabulate(rows, headers=["call", "host us", "drain us per call"]))
    log("\ndevice, 200 samples queued behind a delay (us):")
    log(tabulate([[k2, f"{v:.3f}"] for k2, v in device_timeline(b, fn).items()], headers=["", "us"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
