"""What each option's value may be: the parsers the option table (``session.options.OPTIONS``) names.

Each parser takes the option, the value as found (a command-line or environment text, or what the ini file
holds: a string, a list, or under pytest 9's ``[tool.pytest]`` any TOML value), where it came from, and the
config; it returns the setting or raises ``pytest.UsageError`` naming the value and its source.

The ini values as the file holds them: pytest converts an ini value to the option's registered type; where the
file holds another TOML type, pytest refuses it (``[tool.pytest]``: TypeError, 9.2: UsageError; a list given to a
``string`` option under ``[tool.pytest.ini_options]``: a deprecation warning, an error from pytest 10).
``getini`` then returns the value as the file holds it, so the option's own check names it (a number is a fine
``gpuenv_perf_max_time``).
"""

from __future__ import annotations

import datetime
import math
import os
import shlex
from typing import TYPE_CHECKING, Any, Callable, Optional

import pytest

from pytest_gpuenv.base.model import MAX_DEVICES, ArchPattern, parse_size, safe_repr
from pytest_gpuenv.base.paths import directory_problem, output_file_problem
from pytest_gpuenv.marks import skip_patterns as _skip_patterns
from pytest_gpuenv.session import hide

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.tolerance import Rule
    from pytest_gpuenv.session.options import Option

#: ``(option, value, where, config) -> setting``
Parser = Callable[["Option", Any, str, pytest.Config], Any]
#: the longest runtime probe, in seconds (the plugin option and the CLI's --probe-timeout)
PROBE_TIMEOUT_MAX = 3600


# ------------------------------------------------------------------------------------------ ini values
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


# ------------------------------------------------------------------------------------------ parsers
def _worker(config: pytest.Config) -> bool:
    """An xdist worker: output paths are checked where they are written (it may run on another host)."""
    return hasattr(config, "workerinput")


def split_list(value: Any) -> list[str]:
    """The items of a list-valued option: a list (an item may itself be comma-separated) or a text separated
    by commas, semicolons, spaces or newlines (command line, variables, pytest.ini)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [part for item in items for part in str(item).replace(";", ",").replace(",", " ").split()]


def _choose(value: Any, choices: tuple[str, ...], what: str, where: str) -> str:
    v = str(value).strip().lower()
    if v not in choices:
        raise pytest.UsageError(
            f"gpuenv: invalid {what} {safe_repr(value)} from {where}; expected one of: {', '.join(choices)}"
        )
    return v


def choice(choices: tuple[str, ...]) -> Parser:
    """One of ``choices`` (case and surrounding blanks ignored)."""
    return lambda opt, value, where, config: _choose(value, choices, f"{opt.flag} value", where)


def _number(value: Any, what: str, where: str, check: Callable[[float], bool], rule: str) -> float:
    """``float(value)`` when it is finite and passes ``check``; else a UsageError naming value and source."""
    try:
        v = float(value) if len(str(value)) <= 100 else math.nan
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or not check(v):
        raise pytest.UsageError(f"gpuenv: invalid {what} {safe_repr(value)} from {where}; expected {rule}")
    return v


def seconds(most: float) -> Parser:
    """Seconds in (0, most]."""
    return lambda opt, value, where, config: _number(value, f"{opt.flag} value", where, lambda x: 0 < x <= most,
                                                     f"seconds in (0, {most:g}]")


def probe_timeout_ok(secs: float) -> bool:
    """The probe timeout's bounds, for ``--gpuenv-probe-timeout`` and ``gpuenv info --probe-timeout``."""
    return 0 < secs <= PROBE_TIMEOUT_MAX


def flag(opt: Option, value: Any, where: str, config: pytest.Config) -> bool:
    return bool(value)


