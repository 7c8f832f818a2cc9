"""The ini options as the file holds them, and the check of the values that name files.

pytest converts an ini value to the option's registered type; where the file holds another TOML type, pytest
refuses it (``[tool.pytest]``: TypeError, 9.2: UsageError; a list given to a ``string`` option under
``[tool.pytest.ini_options]``: a deprecation warning, an error from pytest 10). ``getini`` then returns the
value as the file holds it, so the option's own check names it (a number is a fine ``gpuenv_perf_max_time``).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pytest_gpuenv.model import safe_repr


def _raw(config: pytest.Config, name: str) -> Any:
    # pytest 9.1+ keeps the file's values in _inicfg (ConfigValue objects) and deprecates inicfg
    cfg = getattr(config, "_inicfg", None)
    raw = (cfg if cfg is not None else config.inicfg).get(name)
    return getattr(raw, "value", raw)


def getini(config: pytest.Config, name: str, kind: str = "string") -> Any:
    """``config.getini(name)`` of an option of pytest type ``kind``, or the value as the file holds it where
    pytest would refuse its TOML type (a non-string value of a ``string`` option is never handed to pytest)."""
    if kind == "string":
        raw = _raw(config, name)
        if raw is not None and not isinstance(raw, str):
            return raw
    try:
        return config.getini(name)
    except (TypeError, ValueError, pytest.UsageError):
        # 9.2 reports a type mismatch as a UsageError; 9.1 lets shlex's ValueError ("No closing quotation")
        # of an ``args`` value out as it is
        return _raw(config, name)


def ini_where(config: pytest.Config, name: str) -> str:
    """``ini option NAME in FILE``, for messages."""
    return f"ini option {name}" + (f" in {config.inipath.name}" if config.inipath is not None else "")


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, text in ((list, "a list"), (dict, "a table"), ((int, float), "a number"),
                       ((datetime.date, datetime.time), "a date or time")):
        if isinstance(value, kind):
            return text
    return f"a {type(value).__name__}"


def path_text(value: Any, what: str, where: str) -> str:
    """``value`` when it can name a file: a string without a NUL character; else a UsageError naming the
    value, where it came from and what it is."""
    if isinstance(value, str) and "\0" not in value:
        return value
    problem = "holds a NUL character" if isinstance(value, str) else f"is {kind_of(value)}"
    raise pytest.UsageError(f"gpuenv: {what} {safe_repr(value, 200)} from {where} {problem}; expected a path")
