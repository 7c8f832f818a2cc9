"""``PerfSession``: the performance records of this process and, on the controller, of the whole run.

Every ``GpuBench`` of a pytest session adds its ``PerfRecord`` objects to the one ``PerfSession`` the
plugin keeps. An xdist worker sends ``dump()`` to the controller, which ``merge``s it; the controller
then writes ``--gpuenv-json`` (``write_json``) and the terminal table (``summary_lines``).
Importing this module imports no GPU library.
"""

from __future__ import annotations

import json
import os
from typing import Any

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
        except (TypeError, ValueError):
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

    def write_json(self, path: str, environment: dict[str, Any], skips: list[dict[str, Any]]) -> None:
        """Write the ``--gpuenv-json`` report ``{"environment", "measurements", "skips"}`` to ``path``
        (already resolved by the caller), creating its directory; atomic (temporary file, then rename)."""
        data = {"environment": environment, "measurements": self.measurements(), "skips": skips}
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, default=str)
        os.replace(tmp, path)

    def summary_lines(self) -> list[str]:
        """The terminal table of the records (``[]`` when there are none)."""
        from pytest_gpuenv.perf.report import summary_lines

        return summary_lines(self._records)
