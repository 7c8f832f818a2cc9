"""The terminal summary table of performance records (pure: ``PerfRecord`` objects in, lines out).

``PerfSession.summary_lines`` is how the plugin gets it.
"""

from __future__ import annotations

from typing import Any, Sequence

from pytest_gpuenv.perf._records import PerfRecord
from pytest_gpuenv.perf._units import format_rate, format_time, format_time_interval

HEADERS = ["test", "device", "median", "interval", "n", "budget", "verdict"]


def _value(r: PerfRecord) -> tuple[str, str]:
    v, lo, hi = r.value, r.ci_low, r.ci_high
    if v is None:
        return "-", "-"
    if r.unit == "x":
        return f"{v:.3f}x", f"[{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "-"
    if r.unit == "B/s":
        iv = f"[{format_rate(lo, 'B/s')}, {format_rate(hi, 'B/s')}]" if lo is not None and hi is not None else "-"
        return format_rate(v, "B/s"), iv
    return format_time(v), format_time_interval(lo, hi, like=v)


def _test(r: PerfRecord) -> str:
    short = r.nodeid.rsplit("::", 1)[-1] if r.nodeid else ""
    if not short:
        return r.name
    return short if r.name in ("", short) else f"{short}: {r.name}"


def _key(r: PerfRecord) -> tuple[Any, ...]:
    return (r.nodeid, r.name, r.unit, r.value, r.median_s, r.ci_low_s, r.ci_high_s, r.n)


def summary_lines(records: Sequence[PerfRecord]) -> list[str]:
    """One table row per assertion (and per measurement nothing asserted on): test, device, median,
    interval, n, budget, verdict; then the problems of each INCONCLUSIVE row."""
    from tabulate import tabulate

    # a measurement that an assertion row repeats (same numbers, with its budget and verdict) is shown once
    judged = {_key(r) for r in records if r.verdict}
    rows = []
    for r in records:
        if not r.verdict and r.kind != "regression" and _key(r) in judged:
            continue
        value, interval = _value(r)
        verdict = r.verdict or ("recorded" if r.kind == "regression" else "-")
        rows.append([
            _test(r), r.device or "-", value, interval, f"{r.n}{' hot' if r.mode == 'hot' else ''}",
            r.budget or "-", verdict,
        ])
    if not rows:
        return []
    lines = tabulate(rows, headers=HEADERS, tablefmt="simple").splitlines()
    for r in records:
        if r.verdict == "INCONCLUSIVE":
            lines.extend(f"  {_test(r)}: {p}" for p in r.problems)
    return lines
