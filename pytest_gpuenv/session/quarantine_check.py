"""``gpuenv quarantine check [FILE] --json-report REPORT...``: which quarantine entries can go.

The collected test ids and the outcomes come from ``--gpuenv-json`` reports of runs that used the quarantine
file (``session.quarantine``): each report gives, per entry, how many collected tests its globs name, and the
outcome of each quarantined test. A collection alone (``pytest --collect-only --gpuenv-json=ids.json``) is
enough to find stale entries; outcomes need runs, and a ``skip`` entry's tests run only under
``--gpuenv-quarantine-run``. An entry of FILE is found in a report by its ``tests`` list (its line may move).

- stale: its globs name no collected test in any report that had it (renamed or deleted tests);
- ready to lift: its tests ran (not skipped) and passed (or xpassed) every time, in every report;
- unseen: no report had it.

Exit status 1 when an entry is stale or ready to lift, 0 when none is, 2 for a bad file or report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional, Sequence

from pytest_gpuenv.base.model import safe_repr
from pytest_gpuenv.session.quarantine import Entry, parse

#: outcomes of a test that ran
RAN = ("passed", "xpassed", "failed", "xfailed", "error")
PASSED = ("passed", "xpassed")


class CheckError(Exception):
    """A file or report that cannot be read; the message says which and why."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuenv quarantine", description="quarantine lists (--gpuenv-quarantine)")
    sub = p.add_subparsers(dest="command", metavar="{check}")
    c = sub.add_parser("check", help="list entries that are stale or ready to lift, from --gpuenv-json reports")
    c.add_argument("file", nargs="?", metavar="FILE",
                   help="the quarantine file (default: the one the first report names)")
    c.add_argument("--json-report", nargs="+", required=True, metavar="REPORT",
                   help="--gpuenv-json reports of runs with the quarantine (a --collect-only run gives the ids)")
    c.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    return p


def _report(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckError(f"cannot read report {safe_repr(path, 200)}: {exc}") from None
    q = data.get("quarantine") if isinstance(data, dict) else None
    if not isinstance(q, dict):
        raise CheckError(f"report {safe_repr(path, 200)} has no 'quarantine' field (was it "
                         "written by a run with --gpuenv-quarantine or ini gpuenv_quarantine?)")
    return q


def verdict(e: Entry, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"where", "verdict", "why", "runs", "passed", "collected"}`` of an entry, from the reports' fields."""
    seen, collected, outcomes = 0, 0, []
    for q in reports:
        theirs = [x for x in q.get("entries", []) if sorted(x.get("tests", [])) == sorted(e.tests)]
        if not theirs:
            continue
        seen += 1
        collected += sum(int(x.get("collected", 0)) for x in theirs)
        wheres = {x.get("where") for x in theirs}
        outcomes += [t.get("outcome") for t in q.get("tests", []) if t.get("where") in wheres]
    runs = [o for o in outcomes if o in RAN]
    passed = sum(o in PASSED for o in runs)
    if not seen:
        v, why = "unseen", "no report had this entry"
    elif collected == 0:
        v, why = "stale", f"its tests match no collected test in {seen} report(s)"
    elif runs and passed == len(runs):
        v, why = "ready to lift", f"passed every time it ran: {passed} of {len(runs)} run(s)"
    elif runs:
        v, why = "keep", f"failed {len(runs) - passed} of {len(runs)} run(s)"
    else:
        v, why = "keep", "its tests did not run (skipped, or not where its conditions hold): run with " \
                         "--gpuenv-quarantine-run to try them"
    return {"where": e.where, "tests": list(e.tests), "verdict": v, "why": why, "runs": len(runs), "passed": passed,
            "collected": collected}


def check(file: Optional[str], report_paths: list[str]) -> tuple[list[dict[str, Any]], int]:
    reports = [_report(p) for p in report_paths]
    path = file or next((q.get("file") for q in reports if q.get("file")), None)
    if not path:
        raise CheckError("give the quarantine FILE (the reports name none)")
    try:
        with open(path, encoding="utf-8") as f:
            entries = parse(f.read(10_000_000), os.path.relpath(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckError(f"cannot read {safe_repr(path, 200)}: {exc}") from None
    except ValueError as exc:
        raise CheckError(f"{exc}") from None
    out = [verdict(e, reports) for e in entries]
    return out, int(any(v["verdict"] in ("stale", "ready to lift") for v in out))


def quarantine_command(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv))
    if args.command is None:
        parser.print_help()
        return 2
    try:
        verdicts, code = check(args.file, args.json_report)
    except CheckError as exc:
        print(f"gpuenv quarantine check: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(verdicts, indent=2))
        return code
    for v in verdicts:
        print(f"{v['where']}: {v['verdict']}: {v['why']} (tests: {', '.join(v['tests'])})")
    if not verdicts:
        print("no entries")
    return code
