"""Stored baselines: one JSON file, entries keyed by device key, then by test id and measurement name.

Written under a file lock with an atomic replace, so xdist workers recording at once lose nothing.
A baseline from another device key is never looked at.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Optional

import filelock

SCHEMA = 1


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {"schema": SCHEMA, "devices": {}}
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read performance baselines {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise ValueError(f"performance baselines {path} is not a pytest-gpuenv baselines file")
    return data


def load(path: str, device_key: str, test_key: str) -> Optional[dict[str, Any]]:
    return _read(path)["devices"].get(device_key, {}).get(test_key)


def store(path: str, device_key: str, test_key: str, entry: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with filelock.FileLock(path + ".lock"):
        data = _read(path)
        entry = dict(entry, recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        data.setdefault("devices", {}).setdefault(device_key, {})[test_key] = entry
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


def other_keys(path: str, test_key: str) -> list[str]:
    """Device keys that do have this test (for the 'no baseline' message)."""
    try:
        devices = _read(path)["devices"]
    except ValueError:
        return []
    return sorted(k for k, v in devices.items() if test_key in v)
