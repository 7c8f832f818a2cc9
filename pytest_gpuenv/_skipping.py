"""The GPU markers evaluated against an environment model: skip, xfail, or run.

``evaluate(marks, env)`` returns the first ``Skip`` (what was required, what was found, the fix, and
a category and cause that group it in the summary) or ``None``; ``xfail_for(marks, env)`` returns
``(reason, strict)`` when an ``xfail_on`` condition holds. ``evaluate_mark`` checks one marker: each
marker has one ``_check_*`` function in ``_CHECKS``; ``require_failure`` is ``--gpuenv-require``'s check.
Pure functions of the marks and the model, so ``--gpuenv-plan`` runs them against profiles of other
machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Optional

from pytest_gpuenv.markers import validate
from pytest_gpuenv.model import ArchPattern, Device, GpuEnv, Problem, format_size, kind_label, safe_repr


class Skip(NamedTuple):
    """Why a test skips: its ``reason``, and the ``category`` ("vendor", "arch", "memory", "devices",
    "toolchain", "wsl", "platform", "problem", "backend-option", "condition", "no-gpu") and ``cause`` (a
    group label, no test-specific detail) that group it in the summary."""

    category: str
    cause: str
    reason: str

    def noted(self, note: str) -> Skip:
        """This skip with ``note`` added to its reason."""
        return Skip(self.category, self.cause, self.reason + note)


def _blocking_problem(env: GpuEnv) -> Optional[Problem]:
    """The error-level problem that explains why GPUs are not usable (first one)."""
    return next((p for p in env.problems if p.severity == "error"), None)


def _usable(env: GpuEnv, vendor: Optional[str] = None) -> list[Device]:
    if env.backend == "cpu":
        return []
    devs = env.usable_devices
    if vendor:
        devs = [d for d in devs if d.vendor == vendor]
    return devs


def _skip_missing(env: GpuEnv, want: str, category: str) -> Skip:
    """Skip for a requirement no usable GPU meets; grouped by the underlying cause."""
    if env.forced_backend == "cpu":
        return Skip("backend-option", "--gpuenv-backend=cpu", f"requires {want}: GPUs hidden by --gpuenv-backend=cpu")
    reason = f"requires {want}: found {env.describe()}"
    prob = _blocking_problem(env)
    if prob is not None:
        fix = f"; fix: {prob.fix}" if prob.fix else ""
        return Skip("problem", f"{prob.code}: {prob.message}", f"{reason} [{prob.code}]{fix}")
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
        return bool(c.get("hiprtc") or c.get("hipcc")), "hiprtc or hipcc"
    if env.backend == "cuda":
        return bool(c.get("nvrtc") or c.get("nvcc")), "NVRTC or nvcc"
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


# Each check gets the environment, the value ``markers.validate`` parsed, and the marker's arguments.
def missing_gpu(env: GpuEnv) -> Skip:
    """The skip of a test that needs some usable GPU where there is none (``requires_gpu``'s, and the
    GPU fixtures')."""
    return _skip_missing(env, "a GPU", "vendor")


def _check_gpu(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if not _usable(env):
        return missing_gpu(env)
    return _arch_not_in_build(env, "a GPU")


def _check_cuda(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.backend != "cuda" or not _usable(env, "nvidia"):
        return _skip_missing(env, "CUDA", "vendor")
    return None


def _check_rocm(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.backend != "rocm" or not _usable(env, "amd"):
        return _skip_missing(env, "ROCm", "vendor")
    return _arch_not_in_build(env, "ROCm")


def _check_hip(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if not _usable(env):
        return _skip_missing(env, "HIP (ROCm, or NVIDIA through HIP-on-CUDA)", "vendor")
    ok, what = _hip_toolchain(env)
    if ok:
        return None
    return Skip(
        "toolchain", f"no HIP compiler ({what})", f"requires HIP: found {env.describe()} but no {what} to compile HIP kernels"
    )


def _check_wsl(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.wsl is not None and (value is None or env.wsl == value):
        return None
    want = "WSL" if value is None else f"WSL {value}"
    have = "not WSL" if env.wsl is None else f"WSL {env.wsl}"
    return Skip("wsl", f"requires {want}; found {have}", f"requires {want}: found {have} ({env.platform})")


def _check_devices(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    have = len(_usable(env))
    if have >= value:
        return None
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


def _check_memory(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    devs = _usable(env)
    if not devs:
        return _skip_missing(env, f"a GPU with {format_size(value)}", "memory")
    known = [d.memory_bytes for d in devs if d.memory_bytes is not None]
    label = f"requires_memory({safe_repr(args[0])})" if isinstance(args[0], str) else f"requires_memory({format_size(value)})"
    if not known:
        return Skip("memory", "device memory unknown", f"{label}: the memory of {env.describe_devices(devs)} is unknown")
    if max(known) < value:
        return Skip("memory", label, f"{label}: largest device has {format_size(max(known))}")
    return None


def _check_arch(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    devs = _usable(env)
    pats = " or ".join(p.text for p in value)
    if not devs:
        return _skip_missing(env, f"arch {pats}", "arch")
    if any(p.matches(d.arch) for p in value for d in devs):
        return None
    archs = ", ".join(sorted({d.arch or "unknown arch" for d in devs}))
    return Skip("arch", f"requires arch {pats}", f"requires arch {pats}: found {archs} ({env.describe_devices(devs)})")


def _check_skip_on(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    for cond in value:
        if _condition_holds(cond, env):
            why = kwargs.get("reason")
            text = f"skip_on({_cond_text(cond)!r}): this run is on {env.describe()}"
            if why:
                text += f": {why}"
            return Skip("condition", f"skip_on({_cond_text(cond)!r})", text)
    return None


def _check_capability(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    from pytest_gpuenv import capabilities

    want = ", ".join(r.text for r in value)
    if not _usable(env):
        return _skip_missing(env, want, "capability")
    why = capabilities.missing(env, value)
    return None if why is None else Skip("capability", why.split(":")[0], why)


if TYPE_CHECKING:  # (an alias for the checker: a typing subscript costs every import)
    _Check = Callable[[GpuEnv, Any, tuple, dict], Optional[Skip]]
#: the markers that can skip a test (xfail_on marks it expected to fail instead; perf only labels it)
_CHECKS: dict[str, _Check] = {
    "requires_gpu": _check_gpu,
    "requires_cuda": _check_cuda,
    "requires_rocm": _check_rocm,
    "requires_hip": _check_hip,
    "requires_wsl": _check_wsl,
    "requires_devices": _check_devices,
    "requires_memory": _check_memory,
    "requires_arch": _check_arch,
    "skip_on": _check_skip_on,
    "requires_capability": _check_capability,
}


def evaluate_mark(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], env: GpuEnv) -> Optional[Skip]:
    """The Skip for one marker (``markers.MarkerArgumentError`` for a bad argument), or None."""
    value = validate(name, args, kwargs)
    check = _CHECKS.get(name)
    return check(env, value, args, kwargs) if check is not None else None


def evaluate(marks: Iterable[Any], env: GpuEnv) -> Optional[Skip]:
    """The first Skip among an item's GPU markers, or None when it may run."""
    for m in marks:
        if m.name in _CHECKS:
            skip = evaluate_mark(m.name, tuple(m.args), dict(m.kwargs), env)
            if skip is not None:
                return skip
    return None


def xfail_for(marks: Iterable[Any], env: GpuEnv) -> Optional[tuple[str, bool]]:
    """(reason, strict) when an ``xfail_on`` condition holds."""
    for m in marks:
        if m.name != "xfail_on":
            continue
        for cond in validate(m.name, tuple(m.args), dict(m.kwargs)):
            if _condition_holds(cond, env):
                why = m.kwargs.get("reason")
                text = f"xfail_on({_cond_text(cond)!r}): expected to fail on {env.describe()}"
                if why:
                    text += f": {why}"
                return text, bool(m.kwargs.get("strict", False))
    return None


#: ``--gpuenv-require`` value -> the marker whose check it is, and the backend's name for people
_REQUIRED = {"gpu": ("requires_gpu", "a GPU"), "cuda": ("requires_cuda", "CUDA"), "rocm": ("requires_rocm", "ROCm")}


def require_failure(env: GpuEnv, want: str, summary: str) -> Optional[str]:
    """``--gpuenv-require``: None when ``want`` (``gpu``, ``cuda``, ``rocm``; ``off``) is usable, else the
    message that stops the run: what was found (``summary``: the header's text), why not, and every problem
    of the model with its fix (informational notes too: on a runner that lost its GPU they are the clues)."""
    if want == "off":
        return None
    if want in _REQUIRED:
        marker, label = _REQUIRED[want]
        skip = evaluate_mark(marker, (), {}, env)
    else:  # capabilities, comma-separated (checked by the option parser)
        label = want
        skip = evaluate_mark("requires_capability", tuple(want.split(",")), {}, env)
    if skip is None:
        return None
    lines = [f"gpuenv: --gpuenv-require={want}: {label} is not usable here, so no test was run.",
             f"  found: {summary}", f"  {skip.reason}"]
    for p in env.problems:
        if f"[{p.code}]" not in skip.reason:
            lines.append(f"  [{p.code}] {p.message.rstrip('.')}" + (f"; fix: {p.fix}" if p.fix else ""))
    return "\n".join(lines)
