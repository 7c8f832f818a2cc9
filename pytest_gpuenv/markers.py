"""The GPU markers: their help lines, argument checks, and evaluation against the environment.

``check_marks(item)`` validates arguments (a bad one becomes an error for that test alone);
``evaluate(item, env)`` returns a ``Skip`` (what was required, what was found, the fix) or ``None``;
``xfail_for(item, env)`` returns the xfail reason for ``xfail_on`` or ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from pytest_gpuenv.model import ArchPattern, Device, GpuEnv, Problem, format_size, kind_label, parse_size

#: (name, signature help line) registered with config.addinivalue_line("markers", ...)
MARKERS = [
    ("requires_gpu", "requires_gpu: run only where some GPU is usable (ROCm or CUDA)."),
    ("requires_cuda", "requires_cuda: run only where an NVIDIA GPU is usable through CUDA."),
    ("requires_rocm", "requires_rocm: run only where an AMD GPU is usable through ROCm (native Linux or WSL 2)."),
    (
        "requires_hip",
        "requires_hip: run only where HIP kernels can be compiled and launched (ROCm, or NVIDIA through "
        "the HIP-on-CUDA path with NVRTC or nvcc).",
    ),
    ("requires_wsl", "requires_wsl(version=None): run only on WSL (that version, if given)."),
    ("requires_devices", "requires_devices(n): run only where at least n GPUs are visible and usable."),
    (
        "requires_memory",
        "requires_memory(size): run only where a usable GPU has at least that much memory: int bytes or "
        "'16GiB', '40GB', '512MiB'.",
    ),
    (
        "requires_arch",
        "requires_arch(*patterns): run only where a usable GPU's arch matches a pattern: 'gfx90a', "
        "'gfx94*', 'gfx11*', 'sm_90', 'sm_80+' (8.0 or newer); never matches the other vendor.",
    ),
    (
        "skip_on",
        "skip_on(*conditions, reason=None): skip where any condition holds: 'rocm', 'cuda', 'cpu', 'wsl', "
        "'windows' or an arch pattern.",
    ),
    (
        "xfail_on",
        "xfail_on(*conditions, reason=None, strict=False): as skip_on, but the test runs and is expected "
        "to fail there.",
    ),
    ("perf", "perf: a GPU performance test (tests using gpu_bench get it by themselves); -m 'not perf' leaves them out."),
]
MARKER_NAMES = tuple(n for n, _ in MARKERS)
_GPU_MARKERS = (
    "requires_gpu",
    "requires_cuda",
    "requires_rocm",
    "requires_hip",
    "requires_wsl",
    "requires_devices",
    "requires_memory",
    "requires_arch",
    "skip_on",
    "xfail_on",
)
CONDITIONS = ("rocm", "cuda", "cpu", "wsl", "windows")


class MarkerArgumentError(ValueError):
    """A GPU marker was given an argument it cannot use; names the marker and the value."""


@dataclass(frozen=True)
class Skip:
    #: for the summary: "vendor", "arch", "memory", "devices", "toolchain", "wsl", "platform",
    #: "problem", "backend-option", "condition"
    category: str
    #: the cause as a group label for the summary (no test-specific detail)
    cause: str
    reason: str


def _fmt_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _bad(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> MarkerArgumentError:
    return MarkerArgumentError(f"invalid marker {_fmt_call(name, args, kwargs)}: {why}")


def _no_kwargs(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], allowed: Iterable[str] = ()) -> None:
    extra = set(kwargs) - set(allowed)
    if extra:
        raise _bad(name, args, kwargs, f"unexpected keyword argument(s) {', '.join(sorted(extra))}")


def _parse_condition(c: Any) -> Any:
    if isinstance(c, str) and c.strip().lower() in CONDITIONS:
        return c.strip().lower()
    try:
        return ArchPattern.parse(c)
    except ValueError:
        raise ValueError(
            f"unknown condition {c!r} (expected one of {', '.join(CONDITIONS)} or an arch pattern such as "
            "'gfx94*' or 'sm_80+')"
        ) from None


def validate(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Check one marker's arguments; returns the parsed value. Raises MarkerArgumentError."""
    try:
        if name in ("requires_gpu", "requires_cuda", "requires_rocm", "requires_hip", "perf"):
            if args or kwargs:
                raise ValueError("takes no arguments")
            return None
        if name == "requires_wsl":
            _no_kwargs(name, args, kwargs, ("version",))
            if len(args) > 1 or (args and "version" in kwargs):
                raise ValueError("takes at most one version")
            version = args[0] if args else kwargs.get("version")
            if version is not None and (isinstance(version, bool) or version not in (1, 2)):
                raise ValueError(f"version must be 1, 2 or None, got {version!r}")
            return version
        if name == "requires_devices":
            _no_kwargs(name, args, kwargs)
            if len(args) != 1:
                raise ValueError("takes exactly one argument, the number of GPUs")
            n = args[0]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"the number of GPUs must be an int >= 1, got {n!r}")
            return n
        if name == "requires_memory":
            _no_kwargs(name, args, kwargs)
            if len(args) != 1:
                raise ValueError("takes exactly one size")
            return parse_size(args[0])
        if name == "requires_arch":
            _no_kwargs(name, args, kwargs)
            if not args:
                raise ValueError("needs at least one arch pattern")
            return [ArchPattern.parse(a) for a in args]
        if name in ("skip_on", "xfail_on"):
            allowed = ("reason",) if name == "skip_on" else ("reason", "strict")
            _no_kwargs(name, args, kwargs, allowed)
            if not args:
                raise ValueError("needs at least one condition")
            if kwargs.get("reason") is not None and not isinstance(kwargs["reason"], str):
                raise ValueError("reason must be a string")
            return [_parse_condition(c) for c in args]
    except MarkerArgumentError:
        raise
    except ValueError as exc:
        raise _bad(name, args, kwargs, str(exc)) from None
    return None


