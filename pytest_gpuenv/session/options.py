"""Options: one ``gpuenv`` group, declared once in ``OPTIONS``, which drives the command-line options, their ini
twins and the resolution (``resolve``); and ``--dist gpu``, the choice added to pytest-xdist's ``--dist``
(``DistChoice``), with ``--gpuenv-dist`` checked where it cannot take effect (``check_dist_request``).

Each row names the option (``gpuenv_backend``: the dest, the ini name and ``--gpuenv-backend``), its
environment variable, its ini type, metavar, help, default (as a user would write it) and the parser that
turns a value into the setting (a parser below). Lookup order: command line, then environment variable
(an empty one counts as unset), then ini file, then the default (as pytest-timeout does). A bad value raises
``pytest.UsageError`` naming the value and where it came from. List options are declared with a list ini type
(``args``, ``linelist``, ``paths``), so a TOML array is taken as it is.

Each parser takes the option, the value as found (a command-line or environment text, or what the ini file
holds: a string, a list, or under pytest 9's ``[tool.pytest]`` any TOML value), where it came from, and the
config; it returns the setting or raises ``pytest.UsageError`` naming the value and its source.

The ini values as the file holds them: pytest converts an ini value to the option's registered type; where the
file holds another TOML type, pytest refuses it (``[tool.pytest]``: TypeError, 9.2: UsageError; a list given to a
``string`` option under ``[tool.pytest.ini_options]``: a deprecation warning, an error from pytest 10).
``getini`` then returns the value as the file holds it, so the option's own check names it (a number is a fine
``gpuenv_perf_max_time``).
"""

# (no PEP 563 here: typing.NamedTuple would compile each field's annotation text at import)
import copy
import datetime
import math
import os
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.model import (
    BACKEND_CHOICES,
    LEAK_MODES,
    MAX_DEVICES,
    PERF_MODES,
    ArchPattern,
    parse_size,
    safe_repr,
)
from pytest_gpuenv.base.paths import directory_problem, output_file_problem
from pytest_gpuenv.detect import PROBE_TIMEOUT_MAX
from pytest_gpuenv.marks.skip_patterns import parse_extra
from pytest_gpuenv.session import hide

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.tolerance import Rule

#: ``(option, value, where, config) -> setting``
Parser = Callable[["Option", Any, str, pytest.Config], Any]

DEVICE_MODES = ("best", "all", "gpu", "cpu")
#: the shortest ``--gpuenv-perf-max-time``: below a millisecond no measurement takes its first sample
PERF_MIN_TIME = 1e-3
PROBE_MODES = ("auto", "always", "never")
KERNEL_MODES = ("run", "compile", "off")
#: ``--gpuenv-sanitize`` (``guards.sanitize``): off, or the compute-sanitizer tool selected tests run under
SANITIZE_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
SANITIZE_MODES = ("off", *SANITIZE_TOOLS)
#: what a finding in a kernel the test did not build (torch's, cuBLAS's) does
SANITIZE_FOREIGN = ("fail", "show", "hide")
#: which tests ``--gpuenv-sanitize`` runs under the tool (besides those marked ``gpuenv_sanitize``)
SANITIZE_SELECT = ("kernels", "all")
#: set in the child process a sanitizer run starts for a test (``guards.sanitize``): a JSON object
#: ``{"out": results file, "tool": tool or "plain", "route": "cuda"|"rocm"}``
SANITIZE_CHILD_VAR = "GPUENV_SANITIZE_CHILD"


