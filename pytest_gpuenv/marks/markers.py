"""The GPU markers: one row per marker, and which names mean them in a run.

``MARKERS`` holds a ``Marker`` row for each: its name (its alias is ``gpuenv_`` + the name), the
signature and help that ``pytest --markers`` prints, the keywords it accepts, how its arguments are
parsed, and the check it makes of the environment model (``marks.requirements``; ``marks.skipping`` applies the
rows to a test's marks). ``validate(name, args, kwargs)`` parses one marker's arguments or raises
``MarkerArgumentError`` naming the marker and the value; ``check_marks(marks)`` returns the first such
error of a test (the plugin makes it an error for that test alone).

Names: the prefixed alias, ``gpuenv_requires_gpu`` ... ``gpuenv_perf``, is registered at configure time
and always read as the plugin's marker. An unprefixed name (``requires_gpu``, ``perf``) is the plugin's
only where the suite does not register that name itself (ini ``marks.markers`` lines, or
``config.addinivalue_line("markers", ...)`` in a conftest or plugin): a suite whose ``perf`` means "slow"
keeps it, and the plugin neither registers nor evaluates it. ``register_aliases`` runs in the plugin's
(first) ``pytest_configure``; ``register_unprefixed`` runs last, once the ini file and the conftests loaded
at start have registered theirs; ``refresh`` looks again at collection, when conftests in subdirectories
have been loaded too. ``plugin_marks(item)`` gives an item's marks that are the plugin's, named without
the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Optional

import pytest

from pytest_gpuenv.base.model import MAX_DEVICES, ArchPattern, GpuEnv, parse_size, safe_repr
from pytest_gpuenv.marks import requirements as req

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.capabilities import Requirement

PREFIX = "gpuenv_"
#: the words skip_on/xfail_on accept besides arch patterns
CONDITIONS = ("rocm", "cuda", "cpu", "wsl", "windows")


class MarkerArgumentError(ValueError):
    """A GPU marker was given an argument it cannot use; names the marker and the value."""


# ------------------------------------------------------------------------------ argument parsing
# Each parser gets the marker's positional and keyword arguments (the keywords already checked against
# the row's ``keywords``) and returns the value the check uses, or raises ValueError saying what is wrong.
def _no_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if args or kwargs:
        raise ValueError("takes no arguments")


def _wsl_version(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[int]:
    if len(args) > 1 or (args and "version" in kwargs):
        raise ValueError("takes at most one version")
    version = args[0] if args else kwargs.get("version")
    if version is not None and (isinstance(version, bool) or version not in (1, 2)):
        raise ValueError(f"version must be 1, 2 or None, got {safe_repr(version)}")
    return None if version is None else int(version)  # a plain int: later checks call no method of it


def _one(args: tuple[Any, ...], what: str) -> Any:
    if len(args) != 1:
        raise ValueError(f"takes exactly one argument, {what}")
    return args[0]


def _device_count(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    n = _one(args, "the number of GPUs")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of GPUs must be an int >= 1, got {safe_repr(n)}")
    if n > MAX_DEVICES:
        raise ValueError(f"the number of GPUs must be at most {MAX_DEVICES}, got {safe_repr(n)}")
    return int(n)


def _size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return parse_size(_one(args, "a size"))


def _at_least_one(args: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    if not args:
        raise ValueError(f"needs at least one {what}")
    return args


def _arch_patterns(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[ArchPattern]:
    return [ArchPattern.parse(a) for a in _at_least_one(args, "arch pattern")]


def _capabilities(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Requirement]:
    from pytest_gpuenv.base.capabilities import parse  # boundary: the capability table, entered by this marker

    return [parse(a) for a in _at_least_one(args, "capability")]


def _condition(c: Any) -> Any:
    if isinstance(c, str) and c.strip().lower() in CONDITIONS:
        return c.strip().lower()
    try:
        return ArchPattern.parse(c)
    except ValueError:
        raise ValueError(
            f"unknown condition {safe_repr(c)} (expected one of {', '.join(CONDITIONS)} or an arch pattern such as "
            "'gfx94*' or 'sm_80+')"
        ) from None


def _conditions(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    if kwargs.get("reason") is not None and not isinstance(kwargs["reason"], str):
        raise ValueError("reason must be a string")
    if not isinstance(kwargs.get("strict", False), bool):
        raise ValueError(f"strict must be True or False, got {safe_repr(kwargs['strict'])}")
    return [_condition(c) for c in _at_least_one(args, "condition")]


# ------------------------------------------------------------------------------ the table
Check = Callable[[GpuEnv, Any, tuple[Any, ...], dict[str, Any]], Optional[req.Skip]]


class Marker(NamedTuple):
    """One GPU marker."""

    name: str
    #: how ``pytest --markers`` shows the call, e.g. ``requires_memory(size)``
    signature: str
    #: what ``pytest --markers`` says of it, after the signature
    help: str
    #: parses ``(args, kwargs)`` into the value ``check`` uses; ValueError naming the bad argument
    parse: Callable[[tuple[Any, ...], dict[str, Any]], Any]
    #: the skip it makes where the model lacks what it requires; None: it never skips a test
    check: Optional[Check] = None
    #: the keyword arguments it accepts (any other is an error)
    keywords: tuple[str, ...] = ()
    #: only a test that needs a GPU carries it (the plugin skips it after a sticky GPU fault)
    needs_gpu: bool = False

    @property
    def alias(self) -> str:
        return PREFIX + self.name

    @property
    def line(self) -> str:
        """The ``marks.markers`` ini line registered for the plain name."""
        return f"{self.signature}: {self.help}"

    @property
    def alias_line(self) -> str:
        return PREFIX + self.line.replace("'not perf'", f"'not {PREFIX}perf'")


MARKERS = (
    Marker("requires_gpu", "requires_gpu", "run only where some GPU is usable (ROCm or CUDA).",
           _no_arguments, req.requires_gpu, needs_gpu=True),
    Marker("requires_cuda", "requires_cuda", "run only where an NVIDIA GPU is usable through CUDA.",
           _no_arguments, req.requires_cuda, needs_gpu=True),
    Marker("requires_rocm", "requires_rocm",
           "run only where an AMD GPU is usable through ROCm (native Linux or WSL 2).",
           _no_arguments, req.requires_rocm, needs_gpu=True),
    Marker("requires_hip", "requires_hip",
           "run only where HIP kernels can be compiled and launched (ROCm, or NVIDIA through the HIP-on-CUDA "
           "path with NVRTC or nvcc).", _no_arguments, req.requires_hip, needs_gpu=True),
    Marker("requires_wsl", "requires_wsl(version=None)", "run only on WSL (that version, if given).",
           _wsl_version, req.requires_wsl, keywords=("version",)),
    Marker("requires_devices", "requires_devices(n)", "run only where at least n GPUs are visible and usable.",
           _device_count, req.requires_devices, needs_gpu=True),
    Marker("requires_memory", "requires_memory(size)",
           "run only where a usable GPU has at least that much memory: int bytes or '16GiB', '40GB', '512MiB'.",
           _size, req.requires_memory),
    Marker("requires_arch", "requires_arch(*patterns)",
           "run only where a usable GPU's arch matches a pattern: 'gfx90a', 'gfx94*', 'gfx11*', 'sm_90', "
           "'sm_80+' (8.0 or newer); never matches the other vendor.", _arch_patterns, req.requires_arch),
    Marker("skip_on", "skip_on(*conditions, reason=None)",
           "skip where any condition holds: 'rocm', 'cuda', 'cpu', 'wsl', 'windows' or an arch pattern.",
           _conditions, req.skip_on, keywords=("reason",)),
    Marker("xfail_on", "xfail_on(*conditions, reason=None, strict=False)",
           "as skip_on, but the test runs and is expected to fail there.",
           _conditions, keywords=("reason", "strict")),  # (no skip: ``marks.skipping.xfail_for`` reads it)
    Marker("requires_capability", "requires_capability(*names)",
           "run only where a usable GPU has every capability named: fp64, fp64_full, fp16, bf16, fp8, fp8_ocp, "
           "fp8_fnuz, int8_dot, matrix_cores, tf32, wave32, wave64, cooperative_launch, unified_memory, ecc, "
           "peer_access, shared_memory>=SIZE (per block, e.g. 'shared_memory>=64KiB').",
           _capabilities, req.requires_capability, needs_gpu=True),
    Marker("perf", "perf", "a GPU performance test (tests using gpu_bench get it by themselves); -m 'not perf' "
           "leaves them out.", _no_arguments),
    Marker("exclusive_gpu", "exclusive_gpu",
           "under --dist gpu, run with this test's GPUs to itself: no other test on them while it runs.",
           _no_arguments),
)
BY_NAME = {m.name: m for m in MARKERS}
MARKER_NAMES = tuple(BY_NAME)
#: the marker of the leak check (``guards.leak``), which a test may carry without ``--gpuenv-leak-check``
LEAK_CHECK = "gpuenv_leak_check"
#: the marker of the sanitizer runs (``guards.sanitize``): the test always runs under those tools
SANITIZE = "gpuenv_sanitize"
#: the plugin's markers that exist only with the prefix (registered as they are, not evaluated as skips)
PREFIXED_ONLY = [
    "gpuenv_tolerance(dtype='*', rtol=None, atol=None, arch=None): tolerances for the gpu_assert_close fixture "
    "in this test: for that dtype (glob), on that arch pattern or vendor (amd, nvidia, cpu) if given.",
    f"{LEAK_CHECK}(mode='fail', threshold=None): check this test for GPU memory leaks (mode fail, warn or off), "
    "even without --gpuenv-leak-check.",
    f"{SANITIZE}(*tools): run this test in a child process under these compute-sanitizer tools (memcheck, "
    "racecheck, synccheck, initcheck; none given: --gpuenv-sanitize's, else memcheck), even without "
    "--gpuenv-sanitize.",
]
#: markers that only a test needing a GPU carries
GPU_MARKERS = tuple(m.name for m in MARKERS if m.needs_gpu)


# ------------------------------------------------------------------------------ checking arguments
def _fmt_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [safe_repr(a) for a in args] + [f"{k}={safe_repr(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _raised(exc: Exception) -> str:
    """``Type: message`` of an exception an argument raised (its ``__str__`` may raise too)."""
    try:
        text = str(exc)[:200]
    except Exception:
        text = ""
    return f"an argument raised {type(exc).__name__}" + (f": {text}" if text else "")


def validate(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Parse one marker's arguments by its row; returns the parsed value. Raises MarkerArgumentError."""
    row = BY_NAME[name]
    try:
        extra = set(kwargs) - set(row.keywords)
        if extra:
            raise ValueError(f"unexpected keyword argument(s) {', '.join(sorted(extra))}")
        return row.parse(args, kwargs)
    except ValueError as exc:
        why = str(exc)
    except Exception as exc:  # the argument's own method (__eq__, strip, __lt__ ...) raised
        why = _raised(exc)
    raise MarkerArgumentError(f"invalid marker {_fmt_call(name, args, kwargs)}: {why}")