def check_marks(marks: Iterable[Any]) -> Optional[str]:
    """Validate every GPU marker on an item; return the first error message, or None."""
    for m in marks:
        if m.name in MARKER_NAMES:
            try:
                validate(m.name, tuple(m.args), dict(m.kwargs))
            except MarkerArgumentError as exc:
                return str(exc)
    return None


# ---------------------------------------------------------------------- evaluation
def _found(env: GpuEnv) -> str:
    return env.describe()


def _blocking_problem(env: GpuEnv, vendor: Optional[str] = None) -> Optional[Problem]:
    """The error-level problem that explains why GPUs are not usable (first one)."""
    for p in env.problems:
        if p.severity == "error":
            return p
    return None


def _with_fix(text: str, env: GpuEnv) -> tuple[str, Optional[Problem]]:
    p = _blocking_problem(env)
    if p is None:
        return text, None
    fix = f"; fix: {p.fix}" if p.fix else ""
    return f"{text} [{p.code}]{fix}", p


def _usable(env: GpuEnv, vendor: Optional[str] = None) -> list[Device]:
    if env.backend == "cpu":
        return []
    devs = env.usable_devices
    if vendor:
        devs = [d for d in devs if d.vendor == vendor]
    return devs


def _skip_missing(env: GpuEnv, want: str, category: str) -> Skip:
    """Skip for a requirement no usable GPU meets; grouped by the underlying cause."""
    reason, prob = _with_fix(f"requires {want}: found {_found(env)}", env)
    if env.forced_backend == "cpu":
        return Skip("backend-option", "--gpuenv-backend=cpu", f"requires {want}: GPUs hidden by --gpuenv-backend=cpu")
    if prob is not None:
        return Skip("problem", f"{prob.code}: {prob.message}", reason)
    if not env.has_gpu:
        return Skip("no-gpu", _short_found(env), reason)
    return Skip(category, f"requires {want}; found {_short_found(env)}", reason)


def _short_found(env: GpuEnv) -> str:
    if env.has_gpu:
        return {"rocm": "ROCm", "cuda": "CUDA"}[env.backend]
    if env.devices:
        return "GPU present but not usable"
    if env.kind != "cpu":
        return kind_label(env.kind) + " found, no usable device"
    return "no GPU found"


def _hip_toolchain(env: GpuEnv) -> tuple[bool, str]:
    c = env.compilers
    if env.backend == "rocm":
        ok = bool(c.get("hiprtc") or c.get("hipcc"))
        return ok, "hiprtc or hipcc"
    if env.backend == "cuda":
        ok = bool(c.get("nvrtc") or c.get("nvcc"))
        return ok, "NVRTC or nvcc"
    return False, "a ROCm or CUDA GPU"


def _condition_holds(cond: Any, env: GpuEnv) -> bool:
    if isinstance(cond, ArchPattern):
        return any(cond.matches(d.arch) for d in _usable(env))
    if cond == "rocm":
        return env.backend == "rocm" and bool(_usable(env, "amd"))
    if cond == "cuda":
        return env.backend == "cuda" and bool(_usable(env, "nvidia"))
    if cond == "cpu":
        return not env.has_gpu
    if cond == "wsl":
        return env.wsl is not None
    if cond == "windows":
        return env.platform == "windows"
    return False


def _cond_text(cond: Any) -> str:
    return cond.text if isinstance(cond, ArchPattern) else cond


