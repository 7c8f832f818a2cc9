"""Quarantine lists kept outside the source: a TOML file (``--gpuenv-quarantine``, ini ``gpuenv_quarantine``) of
``[[quarantine]]`` entries, each skipping or xfailing the tests its node-id globs name where its ``when``
conditions hold::

    [[quarantine]]
    tests = ["tests/test_attn.py::test_flash*"]   # node-id globs: * and ? wildcards, [ ] literal
    when = { vendor = "amd", arch = "gfx94*", rocm = "<6.4" }
    action = "xfail"                              # or "skip"; strict = true for a strict xfail
    reason = "hangs on MI300 with ROCm 6.3"
    link = "https://github.com/org/repo/issues/123"

``when`` keys (all must hold; a list holds where any of its items does): ``vendor`` (nvidia, amd, cpu),
``arch`` (arch patterns), ``cuda``, ``rocm``, ``driver``, ``torch`` (version ranges), ``host`` (host-name
globs), read as ``base.conditions`` defines them for the device the test runs on. A glob naming a test without
its parameters (``test_x.py::test_f``) covers each of them. The first entry that applies to a test wins.

``load`` reads the file (a ``pytest.UsageError`` naming the file and the line of a bad entry); ``Quarantine``
(a plugin object, registered at configure) applies the entries at collection, counts each quarantined test's
outcome from its reports (the user property ``session.state.QUARANTINED`` carries the entry to the process that
logs the report, an xdist controller too), prints the ``gpuenv: quarantine`` summary apart from the hardware
skips, and gives ``--gpuenv-json`` its ``quarantine`` field: each entry with the number of collected tests its
globs name, and each quarantined test with its outcome (what ``gpuenv quarantine check`` reads).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections import Counter
from typing import Any, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.conditions import (
    VENDORS,
    VERSIONS,
    Facts,
    device_for,
    facts,
    host_matches,
    parse_spec,
    torch_device_of,
    version_in,
)
from pytest_gpuenv.base.model import ArchPattern, safe_repr
from pytest_gpuenv.session.state import QUARANTINED, GpuenvSession

ACTIONS = ("skip", "xfail")
KEYS = ("tests", "when", "action", "strict", "reason", "link")
WHEN = ("vendor", "arch", *VERSIONS, "host")
_HEADER = r"^\s*\[\[\s*quarantine\s*\]\]"


class When(NamedTuple):
    """One ``when`` key: its name and the values of which one must hold (a version range: one ``SpecifierSet``)."""

    name: str
    values: tuple[Any, ...]

    def holds(self, f: Facts) -> bool:
        if self.name == "vendor":
            return f.vendor in self.values
        if self.name == "arch":
            return any(p.matches(f.arch) for p in self.values)
        if self.name == "host":
            return any(host_matches(p, f.host) for p in self.values)
        return version_in(self.values[0], f.versions.get(self.name))


class Entry(NamedTuple):
    """One ``[[quarantine]]`` entry; ``where`` is ``FILE:LINE``."""

    where: str
    tests: tuple[str, ...]
    when: tuple[When, ...]
    action: str
    strict: bool
    reason: str
    link: Optional[str]

    def names(self, nodeid: str) -> bool:
        """Whether a glob names the test (or the test without its parameters)."""
        base = nodeid.split("[", 1)[0]
        return any(fnmatch.fnmatchcase(nodeid, g) or fnmatch.fnmatchcase(base, g) for g in self._globs)

    @property
    def _globs(self) -> tuple[str, ...]:
        return tuple(g.replace("[", "[[]") for g in self.tests)  # brackets are literal: parametrized ids

    def applies(self, f: Facts) -> bool:
        return all(w.holds(f) for w in self.when)

    def text(self) -> str:
        """``quarantined (q.toml:3): hangs on MI300 with ROCm 6.3, https://...``"""
        return f"quarantined ({self.where}): {self.reason}" + (f", {self.link}" if self.link else "")

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "tests": list(self.tests), "action": self.action, "strict": self.strict,
                "reason": self.reason, "link": self.link}