class Option(NamedTuple):
    """One option: ``name`` is the command-line dest and the ini name; ``ini``: its pytest ini type (None:
    command line only); ``cli``: whether it has a command-line flag (``argparse``: more ``addoption``
    arguments); ``attr``: its ``Settings`` field (default: ``name`` without ``gpuenv_``)."""

    name: str
    help: str
    parse: Parser
    default: Any = None
    env: Optional[str] = None
    metavar: Optional[str] = None
    ini: Optional[str] = "string"
    cli: bool = True
    argparse: Optional[dict[str, Any]] = None
    attr: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def setting(self) -> str:
        return self.attr or self.name[len("gpuenv_"):]

    @property
    def help_text(self) -> str:
        """``help`` and the default, when it is one value a user could write."""
        shown = isinstance(self.default, str) and self.default
        return f"{self.help} Default: {self.default}." if shown else self.help




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


@dataclass(frozen=True)
class Choice:
    """The parser of an option whose value is one of ``choices`` (case and surrounding blanks ignored)."""

    choices: tuple[str, ...]

    def __call__(self, opt: Option, value: Any, where: str, config: pytest.Config) -> str:
        return _choose(value, self.choices, f"{opt.flag} value", where)


def choice(choices: tuple[str, ...]) -> Parser:
    """One of ``choices`` (case and surrounding blanks ignored)."""
    return Choice(choices)


def _number(value: Any, what: str, where: str, check: Callable[[float], bool], rule: str) -> float:
    """``float(value)`` when it is finite and passes ``check``; else a UsageError naming value and source."""
    try:
        v = float(value) if len(str(value)) <= 100 else math.nan
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or not check(v):
        raise pytest.UsageError(f"gpuenv: invalid {what} {safe_repr(value)} from {where}; expected {rule}")
    return v


def seconds(most: float, least: float = 0.0) -> Parser:
    """Seconds in (0, most], or in [least, most] when ``least`` is given (a time too short to do anything in)."""
    if least:
        return lambda opt, value, where, config: _number(value, f"{opt.flag} value", where,
                                                         lambda x: least <= x <= most, f"seconds in [{least:g}, {most:g}]")
    return lambda opt, value, where, config: _number(value, f"{opt.flag} value", where, lambda x: 0 < x <= most,
                                                     f"seconds in (0, {most:g}]")


def flag(opt: Option, value: Any, where: str, config: pytest.Config) -> bool:
    return bool(value)


