"""Options: one ``gpuenv`` group, each long option with an ini twin and (where useful) an env variable.

Lookup order: command line, then environment variable, then ini file, then the default (as
pytest-timeout does). A bad value raises ``pytest.UsageError`` naming the value and where it came
from.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Optional

import pytest

from pytest_gpuenv._ini import getini, ini_path_list, ini_where, path_text
from pytest_gpuenv.model import BACKEND_CHOICES, MAX_DEVICES, safe_repr

BACKEND_DESC = (
    "where GPU tests run: auto (detect), cpu (behave as a CPU-only runner: GPU tests skip naming this option, "
    "GPUs are hidden from frameworks the tests import, GPU-only packages such as cupy cannot be imported), "
    "cuda or rocm (only that backend's GPUs count: tests that need the other one skip; to stop the run "
    "instead, --gpuenv-require). Default: auto."
)
DEVICES_DESC = (
    "what torch_device is parametrized over: best (the GPU when one is usable, else the CPU), all "
    "(the CPU and every GPU), gpu (every GPU), cpu. Default: best."
)
PERF_DESC = (
    "how performance assertions act: check (fail on FAIL, warn on INCONCLUSIVE; default), strict "
    "(fail on both), warn (report only), off (skip perf tests), record (store baselines)."
)
JSON_DESC = (
    "write the run to this JSON file: the environment, every performance measurement, every hardware skip "
    "(category and cause), the outcomes and the tests whose kernels were only compile-checked."
)
ROOT_DESC = (
    "read /proc, /sys, /dev, /opt, /usr (and every path the detection follows) under this folder "
    "instead of /: check a mounted image or a saved file tree. No library is loaded, no probe runs."
)
PROBE_DESC = (
    "runtime probe in a subprocess: auto (only where files cannot list devices: WSL 2, Windows), "
    "always, never. Default: auto."
)
PROBE_TIMEOUT_DESC = "seconds the runtime probe may take before it is abandoned (default 20)."
CACHE_DIR_DESC = "directory of the compiled-kernel cache (default: a per-user cache directory, mode 0700)."
COMPILE_ARCHS_DESC = (
    "comma-separated arches hip_kernel compiles for when no GPU can launch (e.g. gfx90a,gfx1030,sm_90); "
    "default: what each installed compiler supports of gfx90a, gfx942, gfx1030, gfx1100, sm_80, sm_90."
)
KERNEL_DIRS_DESC = (
    "directories where relative kernel paths are looked up first; then the test file's folder and its "
    "kernels/, and each parent's up to the rootdir ('kernels' under the rootdir, the default, last)."
)
BASELINES_DESC = "performance baselines file (default: .gpuenv/baselines.json under the rootdir)."
PERF_MAX_TIME_DESC = "time cap in seconds for one performance measurement (default 2)."
PERF_PLOT_DESC = "draw every measurement's samples and budget, one panel per test, into this PNG (needs matplotlib)."
WORKER_GPUS_DESC = (
    "with pytest-xdist: auto (spread workers over the visible GPUs), off (leave the visible-devices "
    "variables alone), or N (give each worker N GPUs). Default: auto."
)
DIST_DESC = ("pytest-xdist: send each test only to workers whose host can run it, balanced as --dist load "
             "(the same as --dist gpu); a test no host can run is skipped once, naming each host.")
PLAN_DESC = "with --collect-only: print which GPU-marked tests would run or skip on each runner profile."
PLAN_PROFILE_DESC = (
    "add a runner profile to --gpuenv-plan: a root folder, a spec such as rocm:gfx90a:4x64GiB, "
    "cuda:sm_90:1x141GB, cpu, or @FILE.json (a runner's `gpuenv info --json`); repeatable."
)
REQUIRE_DESC = (
    "stop before any test, with exit code 4 and the reason, unless this backend is usable: gpu (any), cuda, "
    "rocm, or GPU capabilities (e.g. bf16,fp8; see requires_capability); off (default). Not checked with "
    "--collect-only or --fixtures."
)
SKIP_PATTERNS_DESC = (
    "regular expressions (one per line) that mark a skip reason of the suite's own as a hardware skip, "
    "besides the built-in table (GPU, CUDA, ROCm, HIP, accelerator, device count, GPU memory ...)."
)
HIDE_MODULES_DESC = (
    "more GPU-only packages that --gpuenv-backend=cpu hides from imports (besides cupy, cupyx, pycuda, "
    "the RAPIDS packages ...)."
)
REQUIRE_MODES = ("off", "gpu", "cuda", "rocm")
TOLERANCES_DESC = "gpu_assert_close profiles, one per line: 'float16 [gfx9*|amd]: rtol=2e-3 atol=1e-4'; later win."

KERNELS_DESC = (
    "what hip_kernel does without a usable GPU: run (on the CPU executor, the default where a C++ compiler "
    "exists), compile (compile-check, then skip) or off (skip)."
)
CPU_WARP_SIZES_DESC = "warp sizes hip_kernel tests run at on the CPU executor, e.g. 64,32 (default: 64,32)."
KERNEL_MODES = ("run", "compile", "off")
DEVICE_MODES = ("best", "all", "gpu", "cpu")
PERF_MODES = ("check", "strict", "warn", "off", "record")
PROBE_MODES = ("auto", "always", "never")
#: the longest runtime probe, in seconds (the plugin option and the CLI's --probe-timeout)
PROBE_TIMEOUT_MAX = 3600


class Settings:
    """The resolved options (``resolve``). Values carry no source: a bad value is reported, naming where it
    came from, while resolving. A plain class (a dataclass would cost every run ~0.7 ms to create): the
    defaults of single values are class attributes; each list is the instance's own."""

    backend: str = "auto"
    devices: str = "best"
    perf: str = "check"
    json_path: Optional[str] = None
    root: Optional[str] = None
    probe: str = "auto"
    probe_timeout: float = 20.0
    cache_dir: Optional[str] = None
    compile_archs: Optional[list[str]] = None
    baselines: Optional[str] = None
    perf_max_time: float = 2.0
    perf_plot: Optional[str] = None
    worker_gpus: str = "auto"
    plan: bool = False
    dist: bool = False
    kernels: str = "run"
    require: str = "off"

    def __init__(self) -> None:
        self.kernel_dirs: list[str] = []
        self.plan_profiles: list[str] = []
        self.cpu_warp_sizes: list[int] = [64, 32]
        self.skip_patterns: list[str] = []
        self.hide_modules: list[str] = []
        self.tolerances: list[Any] = []