class QuarantineFile(NamedTuple):
    path: str
    entries: tuple[Entry, ...]


def _strings(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise ValueError(f"{what} must be a string or a non-empty list of strings, got {safe_repr(value)}")
    return tuple(v.strip() for v in items)


def _when(table: Any) -> tuple[When, ...]:
    if not isinstance(table, dict):
        raise ValueError(f"'when' must be a table such as {{ vendor = \"amd\", rocm = \"<6.4\" }}, got {safe_repr(table)}")
    out = []
    for name, value in table.items():
        if name not in WHEN:
            raise ValueError(f"unknown 'when' key {safe_repr(name)} (expected {', '.join(WHEN)})")
        if name in VERSIONS:
            out.append(When(name, (parse_spec(value, f"'when' {name}"),)))
            continue
        values: tuple[Any, ...] = _strings(value, f"'when' {name}")
        if name == "vendor":
            bad = [v for v in values if v.lower() not in VENDORS]
            if bad:
                raise ValueError(f"unknown vendor {safe_repr(bad[0])} (expected {', '.join(VENDORS)})")
            values = tuple(v.lower() for v in values)
        elif name == "arch":
            values = tuple(ArchPattern.parse(v) for v in values)
        out.append(When(name, values))
    return tuple(out)


def entry(data: Any, where: str) -> Entry:
    """One entry from its TOML table; ``ValueError`` saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"an entry is a table, got {safe_repr(data)}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise ValueError(f"unknown key {safe_repr(unknown[0])} (expected {', '.join(KEYS)})")
    for key in ("tests", "action", "reason"):
        if key not in data:
            raise ValueError(f"missing '{key}'")
    action = data["action"]
    if action not in ACTIONS:
        raise ValueError(f"'action' must be one of {', '.join(ACTIONS)}, got {safe_repr(action)}")
    strict = data.get("strict", False)
    if not isinstance(strict, bool) or (strict and action != "xfail"):
        raise ValueError(f"'strict' is true or false, and only for action 'xfail', got {safe_repr(strict)}")
    reason, link = data["reason"], data.get("link")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"'reason' must be a non-empty string, got {safe_repr(reason)}")
    if link is not None and (not isinstance(link, str) or not link.strip()):
        raise ValueError(f"'link' must be a string (an issue URL), got {safe_repr(link)}")
    return Entry(where, _strings(data["tests"], "'tests'"), _when(data.get("when", {})), action, strict,
                 reason.strip(), link.strip() if link else None)


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9 and 3.10
        import tomli as tomllib
    return tomllib


def parse(text: str, name: str) -> tuple[Entry, ...]:
    """The entries of a file's text; ``ValueError`` naming ``name`` and the line."""
    toml = _toml()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ValueError(f"{name} is not valid TOML: {exc}") from None
    extra = [k for k in data if k != "quarantine"]
    if extra:
        raise ValueError(f"{name}: unknown top-level key {safe_repr(extra[0])} (the file holds [[quarantine]] entries)")
    tables = data.get("quarantine", [])
    if not isinstance(tables, list):
        raise ValueError(f"{name}: 'quarantine' must be an array of tables ([[quarantine]] entries)")
    lines = [n for n, line in enumerate(text.splitlines(), 1) if re.match(_HEADER, line)]
    if len(lines) != len(tables):  # an inline array: its entries are named by their place
        first = next((n for n, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("quarantine")), 1)
        lines = [first] * len(tables)
    out = []
    for i, (table, line) in enumerate(zip(tables, lines)):
        where = f"{name}:{line}" + ("" if len(set(lines)) == len(lines) else f" (entry {i + 1})")
        try:
            out.append(entry(table, where))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return tuple(out)


def load(value: Any, where: str, base: str) -> QuarantineFile:
    """The file ``value`` (relative to ``base``: the ini file's folder); a ``pytest.UsageError`` naming it, and the
    line of a bad entry."""
    if not isinstance(value, str) or "\0" in value:
        raise pytest.UsageError(f"gpuenv: quarantine file {safe_repr(value, 200)} from {where} is not a path")
    path = os.path.join(base, os.path.expanduser(value))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(10_000_000)
    except (OSError, UnicodeDecodeError) as exc:
        raise pytest.UsageError(f"gpuenv: cannot read quarantine file {safe_repr(value, 200)} from {where}: "
                                f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        return QuarantineFile(path, parse(text, os.path.relpath(path)))
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: quarantine file from {where}: {exc}") from None


def mark(e: Entry, run: bool) -> pytest.MarkDecorator:
    """The mark of an entry: its skip or xfail; with ``run`` (``--gpuenv-quarantine-run``) a non-strict xfail."""
    if e.action == "skip" and not run:
        return pytest.mark.skip(reason=e.text())
    return pytest.mark.xfail(reason=e.text(), strict=e.strict and not run)


class Quarantine:
    """The run's quarantine: applies the entries at collection, counts outcomes, writes the summary."""

    def __init__(self, qfile: QuarantineFile, session: GpuenvSession, run: bool) -> None:
        self.file = qfile
        self.session = session
        self.run = run
        #: entry where -> number of collected tests its globs name (wherever its conditions hold)
        self.collected: Counter[str] = Counter()
        self.counted = False
        #: nodeid -> {"nodeid", "where", "action", "outcome"}
        self.tests: dict[str, dict[str, Any]] = {}

    def _count(self, nodeids: list[str]) -> None:
        if self.counted:
            return
        self.counted = True
        for e in self.file.entries:
            self.collected[e.where] += sum(1 for n in nodeids if e.names(n))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        env, host = self.session.env, self.session.host
        for item in items:
            named = [e for e in self.file.entries if e.names(item.nodeid)]
            if not named:
                continue
            f = facts(env, device_for(env, torch_device_of(item)), host)
            e = next((e for e in named if e.applies(f)), None)
            if e is not None:
                item.add_marker(mark(e, self.run))
                item.user_properties.append((QUARANTINED, e.where))
        self._count([i.nodeid for i in items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """On an xdist controller (which collects nothing itself): the ids the first worker collected."""
        self._count(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        where = next((v for k, v in report.user_properties if k == QUARANTINED), None)
        if where is None or report.nodeid in self.tests:
            return
        outcome = _outcome(report)
        if outcome is not None:
            e = next(e for e in self.file.entries if e.where == where)
            self.tests[report.nodeid] = {"nodeid": report.nodeid, "where": where, "action": e.action,
                                         "outcome": outcome}

    def summary_lines(self) -> list[str]:
        if not self.tests:
            return []
        by = Counter(t["outcome"] for t in self.tests.values())
        head = ", ".join(f"{n} {o}" for o, n in sorted(by.items()))
        lines = [f"{len(self.tests)} test(s) quarantined by {os.path.relpath(self.file.path)}: {head}"]
        per = Counter(t["where"] for t in self.tests.values())
        for e in self.file.entries:
            if per[e.where]:
                lines.append(f"  {per[e.where]:4d}  {e.action:<5}  {e.where}  {e.reason}" + (f"  {e.link}" if e.link else ""))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file.path, "run": self.run,
                "entries": [{**e.to_dict(), "collected": self.collected[e.where]} for e in self.file.entries],
                "tests": list(self.tests.values())}


def _outcome(report: pytest.TestReport) -> Optional[str]:
    """skipped, xfailed, xpassed, passed, failed or error; None for a report that does not decide it."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        return "skipped" if report.skipped and not xfail else "error" if report.failed else None
    if report.when != "call":
        return None
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    if report.passed:
        return "xpassed" if xfail else "passed"
    return "xpassed" if "[XPASS(strict)]" in str(report.longrepr) else "failed"


def configure(config: pytest.Config, session: GpuenvSession) -> Quarantine:
    """Read the run's quarantine file (a ``pytest.UsageError`` naming it, and the line of a bad entry) and register
    its ``Quarantine``."""
    source = session.settings.quarantine
    assert source is not None  # (the plugin configures a quarantine only where a file is given)
    q = Quarantine(load(*source), session, session.settings.quarantine_run)
    config.pluginmanager.register(q, "gpuenv-quarantine")
    return q