def items(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return list(value or [])


REQUIRE_MODES = ("off", "gpu", "cuda", "rocm")


#: ``--gpuenv-require devices>=N``: the run needs at least N GPUs
REQUIRE_DEVICES = "devices>="


def require(opt: Option, value: Any, where: str, config: pytest.Config) -> str:
    """``--gpuenv-require``: a mode (``REQUIRE_MODES``), ``devices>=N`` or comma-separated capabilities
    (``bf16,fp8``)."""
    v = str(value).strip().lower()
    if v in REQUIRE_MODES:
        return v
    if v.replace(" ", "").startswith(REQUIRE_DEVICES):
        rule = f"devices>=N with N from 1 to {MAX_DEVICES}"
        n = _number(v.replace(" ", "")[len(REQUIRE_DEVICES):], f"{opt.flag} value", where,
                    lambda x: 1 <= x <= MAX_DEVICES and x == int(x), rule)
        return f"{REQUIRE_DEVICES}{int(n)}"
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
    return os.path.abspath(str(value))


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


def rocm_version(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[str]:
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not re.match(r"^\d{1,2}(?:\.\d+){0,2}$", text):
        raise pytest.UsageError(f"gpuenv: invalid {opt.name} {safe_repr(value)} from {where}; expected a ROCm "
                                "version such as 6.4 or 7.0")
    return text


def skip_patterns(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return parse_extra(value, where) if value else []


def hide_modules(opt: Option, value: Any, where: str, config: pytest.Config) -> list[str]:
    return hide.parse_names(value, where) if value else []


def tolerances(opt: Option, value: Any, where: str, config: pytest.Config) -> list["Rule"]:
    if not value:
        return []
    from pytest_gpuenv.base import tolerance  # boundary: tolerance profiles, only when the ini file gives some

    return tolerance.ini_rules(value, where)


class QuarantineSource(NamedTuple):
    """Where the quarantine file is: the value as given, where it came from, and the folder a relative path is
    relative to. ``session.quarantine.load`` reads and checks it when the plugin configures."""

    value: Any
    where: str
    base: str


def quarantine(opt: Option, value: Any, where: str, config: pytest.Config) -> Optional[QuarantineSource]:
    """The quarantine file (relative to the ini file's folder when the ini file names it, else to where pytest was
    invoked); None when unset or ``off``."""
    if not value or (isinstance(value, str) and value.strip().lower() == "off"):
        return None
    ini = where.startswith("ini") and config.inipath is not None
    return QuarantineSource(value, where, str(config.inipath.parent) if ini and config.inipath else
                            str(config.invocation_params.dir))


def size(opt: Option, value: Any, where: str, config: pytest.Config) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: invalid {opt.flag} {safe_repr(value)} from {where}: {exc}") from None


def claim_size(opt: Option, value: Any, where: str, config: pytest.Config) -> int:
    """A size as ``size`` takes it, or 0."""
    return 0 if str(value).strip() in ("0", "0B") else size(opt, value, where, config)


def _modes(choices: tuple[str, ...]) -> str:
    return "|".join(choices)


OPTIONS = (
    Option("gpuenv_backend", (
        "where GPU tests run: auto (detect), cpu (behave as a CPU-only runner: GPU tests skip naming this option, "
        "GPUs are hidden from frameworks the tests import, GPU-only packages such as cupy cannot be imported), "
        "cuda or rocm (only that backend's GPUs count: tests that need the other one skip; to stop the run "
        "instead, --gpuenv-require)."),
        choice(BACKEND_CHOICES), "auto", "GPUENV_BACKEND", _modes(BACKEND_CHOICES)),
    Option("gpuenv_devices", (
        "what torch_device is parametrized over: best (the GPU when one is usable, else the CPU), all "
        "(the CPU and every GPU), gpu (every GPU), cpu."),
        choice(DEVICE_MODES), "best", "GPUENV_DEVICES", _modes(DEVICE_MODES)),
    Option("gpuenv_perf", (
        "how performance assertions act: check (fail on FAIL, warn on INCONCLUSIVE), strict (fail on both), "
        "warn (report only), off (skip perf tests), record (store baselines)."),
        choice(PERF_MODES), "check", "GPUENV_PERF", _modes(PERF_MODES)),
    Option("gpuenv_json", (
        "write the run to this JSON file: the environment, every performance measurement, every hardware skip "
        "(category and cause), the outcomes and the tests whose kernels were only compile-checked."),
        json_path, None, "GPUENV_JSON", "PATH", attr="json_path"),
    Option("gpuenv_root", (
        "read /proc, /sys, /dev, /opt, /usr (and every path the detection follows) under this folder "
        "instead of /: check a mounted image or a saved file tree. No library is loaded, no probe runs."),
        root, None, "GPUENV_ROOT", "PATH"),
    Option("gpuenv_probe", (
        "runtime probe in a subprocess: auto (only where files cannot list devices: WSL 2, Windows), "
        "always, never."),
        choice(PROBE_MODES), "auto", "GPUENV_PROBE", _modes(PROBE_MODES)),
    Option("gpuenv_probe_timeout", "seconds the runtime probe may take before it is abandoned.",
           seconds(PROBE_TIMEOUT_MAX), "20", "GPUENV_PROBE_TIMEOUT", "SECONDS"),
    Option("gpuenv_cache_dir",
           "directory of the compiled-kernel cache (default: a per-user cache directory, mode 0700).",
           cache_dir, None, "GPUENV_CACHE_DIR", "PATH"),
    Option("gpuenv_compile_archs", (
        "arches hip_kernel compiles for when no GPU can launch (e.g. gfx90a,gfx1030,sm_90; in pyproject.toml "
        "a list); default: what each installed compiler supports of gfx90a, gfx942, gfx1030, gfx1100, sm_80, "
        "sm_90."),
        arch_list, None, "GPUENV_COMPILE_ARCHS", "LIST", ini="args"),
    Option("gpuenv_perf_max_time", "time cap in seconds for one performance measurement.",
           seconds(600, least=PERF_MIN_TIME), "2", "GPUENV_PERF_MAX_TIME", "SECONDS"),
    Option("gpuenv_perf_plot",
           "draw every measurement's samples and budget, one panel per test, into this PNG (needs matplotlib).",
           perf_plot, None, "GPUENV_PERF_PLOT", "PATH"),
    Option("gpuenv_worker_gpus", (
        "with pytest-xdist: auto (spread workers over the visible GPUs), off (leave the visible-devices "
        "variables alone), or N (give each worker N GPUs)."),
        worker_gpus, "auto", "GPUENV_WORKER_GPUS", "auto|off|N"),
    Option("gpuenv_kernels", (
        "what hip_kernel does without a usable GPU: run (on the CPU executor, where a C++ compiler exists), "
        "compile (compile-check, then skip) or off (skip)."),
        choice(KERNEL_MODES), "run", "GPUENV_KERNELS", _modes(KERNEL_MODES)),
    Option("gpuenv_cpu_warp_sizes", "warp sizes hip_kernel tests run at on the CPU executor: 64, 32 or both.",
           warp_sizes, "64,32", "GPUENV_CPU_WARP_SIZES", ini="args", cli=False),
    Option("gpuenv_cpu_rocm_version", (
        "the ROCm version CPU-executed kernels stand for where no ROCm is installed (e.g. 6.4: warpSize is a "
        "constant expression before 7.0); default: the installed ROCm's, else 7.0."),
           rocm_version, None, "GPUENV_CPU_ROCM_VERSION", "VERSION", cli=False),
    Option("gpuenv_require", (
        "stop before any test, with exit code 4 and the reason, unless this backend is usable: gpu (any), cuda, "
        "rocm, devices>=N (at least N GPUs), or GPU capabilities (e.g. bf16,fp8; see requires_capability); off. "
        "Not checked with --collect-only or --fixtures."),
        require, "off", "GPUENV_REQUIRE", _modes(REQUIRE_MODES)),
    Option("gpuenv_plan", "with --collect-only: print which GPU-marked tests would run or skip on each runner profile.",
           flag, False, ini=None, argparse={"action": "store_true"}),
    Option("gpuenv_dist", (
        "pytest-xdist: send each test only to workers whose host can run it, balanced as --dist load (the same "
        "as --dist gpu); a test no host can run is skipped once, naming each host."),
        flag, False, ini=None, argparse={"action": "store_true"}),
    Option("gpuenv_plan_profile", (
        "add a runner profile to --gpuenv-plan: a root folder, a spec such as rocm:gfx90a:4x64GiB, "
        "cuda:sm_90:1x141GB, cpu, or @FILE.json (a runner's `gpuenv info --json`), written --gpuenv-plan-profile=@FILE.json; repeatable."),
        items, (), metavar="SPEC", ini=None, argparse={"action": "append"}, attr="plan_profiles"),
    Option("gpuenv_kernel_dirs", (
        "directories where relative kernel paths are looked up first; then the test file's folder and its "
        "kernels/, and each parent's up to the rootdir ('kernels' under the rootdir, the default, last)."),
        kernel_dirs, (), ini="paths", cli=False),
    Option("gpuenv_baselines", "performance baselines file (default: .gpuenv/baselines.json under the rootdir).",
           baselines, None, cli=False),
    Option("gpuenv_skip_patterns", (
        "regular expressions (one per line) that mark a skip reason of the suite's own as a hardware skip, "
        "besides the built-in table (GPU, CUDA, ROCm, HIP, accelerator, device count, GPU memory ...)."),
        skip_patterns, (), ini="linelist", cli=False),
    Option("gpuenv_hide_modules", (
        "more GPU-only packages that --gpuenv-backend=cpu hides from imports (besides cupy, cupyx, pycuda, "
        "the RAPIDS packages ...)."),
        hide_modules, (), ini="linelist", cli=False),
    Option("gpuenv_tolerances",
           "gpu_assert_close profiles, one per line: 'float16 [gfx9*|amd]: rtol=2e-3 atol=1e-4'; later win.",
           tolerances, (), ini="linelist", cli=False),
    Option("gpuenv_leak_check", (
        "check each test for GPU memory it leaves allocated (torch's allocator and the driver): fail "
        "(the bare option) or warn."),
        choice(LEAK_MODES), "off", metavar="fail|warn|off", argparse={"nargs": "?", "const": "fail"}),
    # a test process's own CUDA/HIP context and library workspaces, with room: docs/how-to/share-gpus.md
    Option("gpuenv_default_claim", (
        "--dist gpu: the GPU memory a test that declares none (no requires_memory) holds while it runs, on "
        "each of its GPUs; 0 counts such tests as using none."),
        claim_size, "1GiB", "GPUENV_DEFAULT_CLAIM", "SIZE"),
    # above what first uses of cuBLAS and cuDNN take outside torch (figures: docs/how-to/adopt.md)
    Option("gpuenv_leak_threshold", "growth of device memory outside torch that counts as a leak.",
           size, "512MiB", metavar="SIZE"),
    Option("gpuenv_quarantine", (
        "a TOML file of [[quarantine]] entries (tests: node-id globs; when: vendor, arch, cuda, rocm, driver, torch, "
        "host; action: skip or xfail; reason; link) applied at collection and counted apart; off: none."),
        quarantine, None, "GPUENV_QUARANTINE", "FILE"),
    Option("gpuenv_quarantine_run",
           "run quarantined tests as non-strict xfails (skip entries too), to find the ones that pass again.",
           flag, False, ini=None, argparse={"action": "store_true"}),
    Option("gpuenv_sanitize", (
        "run the selected tests (see --gpuenv-sanitize-select; -k and -m narrow them) one by one in a child "
        "process under this compute-sanitizer tool (NVIDIA), or with hip_kernel built with AddressSanitizer "
        "(memcheck on gfx90a/gfx942/gfx950); a finding fails its test. On a CPU-only runner: the CPU executor's "
        "checked mode, compile_kernel(check=False) included."),
        choice(SANITIZE_MODES), "off", "GPUENV_SANITIZE", _modes(SANITIZE_MODES)),
    Option("gpuenv_sanitize_select", (
        "which tests --gpuenv-sanitize runs under the tool: kernels (those using hip_kernel) or all; tests "
        "marked gpuenv_sanitize always are."),
        choice(SANITIZE_SELECT), "kernels", "GPUENV_SANITIZE_SELECT", _modes(SANITIZE_SELECT)),
    Option("gpuenv_sanitize_foreign", (
        "what a finding in a kernel the test did not build with hip_kernel (torch's, cuBLAS's) does: fail the "
        "test, show it (the test's verdict stays), or hide it."),
        choice(SANITIZE_FOREIGN), "fail", "GPUENV_SANITIZE_FOREIGN", _modes(SANITIZE_FOREIGN)),
    Option("gpuenv_sanitize_timeout", "seconds one test may take under the sanitizer before its child is ended "
           "and the test fails.", seconds(24 * 3600), "600", "GPUENV_SANITIZE_TIMEOUT", "SECONDS"),
)


class Settings(NamedTuple):
    """The resolved options (``resolve``), one field per row of ``OPTIONS``. Values carry no source: a bad
    value is reported, naming where it came from, while resolving."""

    backend: str
    devices: str
    perf: str
    json_path: Optional[str]
    root: Optional[str]
    probe: str
    probe_timeout: float
    cache_dir: Optional[str]
    compile_archs: Optional[list[str]]
    perf_max_time: float
    perf_plot: Optional[str]
    worker_gpus: str
    kernels: str
    cpu_warp_sizes: list[int]
    cpu_rocm_version: Optional[str]
    require: str
    plan: bool
    dist: bool
    plan_profiles: list[str]
    kernel_dirs: list[str]
    baselines: str
    skip_patterns: list[str]
    hide_modules: list[str]
    tolerances: list[Any]
    leak_check: str
    default_claim: int
    leak_threshold: int
    quarantine: Optional[QuarantineSource]
    quarantine_run: bool
    sanitize: str
    sanitize_select: str
    sanitize_foreign: str
    sanitize_timeout: float


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuenv", "GPU environment (pytest-gpuenv)")
    for opt in OPTIONS:
        if opt.cli:
            metavar = {"metavar": opt.metavar} if opt.metavar else {}
            group.addoption(opt.flag, dest=opt.name, help=opt.help_text, **metavar, **(opt.argparse or {}))
        if opt.ini is not None:
            parser.addini(opt.name, opt.help_text, type=opt.ini, default=opt.default)  # type: ignore[arg-type]


def _unset(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, (list, tuple)) and not value)


def lookup(config: pytest.Config, opt: Option) -> tuple[Any, str]:
    """``(value, where)`` of an option: command line, environment, ini, default."""
    value = config.getoption(opt.name, default=None) if opt.cli else None
    if value is not None:
        return value, f"command line ({opt.flag})"
    if opt.env and os.environ.get(opt.env):
        return os.environ[opt.env], f"environment variable {opt.env}"
    if opt.ini is not None:
        value = getini(config, opt.name, opt.ini)
        if not _unset(value):
            return value, ini_where(config, opt.name)
    return opt.default, "default"


def resolve(config: pytest.Config) -> Settings:
    """Read every option once. Raises ``pytest.UsageError`` naming the bad value and its source."""
    return Settings(**{opt.setting: opt.parse(opt, *lookup(config, opt), config) for opt in OPTIONS})


def defaults(config: pytest.Config) -> Settings:
    """Every option at its default (a run where the plugin is not configured)."""
    return Settings(**{opt.setting: opt.parse(opt, opt.default, "default", config) for opt in OPTIONS})


def optional_values(opt: Option) -> Optional[tuple[str, ...]]:
    """For an option whose value is optional (argparse ``nargs="?"``, the bare flag meaning its ``const``): the
    values its bare flag takes from the next argument (those of its ``Choice``); None for any other option."""
    if not opt.cli or (opt.argparse or {}).get("nargs") != "?":
        return None
    return opt.parse.choices if isinstance(opt.parse, Choice) else ()


def takes_next(values: tuple[str, ...], following: str) -> bool:
    """Whether the bare flag of an option whose value is optional (``optional_values``: ``values``) takes the
    argument ``following`` it as its value: only one of its values, else it stands alone."""
    return following.strip().lower() in values


def _write_bare_flags(args: list[str]) -> bool:
    """Write each bare flag of an option whose value is optional as ``FLAG=VALUE``, in place; True if any.
    argparse gives such a flag the next argument that does not start with ``-``, a test path included
    (``--gpuenv-leak-check tests/``); here it takes the next argument only when that is one of its values
    (``--gpuenv-leak-check warn``), else it stands alone and means its ``const``. Arguments after ``--`` are
    left as they are."""
    optional = {opt.flag: (values, (opt.argparse or {}).get("const"))
                for opt in OPTIONS if (values := optional_values(opt)) is not None}
    changed, i = False, 0
    while i < len(args) and args[i] != "--":
        if args[i] in optional:
            values, const = optional[args[i]]
            taken = i + 1 < len(args) and takes_next(values, str(args[i + 1]))
            args[i:i + 1 + taken] = [f"{args[i]}={args[i + 1] if taken else const}"]
            changed = True
        i += 1
    return changed


def settle_optional_values(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Keep a test path after a bare flag whose value is optional (``_write_bare_flags``), before pytest
    finds the initial conftest files from the paths it has parsed so far (``pytest_load_initial_conftests``
    hands over ``args``, the list pytest then parses)."""
    if not _write_bare_flags(args):
        return
    fresh = parser.parse_known_args(args, namespace=copy.copy(early_config.option))
    known = early_config.known_args_namespace
    known.file_or_dir = fresh.file_or_dir  # pytest's dest of the test paths
    for opt in OPTIONS:
        if optional_values(opt) is not None:
            setattr(known, opt.name, getattr(fresh, opt.name))


def rootdir_candidates(config: pytest.Config) -> list[tuple[str, str]]:
    """``(flag, value)`` of each option given as ``--flag VALUE`` (the space form) whose value is an existing path.
    pytest chooses the rootdir before it knows the plugin's options, so it takes such a value for a test path
    among the arguments (the ``=`` form is one argument, which it leaves); none where ``--rootdir`` or ``-c``
    chose it."""
    if config.getoption("rootdir", None) or config.getoption("inifilename", None):
        return []
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + [str(a) for a in config.invocation_params.args]
    takes_value = {opt.flag: optional_values(opt) for opt in OPTIONS
                   if opt.cli and (opt.argparse or {}).get("action") not in ("store_true", "store_false")}
    base = config.invocation_params.dir

    def taken(flag: str, value: str) -> bool:  # the value is the option's (``_write_bare_flags``)
        values = takes_value[flag]
        return not value.startswith("-") if values is None else takes_next(values, value)

    return [(flag, value) for flag, value in zip(args, args[1:])
            if flag in takes_value and taken(flag, value) and (base / value).exists()]


def warn_rootdir_candidates(config: pytest.Config) -> None:
    """A warning for each option value that became one of pytest's rootdir candidates (``rootdir_candidates``)."""
    for flag, value in rootdir_candidates(config):
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"gpuenv: {flag} {value}: pytest took this existing path for a test path when it chose the rootdir "
            f"({config.rootpath}), before the plugin's options were known; write {flag}={value}"), stacklevel=2)


# ------------------------------------------------------------------------------------------ --dist gpu
#: the ``--dist`` value pytest-xdist takes for ``--gpuenv-dist`` (routed by ``dist.routing``)
DIST = "gpu"


class DistChoice:
    """Adds ``gpu`` to xdist's ``--dist`` choices once xdist has registered its options."""

    def __init__(self, parser: pytest.Parser) -> None:
        self.parser = parser

    def pytest_plugin_registered(self, plugin: Any, plugin_name: str, manager: Any) -> None:
        if plugin_name != "xdist":
            return
        for option in self.parser.getgroup("xdist").options:
            attrs = option.attrs()
            if "--dist" in option.names() and isinstance(attrs.get("choices"), list) and DIST not in attrs["choices"]:
                attrs["choices"] = [*attrs["choices"], DIST]


def check_dist_request(config: pytest.Config) -> None:
    """``--gpuenv-dist`` where it cannot take effect is a usage error, not a run quietly scheduled otherwise:
    without pytest-xdist (not installed, or ``-p no:xdist``), or beside another explicit ``--dist`` mode."""
    if not config.pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError("gpuenv: --gpuenv-dist from command line needs pytest-xdist, which is not "
                                "loaded here (not installed, or disabled with -p no:xdist)")
    mode = config.getoption("dist", None)
    if mode not in (None, "no", "load", DIST):  # load: what -n alone sets
        raise pytest.UsageError(f"gpuenv: --gpuenv-dist from command line conflicts with --dist {mode}: "
                                f"give one of them (--gpuenv-dist is --dist {DIST})")