#: the options with a plain value: (name, environment variable, help, default); ``name`` is both the
#: command-line option's dest and its ini twin (``gpuenv_backend`` for ``--gpuenv-backend``)
_SIMPLE = [
    ("gpuenv_backend", "GPUENV_BACKEND", BACKEND_DESC, "auto"),
    ("gpuenv_devices", "GPUENV_DEVICES", DEVICES_DESC, "best"),
    ("gpuenv_perf", "GPUENV_PERF", PERF_DESC, "check"),
    ("gpuenv_json", "GPUENV_JSON", JSON_DESC, None),
    ("gpuenv_root", "GPUENV_ROOT", ROOT_DESC, None),
    ("gpuenv_probe", "GPUENV_PROBE", PROBE_DESC, "auto"),
    ("gpuenv_probe_timeout", "GPUENV_PROBE_TIMEOUT", PROBE_TIMEOUT_DESC, "20"),
    ("gpuenv_cache_dir", "GPUENV_CACHE_DIR", CACHE_DIR_DESC, None),
    ("gpuenv_compile_archs", "GPUENV_COMPILE_ARCHS", COMPILE_ARCHS_DESC, None),
    ("gpuenv_perf_max_time", "GPUENV_PERF_MAX_TIME", PERF_MAX_TIME_DESC, "2"),
    ("gpuenv_perf_plot", "GPUENV_PERF_PLOT", PERF_PLOT_DESC, None),
    ("gpuenv_worker_gpus", "GPUENV_WORKER_GPUS", WORKER_GPUS_DESC, "auto"),
    ("gpuenv_kernels", "GPUENV_KERNELS", KERNELS_DESC, "run"),
    ("gpuenv_cpu_warp_sizes", "GPUENV_CPU_WARP_SIZES", CPU_WARP_SIZES_DESC, "64,32"),
    ("gpuenv_require", "GPUENV_REQUIRE", REQUIRE_DESC, "off"),
]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuenv", "GPU environment (pytest-gpuenv)")
    group.addoption("--gpuenv-backend", dest="gpuenv_backend", metavar="auto|cpu|cuda|rocm", help=BACKEND_DESC)
    group.addoption("--gpuenv-devices", dest="gpuenv_devices", metavar="best|all|gpu|cpu", help=DEVICES_DESC)
    group.addoption(
        "--gpuenv-perf", dest="gpuenv_perf", metavar="check|strict|warn|off|record", help=PERF_DESC
    )
    group.addoption("--gpuenv-json", dest="gpuenv_json", metavar="PATH", help=JSON_DESC)
    group.addoption("--gpuenv-root", dest="gpuenv_root", metavar="PATH", help=ROOT_DESC)
    group.addoption("--gpuenv-probe", dest="gpuenv_probe", metavar="auto|always|never", help=PROBE_DESC)
    group.addoption("--gpuenv-probe-timeout", dest="gpuenv_probe_timeout", metavar="SECONDS", help=PROBE_TIMEOUT_DESC)
    group.addoption("--gpuenv-cache-dir", dest="gpuenv_cache_dir", metavar="PATH", help=CACHE_DIR_DESC)
    group.addoption("--gpuenv-compile-archs", dest="gpuenv_compile_archs", metavar="LIST", help=COMPILE_ARCHS_DESC)
    group.addoption("--gpuenv-perf-max-time", dest="gpuenv_perf_max_time", metavar="SECONDS", help=PERF_MAX_TIME_DESC)
    group.addoption("--gpuenv-perf-plot", dest="gpuenv_perf_plot", metavar="PATH", help=PERF_PLOT_DESC)
    group.addoption("--gpuenv-worker-gpus", dest="gpuenv_worker_gpus", metavar="auto|off|N", help=WORKER_GPUS_DESC)
    group.addoption("--gpuenv-kernels", dest="gpuenv_kernels", metavar="run|compile|off", help=KERNELS_DESC)
    group.addoption("--gpuenv-require", dest="gpuenv_require", metavar="gpu|cuda|rocm|off", help=REQUIRE_DESC)
    group.addoption("--gpuenv-plan", dest="gpuenv_plan", action="store_true", default=False, help=PLAN_DESC)
    group.addoption("--gpuenv-dist", dest="gpuenv_dist", action="store_true", default=False, help=DIST_DESC)
    group.addoption(
        "--gpuenv-plan-profile", dest="gpuenv_plan_profile", action="append", default=[], metavar="SPEC",
        help=PLAN_PROFILE_DESC,
    )
    for name, _env, desc, default in _SIMPLE:
        parser.addini(name, desc, default=default)
    parser.addini("gpuenv_kernel_dirs", KERNEL_DIRS_DESC, type="paths", default=[])
    parser.addini("gpuenv_baselines", BASELINES_DESC, default=None)
    parser.addini("gpuenv_skip_patterns", SKIP_PATTERNS_DESC, type="linelist", default=[])
    parser.addini("gpuenv_hide_modules", HIDE_MODULES_DESC, type="linelist", default=[])
    parser.addini("gpuenv_tolerances", TOLERANCES_DESC, type="linelist", default=[])