def items(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return list(value or [])


REQUIRE_MODES = ("off", "gpu", "cuda", "rocm")


def require(opt: Option, value: Any, where: str, config: pytest.Config) -> str:
    """``--gpuenv-require``: a mode (``REQUIRE_MODES``) or comma-separated capabilities (``bf16,fp8``)."""
    v = str(value).strip().lower()
    if v in REQUIRE_MODES:
        return v
    from pytest_gpuenv.base import capabilities  # boundary: GPU capabilities, only when some are required

    return capabilities.require_option(value, where, REQUIRE_MODES)


def worker_gpus(opt: Option, value: Any, where: str, config: pytest.Config) -> str:
    text = str(value).strip().lower()
    if text in ("auto", "off"):
        return text
    rule = f"auto, off or an integer from 1 to {MAX_DEVICES}"
    n = _number(text, f"{opt.flag} value", where, lambda x: 1 <= x <= MAX_DEVICES and x == int(x), rule)
    return str(int(n))


def json_path(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[str]:
    """The ``--gpuenv-json`` target (relative to where pytest was invoked): a regular file or a new one."""
    if not value:
        return None
    path = os.path.join(str(config.invocation_params.dir), path_text(value, opt.flag, where))
    problem = None if _worker(config) else output_file_problem(path)
    if problem:
        raise pytest.UsageError(f"gpuenv: {opt.flag} {safe_repr(value, 200)} from {where}: {problem}")
    return path


def perf_plot(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[str]:
    """The ``--gpuenv-perf-plot`` target, checked (matplotlib too) by the controller, which draws it."""
    if not value:
        return None
    path = path_text(value, opt.flag, where)
    if not _worker(config):
        from pytest_gpuenv.perf.plot import option_problem

        problem = option_problem(path, str(config.invocation_params.dir))
        if problem:
            raise pytest.UsageError(f"gpuenv: {opt.flag} {safe_repr(path, 200)} from {where}: {problem}")
    return path


def root(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[str]:
    if not value:
        return None
    if not os.path.isdir(path_text(value, opt.flag, where)):
        raise pytest.UsageError(f"gpuenv: {opt.flag} {safe_repr(value, 200)} from {where} is not a directory")
    return os.path.abspath(value)


def _directory(value: Any, what: str, where: str, create: bool, base: str) -> str:
    """An absolute folder path (relative to ``base``) that ``base.paths.directory_problem`` accepts."""
    path = os.path.join(base, os.path.expanduser(path_text(value, what, where)))
    problem = directory_problem(path, create)
    if problem:
        fix = "; give a directory of your own" if create and "of your own" not in problem else ""
        raise pytest.UsageError(f"gpuenv: {what} {safe_repr(value, 200)} from {where} {problem}{fix}")
    return os.path.abspath(path)


def cache_dir(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[str]:
    """A writable folder (made when missing), checked where the run starts, as ``--gpuenv-json``."""
    if not value:
        return None
    if _worker(config):
        return path_text(value, opt.flag, where)
    return _directory(value, opt.flag, where, True, str(config.invocation_params.dir))


def kernel_dirs(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    """Existing folders, relative to the ini file; default: 'kernels' under the rootdir, which may be missing.
    ``value``: pytest's list of paths, or a text split as a shell would (a string under ``[tool.pytest]``)."""
    try:
        found = shlex.split(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: {where} is {safe_repr(value, 200)}: {exc}") from None
    if found is None:
        found = []
    if not isinstance(found, (list, tuple)):
        raise pytest.UsageError(f"gpuenv: {safe_repr(found, 200)} from {where} is {kind_of(found)}; expected a list "
                                "of paths")
    if not found:
        return [str(config.rootpath / "kernels")]
    base = str(config.inipath.parent) if config.inipath is not None else str(config.invocation_params.dir)
    return [_directory(path_text(os.fspath(d) if isinstance(d, os.PathLike) else d, "kernel directory", where),
                       "kernel directory", where, False, base) for d in found]


def baselines(opt: Option, value: Any, where: str, config: pytest.Config) -> str:
    """The baselines file, relative to the rootdir; default ``.gpuenv/baselines.json`` there."""
    name = path_text(value, "baselines file", where) if value else os.path.join(".gpuenv", "baselines.json")
    return str(config.rootpath / name)


def arch_list(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[list[str]]:
    return parse_arch_list(value, where) if value else None


def parse_arch_list(value: Any, where: str) -> list[str]:
    archs = split_list(value)
    if not archs:
        raise pytest.UsageError(f"gpuenv: empty arch list {safe_repr(value)} from {where}")
    out = []
    for a in archs:
        try:
            pat = ArchPattern.parse(a)
        except ValueError as exc:
            raise pytest.UsageError(f"gpuenv: {exc} in compile archs from {where}") from None
        if any(c in pat.text for c in "*?[+"):
            raise pytest.UsageError(
                f"gpuenv: compile arch {safe_repr(a)} from {where} must be a concrete target such as gfx90a or sm_90"
            )
        out.append(pat.text)
    return out


def warp_sizes(opt: Option, value: Any, where: str, config: pytest.Config) -> list[int]:
    parts = split_list(value)
    bad = next((p for p in parts if p not in ("32", "64")), None)
    if bad is not None or not parts or len(parts) > 2 or len(set(parts)) != len(parts):
        raise pytest.UsageError(f"gpuenv: invalid {opt.name} {safe_repr(value if bad is None else bad)} from {where}; "
                                "expected 64, 32 or 64,32")
    return [int(p) for p in parts]


def skip_patterns(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return _skip_patterns.parse_extra(value, where) if value else []


def hide_modules(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return hide.parse_names(value, where) if value else []


def tolerances(opt: Option, value: Any, where: str, config: pytest.Config) -> list[Rule]:
    if not value:
        return []
    from pytest_gpuenv.base import tolerance  # boundary: tolerance profiles, only when the ini file gives some

    return tolerance.ini_rules(value, where)


def size(opt: Option, value: Any, where: str, config: pytest.Config) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: invalid {opt.flag} {safe_repr(value)} from {where}: {exc}") from None
