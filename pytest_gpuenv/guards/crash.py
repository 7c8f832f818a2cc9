"""A GPU fault that kills the process: keep what was collected, and name the test that did it.

Before ROCm 7 (and on ROCm 7 with core dumps on, or HIP_SKIP_ABORT_ON_GPU_ERROR=0) a GPU fault aborts the
process: ROCr's ``VMFaultHandler`` and clr's queue callback call ``abort()`` (detection reports which case
holds: problem ``hip-fault-aborts`` or ``hip-fault-returns-error``). ``start`` turns on the runtime's opt-out
(``HIP_SKIP_ABORT_ON_GPU_ERROR=1`` on backend rocm, unless the user set it) and, on a machine with ROCm or
in an xdist controller, registers ``CrashGuard``:

- before the first HIP launch of each test (``runtime.sticky.before_launch``), the running test is written
  to ``running-<worker>.json`` in the state dir (fsynced; removed when the test ends: the fault arrives
  asynchronously, while the kernel runs, so the record stays for the whole test), and what was collected
  is flushed: the ``--gpuenv-json`` report, or in an xdist worker its perf entries (``records-<worker>.json``);
- the xdist controller, when a worker dies, merges that worker's flushed perf entries and adds to xdist's
  "worker crashed while running" report what the worker was doing (``pytest_handlecrashitem``); xdist
  replaces the worker and the run goes on (``-n`` is the recovery);
- the next run (on a machine with ROCm) finds a record whose process is gone and names the test in its
  header and summary.

Where detection says a fault comes back as an error (``hip-fault-returns-error``) the record is still
written but nothing is flushed.

The state dir is pytest's cache (``.pytest_cache/d/gpuenv-crash``), else ``<cache dir>/crash/<project>``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpuenv.base.paths import write_atomically
from pytest_gpuenv.detect.checks import SKIP_ABORT_VAR
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.runtime import sticky
from pytest_gpuenv.session.state import GpuenvSession

_FAULT_CODES = ("hip-fault-aborts", "hip-fault-returns-error")


def start(config: pytest.Config, session: GpuenvSession) -> None:
    """Turn the runtime's opt-out on (backend rocm, the user's own setting wins) and register the guard. The
    plugin calls it where the guard has work: a process that may launch HIP kernels on an AMD GPU
    (``GpuenvSession.hip_on_gpu``), or an xdist controller (whose workers may run on such a machine);
    elsewhere it does not import this module, so no hook of it runs and no state dir is made."""
    env = session.env
    if env.backend == "rocm" and SKIP_ABORT_VAR not in os.environ:
        session.set_environ({SKIP_ABORT_VAR: "1"})
    guard = CrashGuard(config, session)
    config.pluginmanager.register(guard, "gpuenv-crash")
    sticky.set_launch_hook(guard.before_launch)


def fault_line(session: GpuenvSession) -> Optional[str]:
    """The header line saying what a GPU fault does to this run (ROCm only)."""
    env = session.env
    p = next((p for p in (env.problem(c) for c in _FAULT_CODES) if p is not None), None)
    if env.backend != "rocm" or p is None:
        return None
    state = "aborts the process" if p.code == "hip-fault-aborts" else "returns an error"
    return f"gpuenv: a GPU fault {state}: {p.message}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _read(path: Path) -> Optional[dict[str, Any]]:
    """A running record: a small regular file (a FIFO, a device or a link to one is never opened; at most
    64 KiB is read), decoded as a JSON object; None otherwise."""
    data = Fs(None).read_bytes(str(path))
    try:
        record = json.loads(data) if data is not None else None
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError; a deep nesting recurses)
        return None
    return record if isinstance(record, dict) else None


def _read_records(path: Path) -> Optional[str]:
    """A crashed worker's flushed perf entries: a regular file of at most 64 MiB, else None."""
    from pytest_gpuenv.rtc.errors import KernelCompileError
    from pytest_gpuenv.rtc.source import read_regular

    try:
        data = read_regular(str(path))
    except (OSError, KernelCompileError):  # (the error says "too large")
        return None
    return data.decode("utf-8", errors="replace") if data is not None else None


