"""GPU environment detection without touching the GPU (DETECTION.md).

``detect()`` reads files, environment variables and ``stat``/``os.access`` results (T0/T1), may ask
NVML (nvidia-ml-py, through ``pytest_gpuenv.runtime.nvml``) on a real NVIDIA system (T2, no CUDA
context), and runs a runtime probe in a subprocess with a timeout only where files cannot list devices
(WSL 2, native Windows) or when asked (T3). It never imports torch/hip/cuda, never opens a device
node, and never raises: whatever is wrong with the system (or with the file tree it was pointed at)
becomes a ``Problem``.

Modules: ``_core`` (the decision procedure) with ``_amd``, ``_nvidia``, ``_wsl`` and ``_windows`` per
platform, ``detect.compilers`` (ROCm/CUDA installs, compilers, libraries), ``detect.visible`` (the masks),
``_probe`` (T3), ``detect.checks`` (torch's build read from its files; arch and torch build checks), ``detect.fs`` (every
read, under a root).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping
from typing import Any, Optional

from pytest_gpuenv.base.model import BACKEND_CHOICES, GpuEnv, Problem, Usability, family
from pytest_gpuenv.detect.visible import parse_visible

__all__ = ["detect", "apply_backend", "hide_gpus_env", "parse_visible", "family", "PROBE_TIMEOUT_MAX",
           "probe_timeout_ok"]

#: the longest runtime probe, in seconds (``--gpuenv-probe-timeout`` and ``gpuenv info --probe-timeout``)
PROBE_TIMEOUT_MAX = 3600


def probe_timeout_ok(secs: float) -> bool:
    """The probe timeout's bounds, for ``--gpuenv-probe-timeout`` and ``gpuenv info --probe-timeout``."""
    return 0 < secs <= PROBE_TIMEOUT_MAX


def detect(
    root: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    probe: str = "auto",
    probe_timeout: float = 20.0,
    probe_cache: Any = None,
    platform: Optional[str] = None,
) -> GpuEnv:
    """Describe the GPU environment of this system, or of the file tree under ``root``.

    :param root: read ``/proc``, ``/sys``, ``/dev``, ``/opt``, ``/usr``... under this folder, as after a
        ``chroot`` (links and ``..`` never lead out of it); no library is loaded and no process is started.
        ``None`` or ``""``: the real system.
    :param environ: environment variables (default ``os.environ``), used in root mode too.
    :param probe: ``"auto"`` (runtime probe only where files cannot list devices), ``"always"``,
        ``"never"`` (also skips NVML).
    :param probe_timeout: seconds the probe subprocess may run.
    :param probe_cache: dict-like with ``get``/``set`` (pytest's ``config.cache``) for probe results.
    :param platform: override ``sys.platform`` (tests).
    """
    t0 = time.perf_counter()
    root = root or None  # "" means unset, as everywhere
    env = GpuEnv(root=os.path.abspath(root) if root is not None else "/")
    try:
        from pytest_gpuenv.detect._core import run

        run(env, root, os.environ if environ is None else environ, probe, probe_timeout, probe_cache, platform)
    except Exception as exc:  # the detector never raises: report and fall back to CPU
        env.backend, env.usable = "cpu", Usability.UNUSABLE
        for d in env.devices:
            d.usable = False
        env.problems.append(
            Problem(
                "detect-internal-error",
                f"GPU detection failed: {type(exc).__name__}: {exc}",
                fix="please report this with `gpuenv info --json` output; GPU tests are skipped",
                severity="error",
                category="environment",
            )
        )
    env.detect_seconds = time.perf_counter() - t0
    return env


def apply_backend(env: GpuEnv, backend: str) -> GpuEnv:
    """``--gpuenv-backend``: ``auto`` returns ``env``; ``cpu`` hides every GPU; ``cuda``/``rocm`` require it.

    The plugin has already turned a bad value into a usage error naming its source; a direct caller
    passing a value outside ``BACKEND_CHOICES`` gets a ValueError.
    """
    if backend in (None, "", "auto"):
        return env
    if backend not in BACKEND_CHOICES:
        raise ValueError(f"invalid backend {backend!r}; expected one of {', '.join(BACKEND_CHOICES)}")
    out = copy.deepcopy(env)
    out.forced_backend = backend
    if backend == "cpu":
        out.backend = "cpu"
        for d in out.devices:
            d.usable = False
            d.unusable_reason = "hidden by --gpuenv-backend=cpu"
        return out
    if not (out.backend == backend and out.usable_devices):
        label = {"cuda": "CUDA", "rocm": "ROCm"}[backend]
        errors = [p for p in out.problems if p.severity == "error" and p.fix]
        found = out.describe()
        out.problems.append(
            Problem(
                "backend-not-available",
                f"--gpuenv-backend={backend} requires a usable {label} GPU, found {found}",
                fix=errors[0].fix if errors else f"run on a machine with a usable {label} GPU, or use "
                "--gpuenv-backend=auto",
                severity="error",
                category="environment",
            )
        )
    return out


def hide_gpus_env(env: GpuEnv) -> dict[str, str]:
    """Variables that make frameworks see no GPU (what ``--gpuenv-backend=cpu`` sets for the tests)."""
    fam = family(env.kind)
    vendors = {d.vendor for d in [*env.devices, *env.hidden_devices]}
    out = {"CUDA_VISIBLE_DEVICES": ""}
    if fam == "rocm" or "amd" in vendors or fam == "cpu":
        # HIP_VISIBLE_DEVICES='' hides every device from HIP and torch; ROCR_VISIBLE_DEVICES='' alone
        # would count as one device for torch's parser, so it is always set together with HIP's.
        out["HIP_VISIBLE_DEVICES"] = ""
        if fam == "rocm" or "amd" in vendors:
            out["ROCR_VISIBLE_DEVICES"] = ""
    return out

