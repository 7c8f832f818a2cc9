"""What each GPU marker requires of an environment model: one check per marker, returning a ``Skip``.

A check gets the model, the value the marker's row parsed from its arguments (``marks.markers.MARKERS``), and
the marker's arguments as written; it returns ``None`` when the test may run here, else a ``Skip`` saying
what was required and what was found, with the fix where a known problem is the cause (an arch or memory
detection could not learn included: ``gpu-facts-unknown``). ``marks.markers`` puts
each check in its marker's row; ``marks.skipping`` applies the rows to a test's marks.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from pytest_gpuenv.base.model import (
    ArchPattern,
    Device,
    GpuEnv,
    Problem,
    Usability,
    format_size,
    kind_label,
    safe_repr,
)


class Skip(NamedTuple):
    """Why a test skips: its ``reason``, and the ``category`` ("vendor", "arch", "memory", "devices",
    "toolchain", "wsl", "platform", "problem", "backend-option", "condition", "no-gpu", "capability") and
    ``cause`` (a group label, no test-specific detail) that group it in the summary."""

    category: str
    cause: str
    reason: str

    def noted(self, note: str) -> Skip:
        """This skip with ``note`` added to its reason."""
        return self._replace(reason=self.reason + note)


def _blocking_problem(env: GpuEnv) -> Optional[Problem]:
    """The error-level problem that explains why GPUs are not usable (first one)."""
    return next((p for p in env.problems if p.severity == "error"), None)


def _unknown_note(env: GpuEnv, unknown: bool) -> str:
    """Where a verdict turned on an arch or memory detection could not learn (``unknown``): the problem that
    says why and its fix, for the end of a skip reason; else ""."""
    p = env.problem("gpu-facts-unknown") if unknown else None
    if p is None:
        return ""
    return f" [{p.code}]" + (f"; fix: {p.fix}" if p.fix else "")


def _count_note(env: GpuEnv) -> str:
    """Where only the runtime probe could count the GPUs (WSL 2, Windows) and it failed: its problem and fix
    (hip-python, cuda-python or torch missing, a hung runtime), for the end of a skip reason; else ""."""
    if env.usable is not Usability.PROBE_REQUIRED:
        return ""
    p = env.problem("probe-failed") or env.problem("probe-timeout")
    return "" if p is None else f" [{p.code}]" + (f"; fix: {p.fix}" if p.fix else "")


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
        return Skip("no-gpu", _short_found(env), reason + _count_note(env))
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


def condition_holds(cond: Any, env: GpuEnv) -> bool:
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


def cond_text(cond: Any) -> str:
    return cond.text if isinstance(cond, ArchPattern) else cond


def _arch_not_in_build(env: GpuEnv, want: str) -> Optional[Skip]:
    """The GPU is there, but the installed ROCm/torch build has no code for its arch: frameworks fail
    with 'invalid device function'. HIP kernels compiled here for the device (requires_hip) still run."""
    p = env.problem("arch-not-in-build") if env.usable is Usability.ARCH_UNSUPPORTED else None
    if p is None:
        return None
    fix = f"; {p.fix}" if p.fix else ""
    return Skip("problem", f"{p.code}: {p.message}", f"requires {want}: {p.message} [{p.code}]{fix}")


def missing_gpu(env: GpuEnv) -> Skip:
    """The skip of a test that needs some usable GPU where there is none (``requires_gpu``'s, and the
    GPU fixtures')."""
    return _skip_missing(env, "a GPU", "vendor")


def requires_gpu(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if not _usable(env):
        return missing_gpu(env)
    return _arch_not_in_build(env, "a GPU")


def requires_cuda(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.backend != "cuda" or not _usable(env, "nvidia"):
        return _skip_missing(env, "CUDA", "vendor")
    return None


def requires_rocm(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.backend != "rocm" or not _usable(env, "amd"):
        return _skip_missing(env, "ROCm", "vendor")
    return _arch_not_in_build(env, "ROCm")


def requires_hip(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if not _usable(env):
        return _skip_missing(env, "HIP (ROCm, or NVIDIA through HIP-on-CUDA)", "vendor")
    ok, what = _hip_toolchain(env)
    if ok:
        return None
    return Skip(
        "toolchain", f"no HIP compiler ({what})", f"requires HIP: found {env.describe()} but no {what} to compile HIP kernels"
    )


def requires_wsl(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    if env.wsl is not None and (value is None or env.wsl == value):
        return None
    want = "WSL" if value is None else f"WSL {value}"
    have = "not WSL" if env.wsl is None else f"WSL {env.wsl}"
    return Skip("wsl", f"requires {want}; found {have}", f"requires {want}: found {have} ({env.platform})")


def requires_devices(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
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


def requires_memory(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    devs = _usable(env)
    if not devs:
        return _skip_missing(env, f"a GPU with {format_size(value)}", "memory")
    known = [d.memory_bytes for d in devs if d.memory_bytes is not None]
    label = f"requires_memory({safe_repr(args[0])})" if isinstance(args[0], str) else f"requires_memory({format_size(value)})"
    note = _unknown_note(env, len(known) < len(devs))
    if not known:
        return Skip("memory", "device memory unknown",
                    f"{label}: the memory of {env.describe_devices(devs)} is unknown{note}")
    if max(known) < value:
        return Skip("memory", label, f"{label}: largest device has {format_size(max(known))}"
                    + (" (the others' memory is unknown)" if note else "") + note)
    return None


def requires_arch(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    devs = _usable(env)
    pats = " or ".join(p.text for p in value)
    if not devs:
        return _skip_missing(env, f"arch {pats}", "arch")
    if any(p.matches(d.arch) for p in value for d in devs):
        return None
    archs = ", ".join(sorted({d.arch or "unknown arch" for d in devs}))
    note = _unknown_note(env, any(d.arch is None for d in devs))
    return Skip("arch", f"requires arch {pats}",
                f"requires arch {pats}: found {archs} ({env.describe_devices(devs)}){note}")


def skip_on(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    for cond in value:
        if condition_holds(cond, env):
            why = kwargs.get("reason")
            text = f"skip_on({cond_text(cond)!r}): found {env.describe()}"
            if why:
                text += f": {why}"
            return Skip("condition", f"skip_on({cond_text(cond)!r})", text)
    return None


def requires_capability(env: GpuEnv, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Skip]:
    want = ", ".join(r.text for r in value)
    if not _usable(env):
        return _skip_missing(env, want, "capability")
    from pytest_gpuenv.base.capabilities import missing  # boundary: the capability table (as the marker's parse)

    why = missing(env, value)
    if why is None:
        return None
    return Skip("capability", why.split(":")[0], why + _unknown_note(env, any(d.arch is None for d in _usable(env))))
