"""``gpuenv perf compare BASE.json NEW.json``: two ``--gpuenv-json`` reports side by side.

One row per measured test (``nodeid`` and measurement name; the entry with the most samples, i.e. an
assertion's last attempt): both medians with their intervals, the change NEW/BASE - 1 with a
conservative interval [new low / base high, new high / base low] - 1 (as ``assert_no_regression``
decides), and a verdict at the threshold t: ``slower`` when the whole interval is above +t,
``faster`` when it is below -t, ``same`` when it lies within ±t, else ``unclear``; ``inconclusive``
when either measurement says why it cannot give a verdict (its ``problems``: the callable enqueued
nothing, clocks dropped, another process used the GPU), with the reason below the table: such a change
is not the kernel's. Tests found in one file only are listed as such. Exit status: 0, or 1 with
``--fail-on-regression T`` when a test is ``slower`` by more than T; 2 for a usage error or a file that
is not a report (not a regular file of at most 128 MiB, not JSON, or a timed entry whose interval is not
positive, finite seconds with low <= high): one line naming the file and the field, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from pytest_gpuenv.base.model import safe_repr
from pytest_gpuenv.perf._baseline import positive_seconds, read_json
from pytest_gpuenv.perf._entries import PerfEntry
from pytest_gpuenv.perf._units import format_time, format_time_interval, parse_fraction, printable

SLOWER, FASTER, SAME, UNCLEAR, INCONCLUSIVE = "slower", "faster", "same", "unclear", "inconclusive"


class CompareError(Exception):
    """A file that cannot be compared; the message names it and says why."""


@dataclass
class Row:
    test: str
    base: Optional[PerfEntry]
    new: Optional[PerfEntry]
    change: Optional[float] = None
    change_lo: Optional[float] = None
    change_hi: Optional[float] = None
    verdict: str = "-"


def load(path: str) -> dict[str, PerfEntry]:
    """The timed entries of a ``--gpuenv-json`` report (or a bare list of its measurements), one per
    test: the one with the most samples. Raises ``CompareError`` naming the file and the problem: a file
    that is not a regular one of at most ``MAX_JSON`` bytes, or a timed entry whose interval cannot be
    divided by (not positive, not finite, or inverted)."""
    try:
        data = read_json(path)
    except FileNotFoundError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise CompareError(str(exc)) from None
    entries = data.get("measurements") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise CompareError(f'{path}: not a --gpuenv-json report (no "measurements" list)')
    out: dict[str, PerfEntry] = {}
    for i, entry in enumerate(entries):
        try:
            r = PerfEntry.from_dict(entry)
        except ValueError as exc:
            raise CompareError(f"{path}: measurement {i}: {exc}") from None
        if r.median_s is None or r.ci_low_s is None or r.ci_high_s is None:
            continue
        key = f"{r.nodeid}::{r.name}" if r.nodeid else r.name
        _check_interval(f"{path}: measurement {i} ({safe_repr(key, 80)})", r.median_s, r.ci_low_s, r.ci_high_s)
        if key not in out or r.n >= out[key].n:
            out[key] = r
    return out


def _check_interval(where: str, median: float, lo: float, hi: float) -> None:
    for name, v in (("median_s", median), ("ci_low_s", lo), ("ci_high_s", hi)):
        if not positive_seconds(v):
            raise CompareError(f"{where}: {name} is {safe_repr(v)}, expected a positive, finite number of seconds")
    if lo > hi:
        raise CompareError(f"{where}: ci_low_s {lo!r} is above ci_high_s {hi!r}")


def compare(base: dict[str, PerfEntry], new: dict[str, PerfEntry], threshold: float) -> list[Row]:
    """Rows in BASE's order, then the tests only NEW has."""
    rows = []
    for key in list(base) + [k for k in new if k not in base]:
        b, n = base.get(key), new.get(key)
        row = Row(key, b, n)
        if b is not None and n is not None:
            assert b.median_s and b.ci_low_s and b.ci_high_s and n.median_s and n.ci_low_s and n.ci_high_s
            row.change = n.median_s / b.median_s - 1
            row.change_lo = n.ci_low_s / b.ci_high_s - 1
            row.change_hi = n.ci_high_s / b.ci_low_s - 1
            row.verdict = INCONCLUSIVE if (b.problems or n.problems) else verdict(row.change_lo, row.change_hi, threshold)
        else:
            row.verdict = "only in base" if n is None else "only in new"
        rows.append(row)
    return rows


