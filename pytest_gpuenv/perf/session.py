"""``PerfSession``: the performance records of this process and, on the controller, of the whole run.

Every ``GpuBench`` of a pytest session adds its ``PerfRecord`` objects to the one ``PerfSession`` the
plugin keeps. An xdist worker sends ``dump()`` to the controller, which ``merge``s it; the controller
then writes ``--gpuenv-json`` (``write_json``) and the terminal table (``summary_lines``).
Importing this module imports no GPU library.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from typing import Any, BinaryIO, Callable, Optional

from pytest_gpuenv.perf._records import PerfRecord


class PerfSession:
    """The records of this process (plus, on the xdist controller, those its workers sent)."""

    def __init__(self) -> None:
        self._records: list[PerfRecord] = []

    def add(self, record: PerfRecord) -> None:
        self._records.append(record)

    @property
    def records(self) -> list[PerfRecord]:
        """The records in the order added (a copy of the list)."""
        return list(self._records)

    def dump(self) -> str:
        """The JSON payload an xdist worker sends to the controller (``merge`` reads it)."""
        return json.dumps(self.measurements(), default=str)

    def merge(self, payload: Any) -> None:
        """Add the records of a worker's ``dump()``. A payload that is not a JSON list is ignored, and so
        is an entry that is not a record; this never raises."""
        try:
            data = json.loads(payload)
        except (TypeError, ValueError, RecursionError):
            return
        if not isinstance(data, list):
            return
        for entry in data:
            try:
                self._records.append(PerfRecord.from_dict(entry))
            except (TypeError, ValueError):
                continue

    def measurements(self) -> list[dict[str, Any]]:
        """The ``"measurements"`` of the ``--gpuenv-json`` report: one plain dict per record."""
        return [r.to_dict() for r in self._records]

    def write_json(self, path: str, environment: dict[str, Any], skips: list[dict[str, Any]],
                   run: Optional[dict[str, Any]] = None) -> None:
        """Write the ``--gpuenv-json`` report ``{**run, "environment", "measurements", "skips"}`` to ``path``
        (already resolved by the caller), creating its directory; ``run``: the run's own fields (version,
        timestamp, outcomes: ``_outputs.Outputs.run_fields``). Atomic and never through a link: the
        data goes to a new temporary file of the same directory (``mkstemp``: ``O_CREAT|O_EXCL``, a
        random name), which is renamed over ``path``. A ``path`` that is a symbolic link is replaced by
        the file, its target left alone; one that is not a regular file raises ``OSError``."""
        data = {**(run or {}), "environment": environment, "measurements": self.measurements(), "skips": skips}
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        problem = json_target_problem(path, allow_link=True)
        if problem:
            raise OSError(problem)
        write_atomically(path, lambda f: f.write(json.dumps(data, indent=2, default=str).encode("utf-8")))

    def write_plot(self, path: str) -> None:
        """Write the ``--gpuenv-perf-plot`` PNG of the records to ``path`` (``_plot``; needs matplotlib)."""
        from pytest_gpuenv.perf._plot import write

        write(self._records, path)

    def summary_lines(self) -> list[str]:
        """The terminal table of the records (``[]`` when there are none)."""
        from pytest_gpuenv.perf.report import summary_lines

        return summary_lines(self._records)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def json_target_problem(path: str, allow_link: bool = False) -> Optional[str]:
    """Why ``path`` cannot take the ``--gpuenv-json`` report, or None: it must be a regular file or not
    exist yet, in a directory that exists or can be created. A symbolic link is refused unless
    ``allow_link`` (the writer then replaces the link itself, never writing through it)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return _parent_problem(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        return f"cannot be written ({exc.strerror or exc})"
    if stat.S_ISREG(mode) or (allow_link and stat.S_ISLNK(mode)):
        return None
    kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}; the report is written only to a regular file (give a new or plain file path)"


def _parent_problem(directory: str) -> Optional[str]:
    """The nearest existing folder above a new file must be a directory (the writer creates the rest)."""
    while not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        return f"cannot be created: {directory} is not a directory"
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: str, write: Callable[[BinaryIO], Any]) -> None:
    """Write ``path`` through ``write(f)`` on a new temporary file of its directory (``mkstemp``:
    ``O_CREAT|O_EXCL``, a random name, so never through a link), then rename it over ``path`` (a link there
    is replaced, its target left alone). The file gets the mode a plain ``open`` would (0666 & ~umask).
    Used by the JSON report and the ``--gpuenv-perf-plot`` PNG."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