def check_marks(marks: Iterable[PluginMark]) -> Optional[str]:
    """Validate every GPU marker on an item (``plugin_marks``); return the first error, or None."""
    for m in marks:
        try:
            validate(m.name, m.args, m.kwargs)
        except MarkerArgumentError as exc:
            return str(exc)
    return None


#: a bare number below this given to requires_memory is taken for a size meant in another unit (it is bytes)
SMALL_SIZE = 2**20


def warn_small_sizes(item: pytest.Item, marks: Iterable[PluginMark]) -> None:
    """A PytestWarning naming the test for ``requires_memory(16)``: a bare number under 1 MiB means bytes."""
    for m in marks:
        size = m.args[0] if m.name == "requires_memory" and len(m.args) == 1 and not m.kwargs else None
        if isinstance(size, (int, float)) and not isinstance(size, bool) and 1 <= size < SMALL_SIZE:
            item.warn(pytest.PytestWarning(
                f"{item.nodeid}: @{m.name}({size!r}) means {size!r} bytes; give a unit, e.g. "
                f"@{m.name}('{size!r}GiB'), or an int of bytes of at least 1 MiB"))


# ------------------------------------------------------------------------------ names in this run
class PluginMark(NamedTuple):
    """One of an item's marks that means a plugin marker; ``name`` without the prefix."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class MarkerNames:
    """The run's marker names."""

    #: the markers lines the plugin registered (so they are not taken for the suite's)
    ours: set[str] = field(default_factory=set)
    #: unprefixed names the suite registers itself, in table order
    left: list[str] = field(default_factory=list)
    #: those of ``left`` the header named
    announced: list[str] = field(default_factory=list)

    def owns(self, name: str) -> bool:
        return name in BY_NAME and name not in self.left


