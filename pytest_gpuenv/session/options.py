"""Options: one ``gpuenv`` group, declared once in ``OPTIONS``, which drives the command-line options, their ini
twins and the resolution (``resolve``); and ``--dist gpu``, the choice added to pytest-xdist's ``--dist``
(``DistChoice``), with ``--gpuenv-dist`` checked where it cannot take effect (``check_dist_request``).

Each row names the option (``gpuenv_backend``: the dest, the ini name and ``--gpuenv-backend``), its
environment variable, its ini type, metavar, help, default (as a user would write it) and the parser that
turns a value into the setting (``session.option_parsers``). Lookup order: command line, then environment variable
(an empty one counts as unset), then ini file, then the default (as pytest-timeout does). A bad value raises
``pytest.UsageError`` naming the value and where it came from. List options are declared with a list ini type
(``args``, ``linelist``, ``paths``), so a TOML array is taken as it is.
"""

# (annotations are evaluated here, without PEP 563: typing.NamedTuple compiles each field's annotation text)
import os
from typing import Any, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.model import BACKEND_CHOICES, LEAK_MODES, PERF_MODES
from pytest_gpuenv.session import option_parsers
from pytest_gpuenv.session.option_parsers import PROBE_TIMEOUT_MAX, getini, ini_where

DEVICE_MODES = ("best", "all", "gpu", "cpu")
PROBE_MODES = ("auto", "always", "never")
KERNEL_MODES = ("run", "compile", "off")


class Option(NamedTuple):
    """One option: ``name`` is the command-line dest and the ini name; ``ini``: its pytest ini type (None:
    command line only); ``cli``: whether it has a command-line flag (``argparse``: more ``addoption``
    arguments); ``attr``: its ``Settings`` field (default: ``name`` without ``gpuenv_``)."""

    name: str
    help: str
    parse: option_parsers.Parser
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


def _modes(choices: tuple[str, ...]) -> str:
    return "|".join(choices)