def _write(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` and fsync it: it must be on disk before a launch that may abort.

    Through ``base.paths.write_atomically``: a new file, then renamed over ``path``, so whatever was there (a
    FIFO, a link) is replaced, never opened."""
    write_atomically(str(path), lambda f: f.write(data.encode()), durable=True)


def _running_files(directory: Path) -> list[Path]:
    """The ``running-*.json`` records in ``directory``, sorted (a listing: a glob would compile a pattern at
    every session start)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(directory / n for n in names if n.startswith("running-") and n.endswith(".json"))


#: a temporary file of ``_write`` older than this was left by a process killed between writing and renaming it
STALE_TEMPORARY_S = 60.0


def _remove_stale_temporaries(directory: Path) -> None:
    """Remove ``running-*``/``records-*`` temporary files (``*.tmp``) that no live writer can still rename:
    a writer holds its own for milliseconds, so one older than a minute belongs to a killed process."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name.startswith(("running-", "records-")) and name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                st = os.lstat(directory / name)
                if now - st.st_mtime > STALE_TEMPORARY_S:
                    os.unlink(directory / name)


class CrashGuard:
    """The running test on disk before HIP launches; crashed workers and dead earlier runs named."""

    def __init__(self, config: pytest.Config, session: GpuenvSession) -> None:
        self.config, self.session = config, session
        workerinput = getattr(config, "workerinput", None)
        self.worker: Optional[str] = str(workerinput.get("workerid")) if workerinput else None
        self.nodeid: Optional[str] = None
        self.marked = False  # the running test is on disk
        self.flushed = -1  # records + skips at the last flush
        self.crashes: dict[str, dict[str, Any]] = {}  # controller: worker id -> its record when it died
        #: detection says a fault comes back as an error: the record is still written, nothing is flushed
        self.survives = session.env.problem("hip-fault-returns-error") is not None
        self._dir: Optional[Path] = None
        self._previous: Optional[list[dict[str, Any]]] = None

    def state_dir(self) -> Optional[Path]:
        if self._dir is None:
            cache = getattr(self.config, "cache", None)
            try:
                if cache is not None:
                    self._dir = Path(cache.mkdir("gpuenv-crash"))
                else:
                    from pytest_gpuenv.rtc.cache import default_dir

                    base = self.session.settings.cache_dir or default_dir()
                    key = hashlib.sha256(str(self.config.rootpath).encode()).hexdigest()[:16]
                    self._dir = Path(base) / "crash" / key if base else None
            except OSError:
                return None
        return self._dir

    def _name(self) -> str:
        return self.worker or "main"

    # ------------------------------------------------------------------------ in the process that launches
    def before_launch(self, backend: str) -> None:
        """Flush what was collected, then write the running test: once per test, before its first launch."""
        directory = self.state_dir()
        if self.marked or self.nodeid is None or directory is None:
            return
        if not self.survives:
            self._flush(directory)
        record = {"nodeid": self.nodeid, "pid": os.getpid(), "worker": self.worker, "backend": backend,
                  "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        _write(directory / f"running-{self._name()}.json", json.dumps(record))
        self.marked = True

    def _flush(self, directory: Path) -> None:
        session = self.session
        count = (len(session.perf.entries) if session.has_measurements else 0) + len(session.skips)
        if count == self.flushed:
            return
        self.flushed = count
        if self.worker is not None:
            if session.has_measurements:
                _write(directory / f"records-{self.worker}.json", session.perf.dump())
        elif session.settings.json_path:
            target = os.path.join(str(self.config.invocation_params.dir), session.settings.json_path)
            with contextlib.suppress(OSError):  # the write at the end reports it
                session.perf.write_json(target, session.env.to_dict(), [s.to_dict() for s in session.skips])

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        directory = self.state_dir() if self.marked else None
        if directory is not None:
            with contextlib.suppress(OSError):
                (directory / f"running-{self._name()}.json").unlink()
        self.marked, self.nodeid = False, None

    def pytest_sessionstart(self) -> None:
        directory = self.state_dir() if self.worker is not None else None
        if directory is not None:  # a stale file of an earlier run
            with contextlib.suppress(OSError):
                (directory / f"records-{self.worker}.json").unlink()

    def pytest_sessionfinish(self) -> None:
        directory = self.state_dir() if self.worker is not None else None
        if directory is not None:  # the records went to the controller in workeroutput
            with contextlib.suppress(OSError):
                (directory / f"records-{self.worker}.json").unlink()

    def pytest_unconfigure(self) -> None:
        sticky.set_launch_hook(None)

    # ------------------------------------------------------------------------ the xdist controller
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A worker that died: keep its flushed records and what it was running (a worker that finished
        removed its own files)."""
        directory = self.state_dir() if error is not None else None
        if directory is None:
            return
        wid = str(node.gateway.id)
        running, records = directory / f"running-{wid}.json", directory / f"records-{wid}.json"
        record = _read(running)
        if record is not None:
            self.crashes[wid] = record
        text = _read_records(records)
        if text is not None:
            self.session.perf.merge(text)
        for path in (running, records):
            with contextlib.suppress(OSError):
                path.unlink()

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        node = getattr(report, "node", None)
        record = self.crashes.get(str(node.gateway.id)) if node is not None else None
        if record is not None and record.get("nodeid") == crashitem:
            report.longrepr = f"{report.longrepr}\n{self._explain(record)}"
            record["reported"] = True

    def _explain(self, record: dict[str, Any]) -> str:
        fault = fault_line(self.session) or "gpuenv: on ROCm before 7.0 a GPU fault aborts the process"
        return (f"gpuenv: {record.get('nodeid')} had launched a HIP kernel when the process died (pid "
                f"{record.get('pid')}, since {record.get('time')}); {fault.removeprefix('gpuenv: ')}. What was "
                "collected before it was kept; pytest-xdist (-n) replaces a crashed worker")

    # ------------------------------------------------------------------------ the next run
    def previous(self) -> list[dict[str, Any]]:
        """Records left by processes that died while a test of theirs had launched a HIP kernel."""
        if self._previous is None:
            self._previous = []
            directory = self.state_dir() if self.worker is None and self.session.hip_on_gpu else None
            if directory is not None:
                _remove_stale_temporaries(directory)
            for path in _running_files(directory) if directory is not None else []:
                record = _read(path)
                pid = record.get("pid") if record else None
                if isinstance(pid, int) and pid != os.getpid() and _alive(pid):
                    continue  # another run of this project is going on
                if record is not None:
                    self._previous.append(record)
                with contextlib.suppress(OSError):
                    path.unlink()
        return self._previous

    def _previous_lines(self) -> list[str]:
        return [f"gpuenv: an earlier run died while {r.get('nodeid')} had launched a HIP kernel ("
                + (f"worker {r['worker']}, " if r.get("worker") else "") + f"pid {r.get('pid')}, {r.get('time')}): "
                "on ROCm a GPU fault can abort the process; run that test alone, or the suite with -n N"
                for r in self.previous()]

    def pytest_report_header(self) -> list[str]:
        line = fault_line(self.session)
        return ([line] if line else []) + self._previous_lines()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker is not None:
            return
        lines = self._previous_lines() + [self._explain(r) for r in self.crashes.values() if not r.get("reported")]
        if lines:
            terminalreporter.write_sep("-", "gpuenv: crashes")
            for line in lines:
                terminalreporter.write_line(line)