_KEY: pytest.StashKey[MarkerNames] = pytest.StashKey()


def names(config: pytest.Config) -> MarkerNames:
    """The run's marker names (made on first use)."""
    if _KEY not in config.stash:
        config.stash[_KEY] = MarkerNames()
    return config.stash[_KEY]


def _suite_names(config: pytest.Config, state: MarkerNames) -> list[str]:
    """The plugin's unprefixed names that some other line in ``marks.markers`` registers, in table order."""
    lines = [str(line) for line in config.getini("markers")]
    theirs = {line.split(":")[0].split("(")[0].strip() for line in lines if line not in state.ours}
    return [name for name in MARKER_NAMES if name in theirs]


def _register(config: pytest.Config, state: MarkerNames, line: str) -> None:
    state.ours.add(line)
    config.addinivalue_line("markers", line)


def register_aliases(config: pytest.Config) -> None:
    """Register ``gpuenv_<name>`` for every marker, with its signature line."""
    state = names(config)
    for line in [m.alias_line for m in MARKERS] + PREFIXED_ONLY:
        _register(config, state, line)


def register_unprefixed(config: pytest.Config) -> None:
    """Register the plain names the suite has not registered itself; remember the ones it has."""
    state = names(config)
    state.left = _suite_names(config, state)
    state.announced = list(state.left)
    for m in MARKERS:
        if m.name not in state.left:
            _register(config, state, m.line)


