"""The terminal summary table of the performance entries (pure: ``PerfEntry`` objects in, lines out).

``PerfSession.summary_lines`` is how the plugin gets it.
"""

from __future__ import annotations

from typing import Any, Sequence

from pytest_gpuenv.perf._entries import PerfEntry
from pytest_gpuenv.perf._units import format_rate, format_time, format_time_interval

HEADERS = ["test", "device", "median", "interval", "n", "budget", "verdict"]


def _value(r: PerfEntry) -> tuple[str, str]:
    v, lo, hi = r.value, r.ci_low, r.ci_high
    if v is None:
        return "-", "-"
    if r.unit == "x":
        return f"{v:.3f}x", f"[{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "-"
    if r.unit == "B/s":
        iv = f"[{format_rate(lo, 'B/s')}, {format_rate(hi, 'B/s')}]" if lo is not None and hi is not None else "-"
        return format_rate(v, "B/s"), iv
    return format_time(v), format_time_interval(lo, hi, like=v)


def _test(r: PerfEntry) -> str:
    short = r.nodeid.rsplit("::", 1)[-1] if r.nodeid else ""
    if not short:
        return r.name
    return short if r.name in ("", short) else f"{short}: {r.name}"


def _timer(r: PerfEntry) -> str:
    """"cupti" (kernel durations from CUPTI's activity records) or "<backend> events" (an event pair)."""
    if not r.timer:
        return "-"
    return r.timer if r.timer == "cupti" else f"{r.timer} events"


def _interval(unit: str, v: float, lo: float, hi: float) -> str:
    if unit == "x":
        return f"{v:.3f}x [{lo:.3f}, {hi:.3f}]"
    return f"{format_time(v)} {format_time_interval(lo, hi, like=v)}"


def _attempts(r: PerfEntry) -> str:
    """Both attempts of a re-measured INCONCLUSIVE verdict, on one line."""
    parts = []
    for a in r.attempts or []:
        why = f" ({a['stop_reason']})" if a.get("verdict") == "INCONCLUSIVE" and a.get("stop_reason") else ""
        parts.append(f"attempt {a['attempt']}: {_interval(a['unit'], a['value'], a['ci_low'], a['ci_high'])} "
                     f"n={a['n']} {a['verdict']}{why}")
    return "; ".join(parts)


def notes(entries: Sequence[PerfEntry]) -> list[str]:
    """Lines under the table: re-measured verdicts, operations and gaps a profiler timer saw, and why
    an event timer measured (once per reason), which clock/throttle/process guards were off (once per device)."""
    out: list[str] = []
    for r in entries:
        if r.attempts:
            out.append(f"  {_test(r)}: re-measured: {_attempts(r)}")
        if r.ops_per_call is not None and r.ops_per_call > 1 and r.verdict:
            gap = format_time(r.gap_s) if r.gap_s is not None else "-"
            out.append(f"  {_test(r)}: cupti summed {r.ops_per_call:g} operations per call; gaps between them {gap}")
    seen = []
    for r in entries:
        if r.timer_note and (r.timer, r.timer_note) not in seen:
            seen.append((r.timer, r.timer_note))
    out.extend(f"  timer {_timer_name}: {note}" for _timer_name, note in
               ((_timer(PerfEntry(timer=t)), n) for t, n in seen))
    guards = list(dict.fromkeys((r.device or "-", r.monitor_note) for r in entries if r.monitor_note))
    out.extend(f"  guards off on {device}: {note}" for device, note in guards)
    return out


def _key(r: PerfEntry) -> tuple[Any, ...]:
    return (r.nodeid, r.name, r.unit, r.value, r.median_s, r.ci_low_s, r.ci_high_s, r.n)


def summary_lines(entries: Sequence[PerfEntry]) -> list[str]:
    """One table row per assertion (and per measurement nothing asserted on): test, device [timer], host
    (when several hosts measured), median, interval, n, budget, verdict; then the problems of each
    INCONCLUSIVE row and ``notes``."""
    from tabulate import tabulate

    # a measurement that an assertion row repeats (same numbers, with its budget and verdict) is shown once
    judged = {_key(r) for r in entries if r.verdict}
    several = len({r.host for r in entries}) > 1  # a run over several hosts: a column says which measured it
    rows = []
    for r in entries:
        if not r.verdict and r.kind != "regression" and _key(r) in judged:
            continue
        value, interval = _value(r)
        verdict = r.verdict or ("recorded" if r.kind == "regression" else "-")
        rows.append([
            _test(r), f"{r.device or '-'} [{_timer(r)}]", *([r.host or "-"] if several else []), value, interval,
            f"{r.n}{' hot' if r.mode == 'hot' else ''}", r.budget or "-", verdict,
        ])
    if not rows:
        return []
    headers = HEADERS[:2] + ["host"] + HEADERS[2:] if several else HEADERS
    lines: list[str] = tabulate(rows, headers=headers, tablefmt="simple").splitlines()
    for r in entries:
        if r.verdict == "INCONCLUSIVE":
            lines.extend(f"  {_test(r)}: {p}" for p in r.problems)
    return lines + notes(entries)
