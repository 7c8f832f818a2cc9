"""Plain functions that turn the model into lines of text: the header (``header_lines``, also the body
of ``gpuenv info``), the one-line ``summary``, the hardware-skip summary (``skip_summary_lines``) and the
hosts of an xdist run (``host_lines``)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Optional

from pytest_gpuenv.base.model import GpuEnv, Usability, format_size, kind_label


def _torch_text(env: GpuEnv) -> Optional[str]:
    if env.torch is None:
        return None
    v = env.torch.get("version") or "?"
    build = env.torch.get("build")
    return f"torch {v}" + (" (CPU build)" if build == "cpu" and "+cpu" not in v else "")


def summary(env: GpuEnv) -> str:
    """``cuda, 1x NVIDIA H200 (sm_90, 139.8 GiB), driver 580.159.04, torch 2.11.0+cu130``."""
    parts: list[str] = []
    head = env.backend
    if env.forced_backend:
        head += f" (forced by --gpuenv-backend={env.forced_backend})"
    if env.kind not in ("cpu", env.backend):
        head += f" [{kind_label(env.kind)}]"
    if env.wsl and "WSL" not in head:
        head += f" [WSL {env.wsl}]"
    parts.append(head)
    if env.devices:
        text = env.describe_devices()
        unusable = [d for d in env.devices if not d.usable]
        if unusable and len(unusable) == len(env.devices):
            text += " (not usable)"
        elif unusable:
            text += f" ({len(unusable)} not usable)"
        parts.append(text)
    elif env.usable is Usability.PROBE_REQUIRED:
        parts.append("devices unknown (needs a runtime probe)")
    else:
        parts.append("no GPU")
    if env.cuda.get("driver_version"):
        parts.append(f"driver {env.cuda['driver_version']}")
    if env.rocm.get("version"):
        parts.append(f"ROCm {env.rocm['version']}")
    if env.rocm.get("driver_version"):
        parts.append(f"amdgpu {env.rocm['driver_version']}")
    if env.hip_sdk:
        sdk = env.hip_sdk.get("version") or env.hip_sdk.get("path")
        dll = env.hip_sdk.get("dll")
        parts.append("HIP SDK" + (f" {sdk}" if sdk else "") + (f" ({dll})" if dll else ""))
    t = _torch_text(env)
    if t:
        parts.append(t)
    for var, val in env.visible.items():
        if var.endswith("VISIBLE_DEVICES") or var == "HSA_OVERRIDE_GFX_VERSION":
            parts.append(f"{var}={val!r}" if val == "" else f"{var}={val}")
    return ", ".join(parts)


def header_lines(env: GpuEnv, verbose: int = 0, worker: Optional[dict[str, Any]] = None) -> list[str]:
    lines = [f"gpuenv: {summary(env)}"]
    if worker:
        lines.append(f"gpuenv: worker {worker.get('id')} uses GPU(s) {worker.get('desc')}")
    # one word per kind, everywhere (header, ``gpuenv info``, ``gpuenv doctor``, JUnit): severity "info"
    # (such as ROCm installed without a driver) is a note, anything else a problem
    for label, shown in (("problems", [p for p in env.problems if p.severity != "info"]),
                         ("notes", [p for p in env.problems if p.severity == "info"])):
        if not shown:
            continue
        codes = "; ".join(f"{p.code}: {p.message}" for p in shown[: (None if verbose else 2)])
        more = len(shown) - 2 if not verbose and len(shown) > 2 else 0
        lines.append(f"gpuenv: {label}: {codes}" + (f" (+{more} more; gpuenv doctor)" if more else ""))
    if verbose:
        c = env.compilers
        comp = ", ".join(
            f"{k} {'yes' if v is True else (v if v else 'no')}" for k, v in c.items()
        )
        lines.append(f"gpuenv: compilers: {comp}")
        if env.probe.get("ran") or env.probe.get("required"):
            lines.append(f"gpuenv: probe: {_probe_text(env)}")
        if env.detect_seconds is not None:
            lines.append(f"gpuenv: detected in {env.detect_seconds * 1e3:.1f} ms (root {env.root})")
        for d in env.devices + env.hidden_devices:
            extra = []
            if d.uuid:
                extra.append(d.uuid)
            if d.pci:
                extra.append(d.pci)
            if d.warp_size:
                extra.append(f"warp {d.warp_size}")
            if d.physical_arch and d.physical_arch != d.arch:
                extra.append(f"physical {d.physical_arch}")
            if d.last_level_cache_bytes:
                extra.append(f"last-level cache {format_size(d.last_level_cache_bytes)}")
            if d.source:
                extra.append(f"from {d.source}")
            state = "" if d.usable else f" NOT USABLE ({d.unusable_reason or 'see problems'})"
            hidden = " hidden by visible-devices" if d in env.hidden_devices and not str(
                d.unusable_reason or "").startswith("ROCr ") else ""
            lines.append(f"gpuenv:   [{d.index}] {d.describe()} {' '.join(extra)}{state}{hidden}".rstrip())
        if verbose > 1:
            for e in env.evidence:
                lines.append(f"gpuenv:   evidence {e}")
    return lines


def _probe_text(env: GpuEnv) -> str:
    p = env.probe
    if not p.get("ran"):
        return "required but not run" if p.get("required") else "not needed"
    bits = [f"ran via {p.get('source') or '?'}"]
    if p.get("seconds") is not None:
        bits.append(f"{p['seconds']:.2f} s")
    if p.get("error"):
        bits.append(f"error: {p['error']}")
    return ", ".join(bits)


def skip_summary_lines(skips: Iterable[tuple[str, ...]], hosts: Optional[dict[str, dict[str, Any]]] = None
                       ) -> list[str]:
    """Group hardware skips (category, cause[, host]) into one line per cause with its count; per host
    and cause when the run had several hosts (``hosts`` as in ``host_lines``) or the skips name several."""
    rows = [(s[0], s[1], s[2] if len(s) > 2 else "") for s in skips]
    if not rows:
        return []
    by_host = several_hosts(hosts or {}) or len({host for _c, _k, host in rows}) > 1
    counts = Counter(rows if by_host else [(c, k, "") for c, k, _h in rows])
    lines = [f"{len(rows)} test(s) skipped for hardware reasons:"]
    for (category, cause, host), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {n:4d}  {printable(category):<14} {printable(cause)}"
                     + (f"  [on {printable(host)}]" if by_host else ""))
    return lines


def printable(text: str) -> str:
    """``text`` with each character that is not printable (ESC, NUL, other controls) written as its escape,
    ``\\x1b``, as pytest writes test ids: a reason or host name cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def several_hosts(hosts: dict[str, dict[str, Any]]) -> bool:
    """Whether an xdist run's workers ran anywhere but on the controller's host alone."""
    return len(hosts) > 1 or any(not h.get("controller") for h in hosts.values())