def split_list(value: Any) -> list[str]:
    """The items of a list-valued option: a TOML array (a list; an item may itself be comma-separated) or a
    text separated by commas, semicolons, spaces or newlines (command line, variables, pytest.ini)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [part for item in items for part in str(item).replace(";", ",").replace(",", " ").split()]


def _lookup(config: pytest.Config, name: str, env: str) -> tuple[Any, str]:
    """Return (value, where) for an option: command line, environment, ini, default."""
    cli = config.getoption(name, default=None)
    if cli is not None:
        return cli, "command line (--" + name.replace("_", "-") + ")"
    if os.environ.get(env):  # an empty variable counts as unset, as everywhere in gpuenv
        return os.environ[env], f"environment variable {env}"
    ini = getini(config, name)
    where = ini_where(config, name)
    default = next(d for n, _e, _h, d in _SIMPLE if n == name)
    if ini is None or ini == default or ini == "":
        return default, "default"
    return ini, where


def _choice(value: Any, choices: tuple[str, ...], what: str, where: str) -> str:
    v = str(value).strip().lower()
    if v not in choices:
        raise pytest.UsageError(
            f"gpuenv: invalid {what} {safe_repr(value)} from {where}; expected one of: {', '.join(choices)}"
        )
    return v


def _number(value: Any, what: str, where: str, check: Callable[[float], bool], rule: str) -> float:
    """``float(value)`` when it is finite and passes ``check``; else a UsageError naming value and source."""
    try:
        v = float(value) if len(str(value)) <= 100 else math.nan
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or not check(v):
        raise pytest.UsageError(f"gpuenv: invalid {what} {safe_repr(value)} from {where}; expected {rule}")
    return v


def _require(value: Any, where: str) -> str:
    """``--gpuenv-require``: a mode (REQUIRE_MODES) or comma-separated capabilities (``bf16,fp8``)."""
    v = str(value).strip().lower()
    if v in REQUIRE_MODES:
        return v
    from pytest_gpuenv import capabilities

    return capabilities.require_option(value, where, REQUIRE_MODES)


def probe_timeout_ok(seconds: float) -> bool:
    """The probe timeout's bounds, for ``--gpuenv-probe-timeout`` and ``gpuenv info --probe-timeout``."""
    return 0 < seconds <= PROBE_TIMEOUT_MAX


