"""``PerfSession``: the performance entries of this process and, on the controller, of the whole run.

Every ``GpuBench`` of a pytest session adds its ``PerfEntry`` objects to the one ``PerfSession`` the
plugin keeps. An xdist worker sends ``dump()`` to the controller, which ``merge``s it; the controller
then writes ``--gpuenv-json`` (``write_json``) and the terminal table (``summary_lines``).
Importing this module imports no GPU library.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from pytest_gpuenv.base.paths import file_target_problem, write_atomically
from pytest_gpuenv.perf._entries import PerfEntry


class PerfSession:
    """The entries of this process (plus, on the xdist controller, those its workers sent)."""

    def __init__(self) -> None:
        self._entries: list[PerfEntry] = []

    def add(self, entry: PerfEntry) -> None:
        self._entries.append(entry)

    @property
    def entries(self) -> list[PerfEntry]:
        """The entries in the order added (a copy of the list)."""
        return list(self._entries)

    def dump(self) -> str:
        """The JSON payload an xdist worker sends to the controller (``merge`` reads it)."""
        return json.dumps(self.measurements(), default=str)

    def merge(self, payload: Any) -> None:
        """Add the entries of a worker's ``dump()``. A payload that is not a JSON list is ignored, and so
        is an item that is not an entry; this never raises."""
        try:
            data = json.loads(payload)
        except (TypeError, ValueError, RecursionError):
            return
        if not isinstance(data, list):
            return
        for item in data:
            try:
                self._entries.append(PerfEntry.from_dict(item))
            except (TypeError, ValueError):
                continue

    def measurements(self) -> list[dict[str, Any]]:
        """The ``"measurements"`` of the ``--gpuenv-json`` report: one plain dict per entry."""
        return [r.to_dict() for r in self._entries]

    def write_json(self, path: str, environment: dict[str, Any], skips: list[dict[str, Any]],
                   run: Optional[dict[str, Any]] = None) -> None:
        """Write the ``--gpuenv-json`` report ``{**run, "environment", "measurements", "skips"}`` to ``path``
        (already resolved by the caller), creating its folder; ``run``: the run's own fields (version,
        timestamp, outcomes: ``session.state.Outputs.run_fields``). Atomic and never through a link
        (``base.paths.write_atomically``): a ``path`` that is a symbolic link is replaced by the file, its
        target left alone; one that is not a regular file raises ``OSError``."""
        data = {**(run or {}), "environment": environment, "measurements": self.measurements(), "skips": skips}
        problem = file_target_problem(path, allow_link=True)
        if problem:
            raise OSError(problem)
        write_atomically(path, lambda f: f.write(json.dumps(data, indent=2, default=str).encode("utf-8")))

    def write_plot(self, path: str) -> None:
        """Write the ``--gpuenv-perf-plot`` PNG of the entries to ``path`` (``perf.plot``; needs matplotlib)."""
        from pytest_gpuenv.perf.plot import write

        write(self._entries, path)

    def summary_lines(self) -> list[str]:
        """The terminal table of the entries (``[]`` when there are none)."""
        from pytest_gpuenv.perf.report import summary_lines

        return summary_lines(self._entries)