def refresh(config: pytest.Config) -> None:
    """Look again once the collection has loaded every conftest: a name registered late is the suite's."""
    state = names(config)
    state.left = _suite_names(config, state)


def owns(config: pytest.Config, name: str) -> bool:
    """Whether the unprefixed ``name`` means the plugin's marker in this run."""
    return names(config).owns(name)


def _own_plugin_marks(node: Any, names: MarkerNames) -> list[PluginMark]:
    out = []
    for m in node.own_markers:
        name = m.name[len(PREFIX):] if m.name.startswith(PREFIX) else m.name
        if name in BY_NAME and (name != m.name or names.owns(name)):
            out.append(PluginMark(name, tuple(m.args), dict(m.kwargs)))
    return out


def plugin_marks(item: Any, parents: Optional[dict[Any, list[PluginMark]]] = None,
                 run_names: Optional[MarkerNames] = None) -> list[PluginMark]:
    """The item's marks that mean plugin markers (closest first, the order of ``item.iter_markers()``), named
    without the prefix. ``parents``: the marks of each parent node and its own parents, already walked (filled
    here), for one pass over many items whose parents gain no mark meanwhile (collection); ``run_names``: the
    run's ``names(config)`` (looked up when not given)."""
    if run_names is None:
        run_names = names(item.config)
    out = _own_plugin_marks(item, run_names)
    parent = item.parent
    return out + _chain(parent, run_names, {} if parents is None else parents) if parent is not None else out


def _chain(node: Any, names: MarkerNames, walked: dict[Any, list[PluginMark]]) -> list[PluginMark]:
    """The plugin marks of ``node`` and of its parents, closest first (each node's once, kept in ``walked``)."""
    if node not in walked:
        parent = node.parent
        walked[node] = _own_plugin_marks(node, names) + (_chain(parent, names, walked) if parent is not None else [])
    return walked[node]


def _text(names: list[str]) -> str:
    return (f"markers {', '.join(names)} left to the suite (it registers them itself); pytest-gpuenv's: "
            f"{', '.join(PREFIX + n for n in names)}")


def header_line(config: pytest.Config) -> Optional[str]:
    """``gpuenv: markers perf, requires_gpu are the suite's own ...``; None when the suite registers none."""
    state = names(config)
    return f"gpuenv: {_text(state.announced)}" if state.announced else None


def late_lines(config: pytest.Config) -> list[str]:
    """For the terminal summary: names found to be the suite's after the header was printed."""
    state = names(config)
    late = [n for n in state.left if n not in state.announced]
    return [_text(late)] if late else []