def _worker_gpus(value: Any, where: str) -> str:
    text = str(value).strip().lower()
    if text in ("auto", "off"):
        return text
    rule = f"auto, off or an integer from 1 to {MAX_DEVICES}"
    n = _number(text, "--gpuenv-worker-gpus value", where, lambda x: 1 <= x <= MAX_DEVICES and x == int(x), rule)
    return str(int(n))


def _json_path(value: str, where: str, invocation_dir: str, worker: bool) -> str:
    """The ``--gpuenv-json`` target (relative to where pytest was invoked): a regular file or a new one.
    Checked where it is written, so not in an xdist worker (which may run on another host)."""
    from pytest_gpuenv._paths import output_file_problem

    path = os.path.join(invocation_dir, path_text(value, "--gpuenv-json", where))
    problem = None if worker else output_file_problem(path)
    if problem:
        raise pytest.UsageError(f"gpuenv: --gpuenv-json {safe_repr(value, 200)} from {where}: {problem}")
    return path


def _directory(value: Any, what: str, where: str, create: bool, base: str) -> str:
    """An absolute folder path (relative to ``base``) that ``_paths.directory_problem`` accepts."""
    from pytest_gpuenv._paths import directory_problem

    path = os.path.join(base, os.path.expanduser(path_text(value, what, where)))
    problem = directory_problem(path, create)
    if problem:
        fix = "; give a directory of your own" if create and "of your own" not in problem else ""
        raise pytest.UsageError(f"gpuenv: {what} {safe_repr(value, 200)} from {where} {problem}{fix}")
    return os.path.abspath(path)


def _kernel_dirs(config: pytest.Config) -> list[str]:
    """ini ``gpuenv_kernel_dirs`` (relative to the ini file), each an existing folder; default: 'kernels'
    under the rootdir, which may be missing."""
    items = ini_path_list(config, "gpuenv_kernel_dirs", "kernel directory")
    if not items:
        return [str(config.rootpath / "kernels")]
    base = str(config.inipath.parent) if config.inipath is not None else str(config.invocation_params.dir)
    where = ini_where(config, "gpuenv_kernel_dirs")
    return [_directory(d, "kernel directory", where, False, base) for d in items]


def parse_arch_list(value: Any, where: str) -> list[str]:
    from pytest_gpuenv.model import ArchPattern

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


def _warp_sizes(value: Any, where: str) -> list[int]:
    parts = split_list(value)
    if not parts or len(parts) > 2 or any(p not in ("32", "64") for p in parts) or len(set(parts)) != len(parts):
        raise pytest.UsageError(
            f"gpuenv: invalid gpuenv_cpu_warp_sizes {safe_repr(value)} from {where}; expected 64, 32 or 64,32"
        )
    return [int(p) for p in parts]


def _suite_lists(config: pytest.Config) -> tuple[list[str], list[str]]:
    """ini ``gpuenv_skip_patterns`` (regular expressions, checked by ``_skip_patterns``) and
    ``gpuenv_hide_modules`` (module names, checked by ``_hide``); each checker imported only where its option
    is set."""
    patterns, names = getini(config, "gpuenv_skip_patterns"), getini(config, "gpuenv_hide_modules")
    if patterns:
        from pytest_gpuenv._skip_patterns import parse_extra

        patterns = parse_extra(patterns, ini_where(config, "gpuenv_skip_patterns"))
    if names:
        from pytest_gpuenv._hide import parse_names

        names = parse_names(names, ini_where(config, "gpuenv_hide_modules"))
    return list(patterns or []), list(names or [])


