"""Stored baselines: one JSON file, entries keyed by device key, then by test id and measurement name.

Written under a file lock with an atomic replace (``base.paths.write_atomically``), so xdist workers
recording at once lose nothing. A baseline from another device key is never looked at. A file, device
or entry that is valid JSON but not what ``store`` writes raises ``ValueError`` naming the file, the
entry and the problem.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, Optional

import filelock

from pytest_gpuenv.base.model import safe_repr
from pytest_gpuenv.base.paths import write_atomically

SCHEMA = 1
#: the numbers of an entry that ``assert_no_regression`` divides by: positive, finite seconds
_SECONDS = ("median_s", "ci_low_s", "ci_high_s")
_RERECORD = "re-record it with --gpuenv-perf=record or delete it"


#: the largest baselines file or ``--gpuenv-json`` report read
MAX_JSON = 128 * 2**20


def read_json(path: str) -> Any:
    """The JSON in ``path``: a regular file (a FIFO or a device is never opened) of at most MAX_JSON bytes.

    FileNotFoundError when it is missing; ValueError naming the file and the problem otherwise."""
    from pytest_gpuenv.rtc.errors import KernelCompileError  # here: rtc's guarded reader, a lazy subsystem
    from pytest_gpuenv.rtc.source import read_regular

    try:
        data = read_regular(path, MAX_JSON)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except KernelCompileError:
        raise ValueError(f"{path}: larger than the {MAX_JSON // 2**20} MiB a JSON file read here may have") from None
    if data is None:
        raise ValueError(f"{path}: not a regular file")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:  # (ValueError: also an integer of over 4300 digits)
        raise ValueError(f"{path}: not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: not JSON (nested too deeply)") from None


def positive_seconds(v: Any) -> bool:
    """A number of seconds ``assert_no_regression`` and ``perf compare`` may divide by: positive, finite."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v) and v > 0
    except OverflowError:  # an integer beyond a float (10**400)
        return False


def _read(path: str) -> dict[str, Any]:
    try:
        data = read_json(path)
    except FileNotFoundError:
        return {"schema": SCHEMA, "devices": {}}
    except ValueError as exc:
        raise ValueError(f"cannot read performance baselines {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("devices"), dict):
        raise ValueError(f"performance baselines {path} is not a pytest-gpuenv baselines file")
    return data


def _json_type(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    for kind, name in ((dict, "an object"), (list, "a list"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _tests_of(data: dict[str, Any], path: str, device_key: str) -> dict[str, Any]:
    """The entries of one device key ({} when there are none)."""
    tests = data["devices"].get(device_key, {})
    if not isinstance(tests, dict):
        raise ValueError(f"performance baselines {path}: device {device_key!r} holds {_json_type(tests)}, "
                         "expected an object of test entries; fix or delete the file")
    return tests


def _checked(entry: Any, path: str, device_key: str, test_key: str) -> dict[str, Any]:
    """``entry`` when ``assert_no_regression`` can compare with it; else ValueError saying what is wrong."""
    where = f"performance baselines {path}: entry {test_key!r} of device {device_key!r}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is {_json_type(entry)}, expected an object; {_RERECORD}")
    for key in _SECONDS + ("mode",):
        if key not in entry:
            raise ValueError(f"{where} has no {key!r}; {_RERECORD}")
    for key in _SECONDS:
        v = entry[key]
        if not positive_seconds(v):
            raise ValueError(f"{where}: {key} is {safe_repr(v)}, expected a positive number of seconds; {_RERECORD}")
    if entry["ci_low_s"] > entry["ci_high_s"]:
        raise ValueError(f"{where}: ci_low_s {entry['ci_low_s']!r} is above ci_high_s {entry['ci_high_s']!r}; "
                         + _RERECORD)
    if not isinstance(entry["mode"], str):
        raise ValueError(f"{where}: mode is {_json_type(entry['mode'])}, expected a string; {_RERECORD}")
    return entry


def load(path: str, device_key: str, test_key: str) -> Optional[dict[str, Any]]:
    """The stored entry of a test on a device key (None when there is none), checked (``_checked``)."""
    entry = _tests_of(_read(path), path, device_key).get(test_key)
    return None if entry is None else _checked(entry, path, device_key, test_key)


def store(path: str, device_key: str, test_key: str, entry: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with filelock.FileLock(path + ".lock"):
        data = _read(path)
        entry = dict(entry, recorded_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        data["devices"][device_key] = dict(_tests_of(data, path, device_key), **{test_key: entry})
        text = json.dumps(data, indent=1, sort_keys=True)
        write_atomically(path, lambda f: f.write(text.encode("utf-8")))


def other_keys(path: str, test_key: str) -> list[str]:
    """Device keys that do have this test (for the 'no baseline' message)."""
    try:
        devices = _read(path)["devices"]
    except ValueError:
        return []
    return sorted(k for k, v in devices.items() if isinstance(v, dict) and test_key in v)