def _arch_not_in_build(env: GpuEnv, want: str) -> Optional[Skip]:
    """The GPU is there, but the installed ROCm/torch build has no code for its arch: frameworks fail
    with 'invalid device function'. HIP kernels compiled here for the device (requires_hip) still run."""
    p = env.problem("arch-not-in-build") if env.usable == "arch-unsupported" else None
    if p is None:
        return None
    fix = f"; {p.fix}" if p.fix else ""
    return Skip("problem", f"{p.code}: {p.message}", f"requires {want}: {p.message} [{p.code}]{fix}")


def evaluate_mark(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], env: GpuEnv) -> Optional[Skip]:
    value = validate(name, args, kwargs)
    if name == "requires_gpu":
        if not _usable(env):
            return _skip_missing(env, "a GPU", "vendor")
        return _arch_not_in_build(env, "a GPU")
    elif name == "requires_cuda":
        if env.backend != "cuda" or not _usable(env, "nvidia"):
            return _skip_missing(env, "CUDA", "vendor")
    elif name == "requires_rocm":
        if env.backend != "rocm" or not _usable(env, "amd"):
            return _skip_missing(env, "ROCm", "vendor")
        return _arch_not_in_build(env, "ROCm")
    elif name == "requires_hip":
        if not _usable(env):
            return _skip_missing(env, "HIP (ROCm, or NVIDIA through HIP-on-CUDA)", "vendor")
        ok, what = _hip_toolchain(env)
        if not ok:
            return Skip(
                "toolchain",
                f"no HIP compiler ({what})",
                f"requires HIP: found {_found(env)} but no {what} to compile HIP kernels",
            )
    elif name == "requires_wsl":
        if env.wsl is None or (value is not None and env.wsl != value):
            want = "WSL" if value is None else f"WSL {value}"
            have = "not WSL" if env.wsl is None else f"WSL {env.wsl}"
            return Skip("wsl", f"requires {want}; found {have}", f"requires {want}: found {have} ({env.platform})")
    elif name == "requires_devices":
        have = len(_usable(env))
        if have < value:
            if have == 0:
                return _skip_missing(env, f"{value} GPU(s)", "devices")
            worker = env.problem("xdist-worker-gpus")
            if worker is not None:
                return Skip(
                    "devices",
                    f"requires {value} GPUs; xdist worker has {have}",
                    f"requires_devices({value}): {worker.message}; {worker.fix}",
                )
            return Skip(
                "devices",
                f"requires {value} GPUs; {have} visible",
                f"requires_devices({value}): {have} usable GPU(s) visible ({env.describe_devices(_usable(env))})",
            )
    elif name == "requires_memory":
        devs = _usable(env)
        if not devs:
            return _skip_missing(env, f"a GPU with {format_size(value)}", "memory")
        known = [d.memory_bytes for d in devs if d.memory_bytes is not None]
        label = f"requires_memory({args[0]!r})" if isinstance(args[0], str) else f"requires_memory({format_size(value)})"
        if not known:
            return Skip("memory", "device memory unknown", f"{label}: the memory of {env.describe_devices(devs)} is unknown")
        if max(known) < value:
            return Skip(
                "memory",
                f"{label}",
                f"{label}: largest device has {format_size(max(known))}",
            )
    elif name == "requires_arch":
        devs = _usable(env)
        pats = " or ".join(p.text for p in value)
        if not devs:
            return _skip_missing(env, f"arch {pats}", "arch")
        if not any(p.matches(d.arch) for p in value for d in devs):
            archs = ", ".join(sorted({d.arch or "unknown arch" for d in devs}))
            return Skip("arch", f"requires arch {pats}", f"requires arch {pats}: found {archs} ({env.describe_devices(devs)})")
    elif name == "skip_on":
        for cond in value:
            if _condition_holds(cond, env):
                why = kwargs.get("reason")
                text = f"skip_on({_cond_text(cond)!r}): this run is on {_found(env)}"
                if why:
                    text += f": {why}"
                return Skip("condition", f"skip_on({_cond_text(cond)!r})", text)
    return None


def evaluate(marks: Iterable[Any], env: GpuEnv) -> Optional[Skip]:
    """The first Skip among an item's GPU markers, or None when it may run."""
    for m in marks:
        if m.name in _GPU_MARKERS and m.name != "xfail_on":
            skip = evaluate_mark(m.name, tuple(m.args), dict(m.kwargs), env)
            if skip is not None:
                return skip
    return None


def xfail_for(marks: Iterable[Any], env: GpuEnv) -> Optional[tuple[str, bool]]:
    """(reason, strict) when an ``xfail_on`` condition holds."""
    for m in marks:
        if m.name != "xfail_on":
            continue
        conds = validate(m.name, tuple(m.args), dict(m.kwargs))
        for cond in conds:
            if _condition_holds(cond, env):
                why = m.kwargs.get("reason")
                text = f"xfail_on({_cond_text(cond)!r}): expected to fail on {_found(env)}"
                if why:
                    text += f": {why}"
                return text, bool(m.kwargs.get("strict", False))
    return None