def resolve(config: pytest.Config) -> Settings:
    """Read every option once. Raises ``pytest.UsageError`` naming the bad value and its source."""
    s = Settings()
    v, w = _lookup(config, "gpuenv_backend", "GPUENV_BACKEND")
    s.backend = _choice(v, BACKEND_CHOICES, "--gpuenv-backend value", w)
    v, w = _lookup(config, "gpuenv_devices", "GPUENV_DEVICES")
    s.devices = _choice(v, DEVICE_MODES, "--gpuenv-devices value", w)
    v, w = _lookup(config, "gpuenv_perf", "GPUENV_PERF")
    s.perf = _choice(v, PERF_MODES, "--gpuenv-perf value", w)
    v, w = _lookup(config, "gpuenv_probe", "GPUENV_PROBE")
    s.probe = _choice(v, PROBE_MODES, "--gpuenv-probe value", w)
    v, w = _lookup(config, "gpuenv_probe_timeout", "GPUENV_PROBE_TIMEOUT")
    s.probe_timeout = _number(v, "--gpuenv-probe-timeout value", w, probe_timeout_ok,
                              f"seconds in (0, {PROBE_TIMEOUT_MAX}]")
    v, w = _lookup(config, "gpuenv_perf_max_time", "GPUENV_PERF_MAX_TIME")
    s.perf_max_time = _number(v, "--gpuenv-perf-max-time value", w, lambda x: 0 < x <= 600, "seconds in (0, 600]")
    v, w = _lookup(config, "gpuenv_perf_plot", "GPUENV_PERF_PLOT")
    if v and not hasattr(config, "workerinput"):  # the controller draws it; matplotlib is checked here
        from pytest_gpuenv.perf._plot import option_problem

        v = path_text(v, "--gpuenv-perf-plot", w)
        problem = option_problem(v, str(config.invocation_params.dir))
        if problem:
            raise pytest.UsageError(f"gpuenv: --gpuenv-perf-plot {safe_repr(v, 200)} from {w}: {problem}")
    s.perf_plot = v or None

    v, w = _lookup(config, "gpuenv_json", "GPUENV_JSON")
    s.json_path = _json_path(v, w, str(config.invocation_params.dir), hasattr(config, "workerinput")) if v else None
    v, w = _lookup(config, "gpuenv_root", "GPUENV_ROOT")
    if v:
        if not os.path.isdir(path_text(v, "--gpuenv-root", w)):
            raise pytest.UsageError(f"gpuenv: --gpuenv-root {safe_repr(v, 200)} from {w} is not a directory")
        s.root = os.path.abspath(v)
    v, w = _lookup(config, "gpuenv_cache_dir", "GPUENV_CACHE_DIR")
    if v:  # checked where the run starts, as --gpuenv-json (an xdist worker may run on another host)
        base = str(config.invocation_params.dir)
        s.cache_dir = (path_text(v, "--gpuenv-cache-dir", w) if hasattr(config, "workerinput")
                       else _directory(v, "--gpuenv-cache-dir", w, True, base))
    v, w = _lookup(config, "gpuenv_compile_archs", "GPUENV_COMPILE_ARCHS")
    if v:
        s.compile_archs = parse_arch_list(v, w)

    v, w = _lookup(config, "gpuenv_worker_gpus", "GPUENV_WORKER_GPUS")
    s.worker_gpus = _worker_gpus(v, w)
    v, w = _lookup(config, "gpuenv_kernels", "GPUENV_KERNELS")
    s.kernels = _choice(v, KERNEL_MODES, "--gpuenv-kernels value", w)
    v, w = _lookup(config, "gpuenv_cpu_warp_sizes", "GPUENV_CPU_WARP_SIZES")
    s.cpu_warp_sizes = _warp_sizes(v, w)
    v, w = _lookup(config, "gpuenv_require", "GPUENV_REQUIRE")
    s.require = _require(v, w)
    s.skip_patterns, s.hide_modules = _suite_lists(config)
    if getini(config, "gpuenv_tolerances"):
        from pytest_gpuenv import tolerance

        s.tolerances = tolerance.ini_rules(getini(config, "gpuenv_tolerances"), ini_where(config, "gpuenv_tolerances"))

    s.kernel_dirs = _kernel_dirs(config)
    base = getini(config, "gpuenv_baselines")
    if base:
        base = path_text(base, "baselines file", ini_where(config, "gpuenv_baselines"))
    s.baselines = str(config.rootpath / base) if base else str(config.rootpath / ".gpuenv" / "baselines.json")
    s.plan = bool(config.getoption("gpuenv_plan", default=False))
    s.plan_profiles = list(config.getoption("gpuenv_plan_profile", default=[]) or [])
    s.dist = bool(config.getoption("gpuenv_dist", default=False))
    return s