def host_lines(hosts: dict[str, dict[str, Any]]) -> list[str]:
    """The hosts of an xdist run, each with its model and its workers' GPUs (``GpuenvSession.hosts``);
    ``[]`` when every worker ran on the controller's host, as the header already said."""
    if not several_hosts(hosts):
        return []
    lines = []
    for host in sorted(hosts.values(), key=lambda h: str(h.get("name"))):
        mark = " (the controller's host)" if host.get("controller") else ""
        lines.append(f"{host.get('name')}{mark}: {host.get('summary')}")
        tests = host_tests(host)
        lines.append(f"  tests: {tests['run']} run: {tests['passed']} passed, {tests['failed']} failed, "
                     f"{tests['skipped']} skipped")
        for worker, gpus in sorted(host.get("workers", {}).items()):
            lines.append(f"  {worker}: {gpus}")
    return lines


def host_tests(host: dict[str, Any]) -> dict[str, int]:
    """A host's tests (``GpuenvSession.hosts`` entry): run, passed, failed, skipped."""
    counts = host.get("tests") or {}
    out = {k: int(counts.get(k, 0)) for k in ("passed", "failed", "skipped")}
    return {"run": sum(out.values()), **out}


def hosts_json(hosts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``hosts`` of the ``--gpuenv-json`` report: each host's name, model, workers and tests."""
    return [{"name": h.get("name"), "summary": h.get("summary"), "controller": bool(h.get("controller")),
             "workers": dict(h.get("workers") or {}), "tests": host_tests(h)}
            for h in sorted(hosts.values(), key=lambda h: str(h.get("name")))]