def verdict(lo: float, hi: float, threshold: float) -> str:
    if lo > threshold:
        return SLOWER
    if hi < -threshold:
        return FASTER
    if lo >= -threshold and hi <= threshold:
        return SAME
    return UNCLEAR


def _time(r: Optional[PerfEntry]) -> list[str]:
    if r is None or r.median_s is None:
        return ["-", "-"]
    return [format_time(r.median_s), format_time_interval(r.ci_low_s, r.ci_high_s, like=r.median_s)]


def table(rows: Sequence[Row], threshold: float) -> list[str]:
    from tabulate import tabulate

    body = []
    for row in rows:
        change = "-"
        if row.change is not None:
            change = f"{row.change:+.1%} [{row.change_lo:+.1%}, {row.change_hi:+.1%}]"
        rec = row.new or row.base
        body.append([row.test, f"{rec.device} [{rec.timer}]" if rec else "-", *_time(row.base), *_time(row.new),
                     change, row.verdict])
    headers = ["test", "device [timer]", "base median", "interval", "new median", "interval", "change",
               f"verdict (±{threshold:.0%})"]
    lines = tabulate(body, headers=headers, tablefmt="simple").splitlines()
    for row in rows:
        if row.base and row.new and (row.base.device_key, row.base.timer) != (row.new.device_key, row.new.timer):
            lines.append(f"  {row.test}: measured on {row.base.device_key} [{row.base.timer}] and "
                         f"{row.new.device_key} [{row.new.timer}]: not the same device or timer")
        if row.verdict == INCONCLUSIVE and row.base and row.new:  # both present: ``compare`` set it
            which, r = ("base", row.base) if row.base.problems else ("new", row.new)
            lines.append(f"  {row.test}: inconclusive in {which}: {r.problems[0]}")
    return [printable(line) for line in lines]  # (the files' text: no control character reaches the terminal)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuenv perf", description="compare the measurements of two --gpuenv-json reports")
    sub = p.add_subparsers(dest="action", metavar="{compare}")
    c = sub.add_parser("compare", help="a table per test: both medians, the change with its interval, a verdict")
    c.add_argument("base", metavar="BASE.json")
    c.add_argument("new", metavar="NEW.json")
    c.add_argument("--threshold", default="5%", metavar="T",
                   help="a change within ±T is 'same', beyond it 'slower'/'faster' (default 5%%); T is a "
                        "percentage (5%%) or a fraction below 1 (0.05)")
    c.add_argument("--fail-on-regression", default=None, metavar="T",
                   help="exit 1 when a test is slower by more than T (5%% or 0.05; also the verdicts' threshold)")
    return p


def _fraction(text: str, what: str) -> float:
    """``"5%"``, or a fraction below 1 (``"0.05"``), from the command line. A bare number of 1 or more is
    refused: ``5`` could mean 5 % or 500 %."""
    try:
        value = float(text)
    except ValueError:
        return parse_fraction(text, what)
    if value >= 1:
        raise ValueError(f"{what} {text}: a bare number is a fraction and must be below 1; write {text}% for "
                         f"{text} percent, or {value * 100:g}% for {value:g} times the base")
    return parse_fraction(value, what)


def perf_command(argv: Sequence[str], out: Any = None) -> int:
    """``gpuenv perf ...``; returns the exit status."""
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(list(argv))
    if args.action is None:
        parser.print_help()
        return 2
    try:
        fail = None if args.fail_on_regression is None else _fraction(args.fail_on_regression, "--fail-on-regression")
        threshold = fail if fail is not None else _fraction(args.threshold, "--threshold")
        rows = compare(load(args.base), load(args.new), threshold)
    except (CompareError, ValueError) as exc:
        print(f"gpuenv perf compare: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print("gpuenv perf compare: no timed measurements in either file", file=out)
        return 0
    for line in table(rows, threshold):
        print(line, file=out)
    slower = [r.test for r in rows if r.verdict == SLOWER]
    if fail is not None and slower:
        print(f"{len(slower)} regression(s) beyond +{fail:.0%}: {', '.join(slower)}", file=out)
        return 1
    return 0
