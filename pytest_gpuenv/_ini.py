"""The ini options as the file holds them, and the checks of the values that name files.

pytest 9 reads ``[tool.pytest]`` natively: ``config.getini`` refuses a list, number, boolean, table or
date given to a string option (TypeError; 9.2: UsageError), naming pytest's type rather than gpuenv's
rule. ``getini`` then returns the value as the file holds it, so the option's own check names it (a
number is a fine ``gpuenv_perf_max_time``). Under ``[tool.pytest.ini_options]`` a TOML array comes back
as a list and any other value as its text.
"""

from __future__ import annotations

import datetime
import os
import shlex
from typing import Any

import pytest

from pytest_gpuenv.model import safe_repr


def _raw(config: pytest.Config, name: str) -> Any:
    # pytest 9.1+ keeps the file's values in _inicfg (ConfigValue objects) and deprecates inicfg
    cfg = getattr(config, "_inicfg", None)
    raw = (cfg if cfg is not None else config.inicfg).get(name)
    return getattr(raw, "value", raw)


def getini(config: pytest.Config, name: str) -> Any:
    """``config.getini(name)``, or the value as the file holds it where pytest refuses its TOML type."""
    try:
        return config.getini(name)
    except (TypeError, pytest.UsageError):  # pytest 9.2 reports the mismatch as a UsageError
        return _raw(config, name)


def ini_where(config: pytest.Config, name: str) -> str:
    """``ini option NAME in FILE``, for messages."""
    return f"ini option {name}" + (f" in {config.inipath.name}" if config.inipath is not None else "")


def _kind(value: Any) -> str:
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
    problem = "holds a NUL character" if isinstance(value, str) else f"is {_kind(value)}"
    raise pytest.UsageError(f"gpuenv: {what} {safe_repr(value, 200)} from {where} {problem}; expected a path")


def ini_path_list(config: pytest.Config, name: str, what: str) -> list[str]:
    """A ``paths`` ini option's items (relative ones not yet resolved): a TOML array of paths, or text split
    as a shell would (pytest.ini, and a string under ``[tool.pytest]``). A UsageError naming the option, the
    file and the value for anything else, or for text a shell cannot split (``'unclosed``)."""
    where = ini_where(config, name)
    try:
        value = getini(config, name)  # (under ini_options pytest splits the text itself)
        items = shlex.split(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: {where} is {safe_repr(_raw(config, name), 200)}: {exc}") from None
    if not isinstance(items, list):
        raise pytest.UsageError(f"gpuenv: {safe_repr(items, 200)} from {where} is {_kind(items)}; expected a list "
                                "of paths")
    return [path_text(os.fspath(p) if isinstance(p, os.PathLike) else p, what, where) for p in items]
