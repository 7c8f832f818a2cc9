"""``--gpuenv-plan``: which GPU-marked tests each CI runner profile would run or skip, and why.

A profile is a root folder (a saved machine tree, detected as ``--gpuenv-root`` would), ``@file``
(a host's saved ``gpuenv info --json`` output: preview what each host of an xdist run will run), or
a short spec ``backend:arch:NxSIZE[:wsl2]`` such as ``rocm:gfx90a:4x64GiB``, ``cuda:sm_90:1x80GiB``
or ``cpu``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable, Optional

import pytest

from pytest_gpuenv.marks import skipping
from pytest_gpuenv.marks import markers
from pytest_gpuenv.dist.routing import plan_lines as routing_lines
from pytest_gpuenv.detect import detect
from pytest_gpuenv.base.files import read_regular
from pytest_gpuenv.base.model import (
    MAX_DEVICES,
    ArchPattern,
    Device,
    GpuEnv,
    default_warp_size,
    parse_size,
    safe_repr,
)

#: the largest ``@FILE`` profile read: a `gpuenv info --json` of 8 GPUs is a few KiB
MAX_PROFILE_BYTES = 4 << 20
DEFAULT_PROFILES = ("cpu", "cuda:sm_90:1x80GiB", "rocm:gfx942:8x192GiB", "rocm:gfx1100:1x24GiB:wsl2")
_SPEC = re.compile(r"^(cpu|cuda|rocm)(?::([^:]+))?(?::(\d+)x([^:]+))?(?::(wsl2?))?$", re.IGNORECASE)


def profile_from_spec(spec: str) -> tuple[str, GpuEnv]:
    """(label, model) for one profile. Raises ``pytest.UsageError`` for a malformed spec."""
    if spec.startswith("@"):
        return profile_from_file(spec)
    if os.path.isdir(spec):
        env = detect(root=os.path.abspath(spec), probe="never")
        return os.path.basename(os.path.normpath(spec)), env
    m = _SPEC.match(spec.strip())
    if not m:
        # pytest reads a separate "@FILE" argument as a file of arguments: the JSON's lines arrive here
        hint = ""
        if spec.lstrip().startswith(("{", "[", '"')):
            hint = ("; a saved `gpuenv info --json` is written --gpuenv-plan-profile=@FILE.json, with the '=' "
                    "(pytest reads a separate @FILE argument as a file of arguments)")
        raise pytest.UsageError(
            f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: expected a root folder or "
            f"backend:arch:NxSIZE[:wsl2], e.g. rocm:gfx90a:4x64GiB, cuda:sm_90:1x80GiB, cpu{hint}"
        )
    backend, arch, count, size, wsl = m.groups()
    backend = backend.lower()
    if backend == "cpu":
        if arch or count:
            raise pytest.UsageError(
                f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: 'cpu' takes no arch or devices"
            )
        return "CPU-only", GpuEnv(backend="cpu", kind="cpu")
    if not arch:
        example = "sm_90" if backend == "cuda" else "gfx942"
        raise pytest.UsageError(
            f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: give an arch, e.g. {backend}:{example}"
        )
    try:
        pat = ArchPattern.parse(arch)
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: {exc}") from None
    vendor = "nvidia" if backend == "cuda" else "amd"
    if pat.vendor != vendor or any(c in pat.text for c in "*?[+"):
        raise pytest.UsageError(
            f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: "
            f"{safe_repr(arch)} is not a concrete {backend} arch"
        )
    n, mem = _count_and_size(spec, count, size)
    devices = [
        Device(index=i, vendor=vendor, name=f"{vendor.upper()} {pat.text}", arch=pat.text, memory_bytes=mem,
               warp_size=default_warp_size(pat.text), source="profile")
        for i in range(n)
    ]
    compilers = {"hiprtc": vendor == "amd", "nvrtc": vendor == "nvidia", "hipcc": None, "nvcc": None}
    env = GpuEnv(
        backend=backend, kind=backend + ("-wsl" if wsl else ""), wsl=2 if wsl else None, devices=devices,
        compilers=compilers, torch={"version": "?", "build": backend},
    )
    label = ("NVIDIA " if vendor == "nvidia" else "AMD ") + pat.text + (" WSL 2" if wsl else "")
    if n > 1:
        label += f" x{n}"
    return label, env


def _count_and_size(spec: str, count: Optional[str], size: Optional[str]) -> tuple[int, Optional[int]]:
    """The devices of a spec (1 to MAX_DEVICES) and their memory (1 byte to MAX_SIZE, or unknown)."""
    if count and (len(count) > 6 or not 1 <= int(count) <= MAX_DEVICES):
        raise pytest.UsageError(f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: "
                                f"the device count must be from 1 to {MAX_DEVICES}")
    try:
        mem = parse_size(size) if size else None
    except ValueError as exc:
        raise pytest.UsageError(f"gpuenv: malformed --gpuenv-plan-profile {safe_repr(spec)}: {exc}") from None
    return (int(count) if count else 1), mem


def profile_from_file(spec: str) -> tuple[str, GpuEnv]:
    """(file name without extension, model) for ``@path``, a saved ``gpuenv info --json`` output."""
    path = spec[1:]
    try:
        raw = read_regular(path, MAX_PROFILE_BYTES)
        if raw is None:
            raise ValueError("not a regular file")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        env = GpuEnv.from_dict(data)
        _check_model(env)
    except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise pytest.UsageError(
            f"gpuenv: --gpuenv-plan-profile {safe_repr(spec)}: not a readable `gpuenv info --json` output: "
            f"{safe_repr(str(exc), 200)}"
        ) from None
    return os.path.splitext(os.path.basename(path))[0] or path, env


def _check_model(env: GpuEnv) -> None:
    """ValueError naming the first field the markers read that has the wrong type."""
    if env.backend not in ("cpu", "cuda", "rocm"):
        raise ValueError(f"backend {safe_repr(env.backend)} is not cpu, cuda or rocm")
    for d in env.devices + env.hidden_devices:
        checks = [("index", d.index, int, False), ("vendor", d.vendor, str, False), ("arch", d.arch, str, True),
                  ("memory_bytes", d.memory_bytes, int, True), ("usable", d.usable, bool, False)]
        for name, value, kind, optional in checks:
            if not (isinstance(value, kind) or (optional and value is None)) or (kind is int and value is True):
                raise ValueError(f"device {name} {safe_repr(value)} is not {kind.__name__}")
    if not isinstance(env.compilers, dict) or not isinstance(env.problems, list):
        raise ValueError("compilers must be an object and problems a list")


def profiles(specs: Iterable[str]) -> list[tuple[str, GpuEnv]]:
    specs = list(specs)
    return [profile_from_spec(s) for s in (list(DEFAULT_PROFILES) + specs)]


def _verdict(item: pytest.Item, env: GpuEnv) -> str:
    marks = markers.plugin_marks(item)
    skip = skipping.evaluate(marks, env)
    if skip is not None:
        return f"skip: {skip.cause}"
    xf = skipping.xfail_for(marks, env)
    return "xfail" if xf else "run"


def plan_lines(items: list[pytest.Item], profs: list[tuple[str, GpuEnv]], given: int = 0) -> list[str]:
    """The table; with ``given`` (the profiles the user gave, last in ``profs``) of two or more, the routing
    ``--dist gpu`` over hosts like them would make (``dist.routing.plan_lines``)."""
    from tabulate import tabulate

    gpu_items = [i for i in items if markers.plugin_marks(i)]
    if not gpu_items:
        return ["no GPU-marked tests collected"]
    rows: list[list[Any]] = []
    never: list[str] = []
    errors: list[str] = []  # a bad marker argument: the test is an error on every profile, said once below
    for item in gpu_items:
        error = markers.check_marks(markers.plugin_marks(item))
        if error:
            errors.append(f"  {item.nodeid}: {error}")
            rows.append([item.nodeid] + ["error"] * len(profs))
            continue
        verdicts = [_verdict(item, env) for _label, env in profs]
        rows.append([item.nodeid] + verdicts)
        if not any(v in ("run", "xfail") for v in verdicts):
            never.append(item.nodeid)
    lines: list[str] = tabulate(rows, headers=["test"] + [label for label, _ in profs], tablefmt="simple").splitlines()
    runs = [sum(1 for r in rows if r[i + 1] in ("run", "xfail")) for i in range(len(profs))]
    lines.append("")
    lines.append("runs per profile: " + ", ".join(f"{label} {n}/{len(rows)}" for (label, _), n in zip(profs, runs)))
    if never:
        lines.append(f"{len(never)} test(s) run on no profile (a stale skip, or markers nothing satisfies):")
        lines.extend(f"  {n}" for n in never)
    if errors:
        lines.append(f"{len(errors)} test(s) with a bad marker argument (an error wherever they run):")
        lines.extend(errors)
    return lines + (routing_lines(items, profs[len(profs) - given:]) if given >= 2 else [])
