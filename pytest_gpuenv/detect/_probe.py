"""The runtime probe (T3): HIP, CUDA or torch asked in a subprocess, with a timeout, once.

Only this subprocess ever starts a GPU runtime. It prints one JSON object:
``{"source": "hip-python"|"cuda-python"|"torch"|None, "devices": [...], "errors": [...]}``; a device's
``uuid`` and ``pci`` (where the runtime gives them) find the files' device it completes.
The visible-devices variables are removed from its environment so that it lists every device;
the detector applies the masks itself (same parser for every source).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Optional

from pytest_gpuenv.detect.visible import MASK_VARS

SCRIPT = r'''
import json, sys
order = sys.argv[1].split(",") if len(sys.argv) > 1 else ["hip", "cuda", "torch"]
out = {"source": None, "devices": [], "errors": []}

def hip_probe():
    from hip import hip
    err, n = hip.hipGetDeviceCount()
    code = int(err)
    if code == 100:  # hipErrorNoDevice
        return []
    if code != 0:
        raise RuntimeError("hipGetDeviceCount: %s" % (err,))
    devs = []
    for i in range(n):
        props = hip.hipDeviceProp_t()
        err = hip.hipGetDeviceProperties(props, i)
        err = err[0] if isinstance(err, tuple) else err
        if int(err) != 0:
            raise RuntimeError("hipGetDeviceProperties(%d): %s" % (i, err))
        name = props.name
        arch = props.gcnArchName
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        arch = arch.decode(errors="replace") if isinstance(arch, bytes) else str(arch)
        pci = None
        try:  # the function digit (an MI300 partition's) is only here, not in the properties
            err, bus = hip.hipDeviceGetPCIBusId(13, i)
            if int(err) == 0:
                pci = bytes(bus).split(b"\0")[0].decode("ascii", "replace") if bus is not None else None
        except Exception:
            pci = None
        devs.append({"vendor": "amd", "name": name, "arch": arch.split(":")[0] or None,
                     "memory_bytes": int(props.totalGlobalMem), "warp_size": int(props.warpSize), "pci": pci})
    return devs

def cuda_probe():
    from cuda.bindings import driver as d
    err, = d.cuInit(0)
    if int(err) == 100:  # CUDA_ERROR_NO_DEVICE
        return []
    if int(err) != 0:
        raise RuntimeError("cuInit: %s" % (err,))
    err, n = d.cuDeviceGetCount()
    devs = []
    A = d.CUdevice_attribute
    for i in range(n):
        err, dev = d.cuDeviceGet(i)
        err, major = d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        err, minor = d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        err, warp = d.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev)
        err, mem = d.cuDeviceTotalMem(dev)
        err, name = d.cuDeviceGetName(128, dev)
        err, uu = d.cuDeviceGetUuid(dev)
        b = bytes(uu.bytes) if hasattr(uu, "bytes") else b""
        h = b.hex() if isinstance(b, bytes) else ""
        uuid = "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32]) if len(h) == 32 else None
        name = name.split(b"\0")[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        devs.append({"vendor": "nvidia", "name": name, "arch": "sm_%d%d" % (major, minor),
                     "memory_bytes": int(mem), "warp_size": int(warp), "uuid": uuid})
    return devs

def torch_probe():
    import torch
    n = torch.cuda.device_count()
    vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    devs = []
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        arch = getattr(p, "gcnArchName", None)
        arch = arch.split(":")[0] if arch else "sm_%d%d" % (p.major, p.minor)
        dev = {"vendor": vendor, "name": p.name, "arch": arch, "memory_bytes": int(p.total_memory),
               "warp_size": int(getattr(p, "warp_size", 64 if vendor == "amd" and arch.startswith("gfx9") else 32))}
        uu = str(getattr(p, "uuid", "") or "") if vendor == "nvidia" else ""
        if uu:  # what the files' device is found by (torch prints it without the GPU- prefix)
            dev["uuid"] = uu if uu.startswith(("GPU-", "MIG-")) else "GPU-" + uu
        if vendor == "nvidia" and isinstance(getattr(p, "pci_bus_id", None), int):
            dev["pci"] = "%04x:%02x:%02x.0" % (getattr(p, "pci_domain_id", 0), p.pci_bus_id, getattr(p, "pci_device_id", 0))
        devs.append(dev)
    out["arch_list"] = torch.cuda.get_arch_list() if n else []
    return devs

for name in order:
    fn = {"hip": hip_probe, "cuda": cuda_probe, "torch": torch_probe}.get(name)
    if fn is None:
        continue
    try:
        devs = fn()
    except BaseException as exc:
        out["errors"].append("%s: %s: %s" % (name, type(exc).__name__, str(exc)[:300]))
        continue
    out["source"] = {"hip": "hip-python", "cuda": "cuda-python", "torch": "torch"}[name]
    out["devices"] = devs
    if devs:
        break
sys.stdout.write("\n" + json.dumps(out) + "\n")
'''


def run_probe(order: list[str], environ: Any, timeout: float) -> dict[str, Any]:
    """Run SCRIPT; returns {"ok": bool, "devices": [...], "source", "error", "timed_out", "seconds"}."""
    import json
    import subprocess

    env = {k: v for k, v in dict(environ).items() if k not in MASK_VARS}
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    t0 = time.perf_counter()
    result: dict[str, Any] = {"ok": False, "devices": [], "source": None, "error": None, "timed_out": False}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, ",".join(order)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=os.name == "posix",
        )
    except OSError as exc:
        result["error"] = f"could not start {sys.executable}: {exc}"
        return _done(result, t0)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        result["timed_out"] = True
        result["error"] = f"probe did not answer within {timeout:g} s"
        return _done(result, t0)
    text = out.decode("utf-8", "replace").strip().splitlines()
    data: Optional[dict[str, Any]] = None
    if text:
        try:
            data = json.loads(text[-1])
        except ValueError:
            data = None
    if proc.returncode != 0 or not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
        result["error"] = f"probe exited with status {proc.returncode}" + (f": {' | '.join(tail)}" if tail else "")
        return _done(result, t0)
    devs = [d for d in data["devices"] if isinstance(d, dict)]
    result.update(ok=True, devices=devs, source=data.get("source"), errors=data.get("errors") or [])
    if data.get("arch_list") is not None:
        result["arch_list"] = data["arch_list"]
    if data.get("source") is None:
        result["error"] = "; ".join(str(e) for e in data.get("errors") or []) or "no runtime answered"
    return _done(result, t0)


def _kill(proc: Any) -> None:
    try:
        if os.name == "posix":
            import signal

            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover
            proc.kill()
    except OSError:
        pass
    with contextlib.suppress(Exception):
        proc.communicate(timeout=5)


def _done(result: dict[str, Any], t0: float) -> dict[str, Any]:
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def cache_key(fs: Any, environ: Any, kind: str, extra_paths: list[str]) -> str:
    """Key on boot id, the visibility/override variables and relevant mtimes (DETECTION.md 0.4)."""
    import hashlib
    import json

    parts = {
        "boot": (fs.read("/proc/sys/kernel/random/boot_id", 64) or "").strip(),
        "env": {k: environ.get(k) for k in (*MASK_VARS, "CUDA_DEVICE_ORDER", "HSA_OVERRIDE_GFX_VERSION",
                                            "HSA_ENABLE_DXG_DETECTION", "LD_LIBRARY_PATH")},
        "mtimes": {p: fs.mtime(p) for p in extra_paths},
        "kind": kind,
        "python": sys.executable,
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return f"gpuenv/probe/{digest}"


def count(v: Any) -> Optional[int]:
    """A number from the probe's or NVML's JSON (or a cached copy): an int in [0, 2**64), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64 else None


def cache_get(cache: Any, key: str) -> Optional[dict[str, Any]]:
    if cache is None:
        return None
    try:
        value = cache.get(key, None)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def cache_set(cache: Any, key: str, value: dict[str, Any]) -> None:
    if cache is None:
        return
    try:
        if hasattr(cache, "set"):
            cache.set(key, value)
        else:
            cache[key] = value
    except Exception:
        pass