OPTIONS = (
    Option("gpuenv_backend", (
        "where GPU tests run: auto (detect), cpu (behave as a CPU-only runner: GPU tests skip naming this option, "
        "GPUs are hidden from frameworks the tests import, GPU-only packages such as cupy cannot be imported), "
        "cuda or rocm (only that backend's GPUs count: tests that need the other one skip; to stop the run "
        "instead, --gpuenv-require)."),
        option_parsers.choice(BACKEND_CHOICES), "auto", "GPUENV_BACKEND", _modes(BACKEND_CHOICES)),
    Option("gpuenv_devices", (
        "what torch_device is parametrized over: best (the GPU when one is usable, else the CPU), all "
        "(the CPU and every GPU), gpu (every GPU), cpu."),
        option_parsers.choice(DEVICE_MODES), "best", "GPUENV_DEVICES", _modes(DEVICE_MODES)),
    Option("gpuenv_perf", (
        "how performance assertions act: check (fail on FAIL, warn on INCONCLUSIVE), strict (fail on both), "
        "warn (report only), off (skip perf tests), record (store baselines)."),
        option_parsers.choice(PERF_MODES), "check", "GPUENV_PERF", _modes(PERF_MODES)),
    Option("gpuenv_json", (
        "write the run to this JSON file: the environment, every performance measurement, every hardware skip "
        "(category and cause), the outcomes and the tests whose kernels were only compile-checked."),
        option_parsers.json_path, None, "GPUENV_JSON", "PATH", attr="json_path"),
    Option("gpuenv_root", (
        "read /proc, /sys, /dev, /opt, /usr (and every path the detection follows) under this folder "
        "instead of /: check a mounted image or a saved file tree. No library is loaded, no probe runs."),
        option_parsers.root, None, "GPUENV_ROOT", "PATH"),
    Option("gpuenv_probe", (
        "runtime probe in a subprocess: auto (only where files cannot list devices: WSL 2, Windows), "
        "always, never."),
        option_parsers.choice(PROBE_MODES), "auto", "GPUENV_PROBE", _modes(PROBE_MODES)),
    Option("gpuenv_probe_timeout", "seconds the runtime probe may take before it is abandoned.",
           option_parsers.seconds(PROBE_TIMEOUT_MAX), "20", "GPUENV_PROBE_TIMEOUT", "SECONDS"),
    Option("gpuenv_cache_dir",
           "directory of the compiled-kernel cache (default: a per-user cache directory, mode 0700).",
           option_parsers.cache_dir, None, "GPUENV_CACHE_DIR", "PATH"),
    Option("gpuenv_compile_archs", (
        "arches hip_kernel compiles for when no GPU can launch (e.g. gfx90a,gfx1030,sm_90; in pyproject.toml "
        "a list); default: what each installed compiler supports of gfx90a, gfx942, gfx1030, gfx1100, sm_80, "
        "sm_90."),
        option_parsers.arch_list, None, "GPUENV_COMPILE_ARCHS", "LIST", ini="args"),
    Option("gpuenv_perf_max_time", "time cap in seconds for one performance measurement.",
           option_parsers.seconds(600), "2", "GPUENV_PERF_MAX_TIME", "SECONDS"),
    Option("gpuenv_perf_plot",
           "draw every measurement's samples and budget, one panel per test, into this PNG (needs matplotlib).",
           option_parsers.perf_plot, None, "GPUENV_PERF_PLOT", "PATH"),
    Option("gpuenv_worker_gpus", (
        "with pytest-xdist: auto (spread workers over the visible GPUs), off (leave the visible-devices "
        "variables alone), or N (give each worker N GPUs)."),
        option_parsers.worker_gpus, "auto", "GPUENV_WORKER_GPUS", "auto|off|N"),
    Option("gpuenv_kernels", (
        "what hip_kernel does without a usable GPU: run (on the CPU executor, where a C++ compiler exists), "
        "compile (compile-check, then skip) or off (skip)."),
        option_parsers.choice(KERNEL_MODES), "run", "GPUENV_KERNELS", _modes(KERNEL_MODES)),
    Option("gpuenv_cpu_warp_sizes", "warp sizes hip_kernel tests run at on the CPU executor: 64, 32 or both.",
           option_parsers.warp_sizes, "64,32", "GPUENV_CPU_WARP_SIZES", ini="args", cli=False),
    Option("gpuenv_require", (
        "stop before any test, with exit code 4 and the reason, unless this backend is usable: gpu (any), cuda, "
        "rocm, or GPU capabilities (e.g. bf16,fp8; see requires_capability); off. Not checked with "
        "--collect-only or --fixtures."),
        option_parsers.require, "off", "GPUENV_REQUIRE", _modes(option_parsers.REQUIRE_MODES)),
    Option("gpuenv_plan", "with --collect-only: print which GPU-marked tests would run or skip on each runner profile.",
           option_parsers.flag, False, ini=None, argparse={"action": "store_true"}),
    Option("gpuenv_dist", (
        "pytest-xdist: send each test only to workers whose host can run it, balanced as --dist load (the same "
        "as --dist gpu); a test no host can run is skipped once, naming each host."),
        option_parsers.flag, False, ini=None, argparse={"action": "store_true"}),
    Option("gpuenv_plan_profile", (
        "add a runner profile to --gpuenv-plan: a root folder, a spec such as rocm:gfx90a:4x64GiB, "
        "cuda:sm_90:1x141GB, cpu, or @FILE.json (a runner's `gpuenv info --json`), written --gpuenv-plan-profile=@FILE.json; repeatable."),
        option_parsers.items, (), metavar="SPEC", ini=None, argparse={"action": "append"}, attr="plan_profiles"),
    Option("gpuenv_kernel_dirs", (
        "directories where relative kernel paths are looked up first; then the test file's folder and its "
        "kernels/, and each parent's up to the rootdir ('kernels' under the rootdir, the default, last)."),
        option_parsers.kernel_dirs, (), ini="paths", cli=False),
    Option("gpuenv_baselines", "performance baselines file (default: .gpuenv/baselines.json under the rootdir).",
           option_parsers.baselines, None, cli=False),
    Option("gpuenv_skip_patterns", (
        "regular expressions (one per line) that mark a skip reason of the suite's own as a hardware skip, "
        "besides the built-in table (GPU, CUDA, ROCm, HIP, accelerator, device count, GPU memory ...)."),
        option_parsers.skip_patterns, (), ini="linelist", cli=False),
    Option("gpuenv_hide_modules", (
        "more GPU-only packages that --gpuenv-backend=cpu hides from imports (besides cupy, cupyx, pycuda, "
        "the RAPIDS packages ...)."),
        option_parsers.hide_modules, (), ini="linelist", cli=False),
    Option("gpuenv_tolerances",
           "gpu_assert_close profiles, one per line: 'float16 [gfx9*|amd]: rtol=2e-3 atol=1e-4'; later win.",
           option_parsers.tolerances, (), ini="linelist", cli=False),
    Option("gpuenv_leak_check", (
        "check each test for GPU memory it leaves allocated (torch's allocator and the driver): fail "
        "(the bare option) or warn."),
        option_parsers.choice(LEAK_MODES), "off", metavar="fail|warn|off", argparse={"nargs": "?", "const": "fail"}),
    # first uses of cuBLAS took 156 MiB outside torch on the H200 (torch 2.11, CUDA 13), a first conv 8 MiB
    Option("gpuenv_leak_threshold", "growth of device memory outside torch that counts as a leak.",
           option_parsers.size, "512MiB", metavar="SIZE"),
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
    leak_threshold: int


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
    without pytest-xdist (not installed, or ``-option_parsers no:xdist``), or beside another explicit ``--dist`` mode."""
    if not config.pluginmanager.hasplugin("xdist"):
        raise pytest.UsageError("gpuenv: --gpuenv-dist from command line needs pytest-xdist, which is not "
                                "loaded here (not installed, or disabled with -option_parsers no:xdist)")
    mode = config.getoption("dist", None)
    if mode not in (None, "no", "load", DIST):  # load: what -n alone sets
        raise pytest.UsageError(f"gpuenv: --gpuenv-dist from command line conflicts with --dist {mode}: "
                                f"give one of them (--gpuenv-dist is --dist {DIST})")
