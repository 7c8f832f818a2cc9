"""The terminal summary table of performance records (pure: records in, lines out)."""

from __future__ import annotations

from typing import Any

from pytest_gpuenv.perf._units import format_rate, format_time, format_time_interval

HEADERS = ["test", "device", "median", "interval", "n", "budget", "verdict"]


def _value(r: dict[str, Any]) -> tuple[str, str]:
    unit = r.get("unit", "s")
    v, lo, hi = r.get("value", r.get("median_s")), r.get("ci_low", r.get("ci_low_s")), r.get("ci_high", r.get("ci_high_s"))
    if v is None:
        return "-", "-"
    if unit == "x":
        return f"{v:.3f}x", f"[{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "-"
    if unit == "B/s":
        iv = f"[{format_rate(lo, 'B/s')}, {format_rate(hi, 'B/s')}]" if lo is not None and hi is not None else "-"
        return format_rate(v, "B/s"), iv
    return format_time(v), format_time_interval(lo, hi, like=v)


def _test(r: dict[str, Any]) -> str:
    nodeid = str(r.get("nodeid") or "")
    short = nodeid.rsplit("::", 1)[-1] if nodeid else ""
    name = str(r.get("name") or "")
    if not short:
        return name
    return short if name in ("", short) else f"{short}: {name}"


def summary_lines(records: list[dict[str, Any]]) -> list[str]:
    """One table row per assertion (and per measurement nothing asserted on): test, device, median,
    interval, n, budget, verdict."""
    from tabulate import tabulate

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(r.get(k) for k in ("nodeid", "name", "unit", "value", "median_s", "ci_low_s", "ci_high_s", "n"))

    # a measurement that an assertion row repeats (same numbers, with its budget and verdict) is shown once
    judged = {key(r) for r in records if r.get("verdict")}
    rows = []
    for r in records:
        if not r.get("verdict") and r.get("kind") != "regression" and key(r) in judged:
            continue
        value, interval = _value(r)
        verdict = r.get("verdict") or ("recorded" if r.get("kind") == "regression" else "-")
        mode = r.get("mode")
        n = r.get("n")
        rows.append([
            _test(r), r.get("device") or "-", value, interval,
            f"{n}{' hot' if mode == 'hot' else ''}" if n is not None else "-", r.get("budget") or "-", verdict,
        ])
    if not rows:
        return []
    lines = tabulate(rows, headers=HEADERS, tablefmt="simple").splitlines()
    problems = [(r, p) for r in records if r.get("verdict") == "INCONCLUSIVE" for p in (r.get("problems") or [])]
    for r, p in problems:
        lines.append(f"  {_test(r)}: {p}")
    return lines
