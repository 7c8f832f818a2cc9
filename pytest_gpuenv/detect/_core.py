"""The decision procedure of DETECTION.md section 2, filling a ``GpuEnv`` in place.

Platform first (``_platform``), then where the devices come from: native Linux here (KFD sysfs for AMD,
/proc/driver/nvidia plus NVML for NVIDIA), WSL 2 in ``_wsl``, native Windows in ``_windows``. Then the
runtime probe where files cannot count devices, the visible-devices masks, the checks of ``detect.checks``,
and the conclusion (backend, usable).

A platform's module is imported when the platform needs it (``_nvidia`` when the NVIDIA driver is
loaded, ``_wsl`` under WSL 2, ``_access`` when AMD GPUs are found, ``_rocr`` when they are usable, ``_probe``
when the probe runs, ``_windows`` on Windows, ``detect.caches`` when there are devices): one detection on a machine
without GPUs loads only what it reads.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from pytest_gpuenv.base.model import Device, GpuEnv, Usability, family
from pytest_gpuenv.detect import _amd
from pytest_gpuenv.detect import checks as _checks
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.checks import read_torch
from pytest_gpuenv.detect.compilers import find_compilers, rocm_userspace
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.detect.visible import apply_masks, visible_vars


def run(env: GpuEnv, root: Optional[str], environ: Any, probe: str, timeout: float, cache: Any,
        platform: Optional[str]) -> None:
    fs = Fs(root)
    ctx = Ctx(env, fs, environ, probe if probe in ("auto", "always", "never") else "auto", timeout, cache)
    env.platform = _platform(fs, platform)
    env.visible = visible_vars(environ)
    if env.platform != "windows" or not fs.root_mode:
        env.torch = read_torch(fs, environ, ctx.ev)
    if env.platform == "windows":
        from pytest_gpuenv.detect._windows import windows

        windows(ctx)
    elif env.platform == "linux":
        _linux(ctx)
    else:
        env.kind = "cpu"
        ctx.ev.append(f"platform {env.platform}: no ROCm/CUDA support, CPU only")
    probed = _maybe_probe(ctx)
    _masks(ctx)
    if probed is not None and family(env.kind) == "rocm" and 0 <= probed < len(env.devices):
        ctx.add("hip-sees-fewer-devices", f"HIP counts {probed} GPU(s) where the files and masks give "
                f"{len(env.devices)}: clr leaves out a device whose Device::create() fails after the masks "
                "(rocclr/device/rocm/rocdevice.cpp Device::init), so HIP's indices past it shift",
                "run `AMD_LOG_LEVEL=1 python -c \"import torch; print(torch.cuda.device_count())\"` to see which "
                "device fails", "warning", "driver")
    if env.devices or env.hidden_devices:  # last-level cache sizes from ROCm's spec table
        from pytest_gpuenv.detect import caches

        caches.fill([*env.devices, *env.hidden_devices])
    _checks.unknown_facts(ctx)
    _checks.arch_support(ctx)
    _checks.torch_problems(ctx)
    _checks.rocm_runtime(ctx)
    _conclude(ctx)
    _unreadable(ctx)


def _platform(fs: Fs, override: Optional[str]) -> str:
    p = override
    if p is None and fs.root_mode:
        if fs.isdir("/Windows") or fs.isdir("/C/Windows") or fs.isdir("/c/Windows"):
            return "windows"
        return "linux"
    p = (p or sys.platform).lower()
    if p.startswith("win") or p == "cygwin":
        return "windows"
    if p.startswith("darwin") or p == "macos":
        return "darwin"
    return "linux" if p.startswith("linux") else p


# ------------------------------------------------------------------------------------------ Linux
def _wsl_version(fs: Fs, osrel: str, environ: Any) -> Optional[int]:
    """1 or 2 under WSL (from the kernel release, the WSL variables and files), else None."""
    low = osrel.lower()
    if "microsoft" in low or "wsl" in low:
        return 1 if ("Microsoft" in osrel and "standard" not in low) else 2
    if environ.get("WSL_DISTRO_NAME") or fs.exists("/proc/sys/fs/binfmt_misc/WSLInterop") or fs.isdir("/run/WSL"):
        if environ.get("WSL_INTEROP") or fs.exists("/dev/dxg") or fs.isdir("/run/WSL"):
            return 2
        return 1 if environ.get("WSL_DISTRO_NAME") else 2
    return None


def _linux(ctx: Ctx) -> None:
    fs, env, ev, environ = ctx.fs, ctx.env, ctx.ev, ctx.environ
    osrel = (fs.read("/proc/sys/kernel/osrelease", 256) or "").strip()
    if osrel:
        ev.append(f"/proc/sys/kernel/osrelease: {osrel[:80]}")
    env.wsl = _wsl_version(fs, osrel, environ)
    env.container = (
        fs.exists("/.dockerenv")
        or fs.exists("/run/.containerenv")
        or (fs.read("/proc/1/cgroup", 4096) or "").strip() == "0::/"
    )
    if env.container:
        ev.append("container: /.dockerenv, /run/.containerenv or /proc/1/cgroup '0::/'")
    ctx.rocm = rocm_userspace(fs, environ, ev)
    env.rocm = {k: ctx.rocm[k] for k in ("version", "path", "driver_version", "hip_runtime")}
    env.compilers = find_compilers(fs, environ, ctx.rocm, ev)
    if env.wsl == 1:
        ctx.add(
            "wsl1-no-gpu",
            f"WSL 1 detected (kernel {osrel or '?'}); GPU compute needs WSL 2",
            "convert the distribution from PowerShell: `wsl --set-version <distro> 2`",
            "error",
            "wsl",
        )
        env.kind = "cpu"
        return
    if env.wsl == 2:
        from pytest_gpuenv.detect import _wsl

        _wsl.wsl2(ctx)
        return
    _native_linux(ctx)


def _native_linux(ctx: Ctx) -> None:
    fs, env, ev = ctx.fs, ctx.env, ctx.ev
    mod = _amd.amdgpu_module(fs)
    env.rocm["driver_version"] = mod["version"]
    topo = _amd.topology_dir(fs)
    amd = _amd_devices(ctx, mod, topo)
    nv_loaded = fs.exists("/proc/driver/nvidia/version") or fs.isdir("/proc/driver/nvidia/gpus")
    nv = _nvidia_devices(ctx) if nv_loaded else []
    if not amd and not nv:
        _no_gpu_found(ctx, mod, topo, nv_loaded)
    if amd and (not nv or (env.torch or {}).get("build") != "cuda"):
        env.kind, ctx.devices = "rocm", amd
        if nv:
            ev.append(f"also found {len(nv)} NVIDIA GPU(s); ROCm chosen (rocm > cuda unless torch is a CUDA build)")
    elif nv:
        env.kind, ctx.devices = "cuda", nv
        if amd:
            ev.append(f"also found {len(amd)} AMD GPU(s); CUDA chosen to match the torch build")
    else:
        env.kind = "cpu"


def _amd_devices(ctx: Ctx, mod: dict[str, Any], topo: Optional[str]) -> list[Device]:
    """KFD GPU nodes, checked against the driver state, HSA_OVERRIDE_GFX_VERSION and /dev access."""
    fs, ev = ctx.fs, ctx.ev
    amd = _amd.kfd_devices(fs, topo, ev, ctx.problems) if topo else []
    if mod["loaded"]:
        ev.append(f"/sys/module/amdgpu: initstate {mod['initstate']}, version {mod['version']}")
    if amd and mod["loaded"] and mod["initstate"] not in (None, "live"):
        ctx.add("amdgpu-not-live", f"amdgpu module state is '{mod['initstate']}', not 'live' (rocminfo: "
                "'ROCk module is NOT live')", "check `dmesg | grep amdgpu`; reboot after a driver update",
                "error", "driver")
        for d in amd:
            d.usable, d.unusable_reason = False, "amdgpu module not live"
    if not amd:
        return amd
    from pytest_gpuenv.detect._access import check_access

    found = len(amd)
    amd, probs = check_access(fs, amd, ctx.env.container, ev)
    ctx.problems.extend(probs)
    # after check_access: HSA_OVERRIDE_GFX_VERSION_<n> counts only the nodes libhsakmt keeps
    zero: list[Device] = []
    ctx.problems.extend(_amd.apply_override(fs, topo or "", amd, ctx.environ, ev, zero))
    if any(d.usable for d in amd):  # what ROCr itself leaves out of what libhsakmt kept
        from pytest_gpuenv.detect._rocr import agent_check

        ctx.dropped, probs = agent_check(fs, topo or "", amd, ctx.env.rocm.get("version"), ev, zero)
        ctx.problems.extend(probs)
        if ctx.dropped:
            ctx.env.rocm["rocr_dropped"] = sorted(ctx.dropped)
    if found and not amd:
        ctx.add("render-nodes-missing", f"/dev/kfd is present but none of the {found} AMD GPU(s)' "
                "/dev/dri/renderD* nodes are, so ROCm sees no GPU",
                "pass the render nodes too: `--device /dev/dri` (or the GPUs' `/dev/dri/renderD<N>`)",
                "error", "container" if ctx.env.container else "driver")
    return amd


def _nvidia_devices(ctx: Ctx) -> list[Device]:
    """/proc/driver/nvidia GPUs with usable device nodes, completed by NVML."""
    from pytest_gpuenv.detect import _nvidia

    fs, env, ev = ctx.fs, ctx.env, ctx.ev
    env.cuda["driver_version"] = _nvidia.driver_version(fs)
    ev.append(f"/proc/driver/nvidia/version: {env.cuda['driver_version']}")
    nv = _nvidia.proc_devices(fs, ev, ctx.problems)
    nv, probs = _nvidia.check_nodes(fs, nv, env.container, ev)
    ctx.problems.extend(probs)
    if nv or fs.exists("/dev/nvidiactl"):
        _nvidia.ask_nvml(ctx, nv, None)
    order = ctx.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    if len(nv) > 1 and order != "PCI_BUS_ID":
        same = len({(d.name, d.arch) for d in nv}) == 1
        ev.append(
            "CUDA_DEVICE_ORDER=FASTEST_FIRST: devices listed in PCI order, "
            + ("identical GPUs so CUDA's order is the same" if same else
               "GPUs differ so CUDA's indices may not match; set CUDA_DEVICE_ORDER=PCI_BUS_ID")
        )
    return nv


def _no_gpu_found(ctx: Ctx, mod: dict[str, Any], topo: Optional[str], nv_loaded: bool) -> None:
    """No device: say why when a GPU is on the PCI bus without its driver, or ROCm is installed without one."""
    fs = ctx.fs
    pci = pci_vendor_gpus(fs) if fs.isdir("/sys/bus/pci/devices") else {}
    if pci.get("nvidia") and not nv_loaded:
        ctx.add("nvidia-driver-not-loaded", f"NVIDIA GPU present (PCI {', '.join(pci['nvidia'][:4])}) but the "
                "kernel driver is not loaded (/proc/driver/nvidia missing)",
                "install the NVIDIA driver and load it (`sudo modprobe nvidia`), or check `dmesg | grep -i nvrm`",
                "error", "driver")
    if pci.get("amd") and not mod["loaded"]:
        ctx.add("amdgpu-driver-not-loaded", f"AMD GPU present (PCI {', '.join(pci['amd'][:4])}) but the amdgpu "
                "driver is not loaded", "`sudo modprobe amdgpu` (install amdgpu-dkms if needed)", "error",
                "driver")
    if not (ctx.rocm.get("version") or ctx.rocm.get("hip_runtime")) or (mod["loaded"] and topo):
        return
    why = ("the amdgpu kernel driver is not loaded (/sys/module/amdgpu missing)" if not mod["loaded"]
           else "amdgpu is loaded but exposes no KFD compute nodes")
    ctx.add(
        "rocm-installed-no-driver",
        f"ROCm {ctx.rocm.get('version') or '(unknown version)'} found at {ctx.rocm.get('path')} but {why} and "
        f"/dev/kfd {'exists' if fs.exists('/dev/kfd') else 'does not exist'}; ROCm tests skipped "
        "(rocminfo would say 'ROCk module is NOT loaded'). Compile-only tests can still run.",
        "nothing to do on a machine without an AMD GPU; with one, load the driver "
        "(`sudo modprobe amdgpu`, or `sudo amdgpu-install --usecase=dkms`) and reboot",
        "info",
        "driver",
    )


def pci_vendor_gpus(fs: Fs) -> dict[str, list[str]]:
    """Display-class PCI functions by vendor ('amd', 'nvidia'), from /sys/bus/pci/devices (T1)."""
    out: dict[str, list[str]] = {}
    names = fs.listdir("/sys/bus/pci/devices")
    if len(names) > 512:
        return out
    for bdf in names:
        vendor = (fs.read(f"/sys/bus/pci/devices/{bdf}/vendor", 32) or "").strip().lower()
        if vendor not in ("0x10de", "0x1002"):
            continue
        cls = (fs.read(f"/sys/bus/pci/devices/{bdf}/class", 32) or "").strip().lower()
        if cls.startswith(("0x0300", "0x0302", "0x0380", "0x1200")):
            out.setdefault("nvidia" if vendor == "0x10de" else "amd", []).append(bdf)
    return out


# ------------------------------------------------------------------------------------------ probe
def _maybe_probe(ctx: Ctx) -> Optional[int]:
    """T3 where files cannot count devices, where a usable device's arch or memory is still unknown (NVML did
    not answer), or when asked: run or reuse the probe, report how it went. Returns how many devices the probe
    counted (None where it did not run or failed)."""
    env, fs = ctx.env, ctx.fs
    facts = ctx.probe_mode == "auto" and not ctx.probe_required and bool(_checks.facts_unknown(ctx.devices))
    reason = "count" if ctx.probe_required else "facts" if facts else "asked" if ctx.probe_mode == "always" else None
    env.probe = {"required": ctx.probe_required, "ran": False, "ok": None, "source": None, "reason": reason}
    want = ctx.probe_mode == "always" or (ctx.probe_mode == "auto" and (ctx.probe_required or facts))
    if fs.root_mode or ctx.probe_mode == "never" or not want:
        if ctx.probe_required:
            env.probe["error"] = "root mode: no process is started" if fs.root_mode else "probe disabled"
        return None
    from pytest_gpuenv.detect import _probe

    order = {"rocm": ["hip", "torch"], "cuda": ["cuda", "torch"]}.get(family(env.kind), ["hip", "cuda", "torch"])
    paths = [p for p in ((ctx.rocm.get("path") or "") + "/.info/version", (env.torch or {}).get("path")) if p]
    key = _probe.cache_key(fs, ctx.environ, env.kind, paths)
    res = _probe.cache_get(ctx.cache, key)
    cached = res is not None
    if res is None:
        res = _probe.run_probe(order, ctx.environ, ctx.timeout)
        if res.get("ok"):
            _probe.cache_set(ctx.cache, key, res)
    env.probe = {"required": ctx.probe_required, "ran": True, "ok": bool(res.get("ok")), "source": res.get("source"),
                 "seconds": res.get("seconds"), "error": res.get("error"), "cached": cached, "reason": reason}
    if res.get("timed_out"):
        ctx.add("probe-timeout", f"the runtime probe did not answer within {ctx.timeout:g} s (a hung driver or "
                "runtime); device count unknown", "raise --gpuenv-probe-timeout, or check the driver with "
                "`rocminfo` / `nvidia-smi`", "warning", "probe")
    elif not res.get("ok"):
        if reason != "facts":  # a probe run only for the facts: checks.unknown_facts names its error and the fix
            ctx.add("probe-failed", f"the runtime probe failed: {res.get('error')}", "run `python -c \"import "
                    "torch; print(torch.cuda.device_count())\"` to see the error; install hip-python or cuda-python "
                    "(pip install pytest-gpuenv[amd] / [nvidia])", "warning", "probe")
    else:
        ctx.arch_list = res.get("arch_list")
        _use_probe(ctx, res, cached)
        return len(res.get("devices") or [])
    return None


def _use_probe(ctx: Ctx, res: dict[str, Any], cached: bool) -> None:
    """The probe's devices complete the files' ones, or become the list (WSL 2, Windows, probe='always')."""
    env = ctx.env
    fam = family(env.kind)
    devs = [_probe_device(i, d, fam) for i, d in enumerate(res.get("devices") or [])]
    ctx.ev.append(f"probe ({res.get('source')}): {len(devs)} device(s)" + (" [cached]" if cached else ""))
    if ctx.devices:
        for d, p in _pairs(ctx.devices, devs, ctx.environ):
            d.arch, d.physical_arch = d.arch or p.arch, d.physical_arch or p.arch
            d.memory_bytes = d.memory_bytes or p.memory_bytes
        if len(devs) != len(ctx.devices):
            ctx.ev.append(f"probe saw {len(devs)} device(s), files {len(ctx.devices)}")
        return
    if devs and env.kind == "cpu":
        vendor = devs[0].vendor
        env.kind = ("rocm-wsl" if env.wsl else "rocm") if vendor == "amd" else ("cuda-wsl" if env.wsl else "cuda")
    ctx.devices = devs
    ctx.probe_required = False
    if devs:
        return
    if env.kind == "rocm-wsl":
        ctx.add("rocm-wsl-no-device", "ROCm in WSL found no GPU", "check the librocdxg supported-GPU list and the "
                "Adrenalin version; remove distribution libhsa-runtime64/libhsakmt packages that shadow /opt/rocm; "
                "a torch wheel's bundled libhsa-runtime64 lacks WSL support (replace it with /opt/rocm/lib's)",
                "error", "wsl")
    elif env.kind == "cuda-wsl":
        ctx.add("cuda-wsl-no-device", "CUDA in WSL 2 found no GPU", "install the Windows NVIDIA driver and run "
                "`wsl --update`; do not install a Linux NVIDIA driver inside WSL", "error", "wsl")
    elif env.kind in ("hip-windows", "cuda-windows"):
        ctx.add("windows-no-device", f"the {env.kind} runtime reports no GPU", "install or upgrade the GPU driver",
                "error", "driver")


def _pairs(devices: list[Device], probed: list[Device], environ: Any) -> list[tuple[Device, Device]]:
    """Each file device with the probe's device of the same GPU: by UUID, else by PCI address, else by position
    where the two orders agree (as many devices, and on NVIDIA ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or identical
    models: the files list in PCI order, CUDA's default order puts the fastest first). The probe lists every
    device (it runs without the visible-devices variables), so its order is the physical one."""
    by_uuid = {p.uuid: p for p in probed if p.uuid}
    by_pci = {p.pci.lower(): p for p in probed if p.pci}
    out = []
    for d in devices:
        p = by_uuid.get(d.uuid) if d.uuid else None
        p = p if p is not None or not d.pci else by_pci.get(d.pci)
        if p is not None:
            out.append((d, p))
    if out or len(devices) != len(probed):
        return out
    same = devices[0].vendor == "amd" or environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len(
        {d.name for d in devices}) == 1
    return list(zip(devices, probed)) if same else []


def _probe_device(i: int, d: dict[str, Any], fam: str) -> Device:
    from pytest_gpuenv.detect import _probe

    vendor = d.get("vendor") if d.get("vendor") in ("amd", "nvidia") else ("amd" if fam == "rocm" else "nvidia")
    arch = d.get("arch") if isinstance(d.get("arch"), str) else None
    return Device(index=i, vendor=str(vendor), name=_s(d.get("name")), arch=arch, physical_arch=arch,
                  memory_bytes=_probe.count(d.get("memory_bytes")),
                  warp_size=_probe.count(d.get("warp_size")), uuid=_s(d.get("uuid")), pci=_s(d.get("pci")),
                  source="probe", physical_index=i)


def _s(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None



# ------------------------------------------------------------------------------------------ after
def _masks(ctx: Ctx) -> None:
    if not ctx.devices:
        return
    vendor = ctx.devices[0].vendor
    dropped = ctx.dropped if vendor == "amd" else {}
    vis, hidden, probs, ev = apply_masks(ctx.devices, vendor, ctx.environ, ctx.env.platform, dropped)
    ctx.env.devices, ctx.env.hidden_devices = vis, hidden
    ctx.problems.extend(probs)
    ctx.ev.extend(ev)


def _conclude(ctx: Ctx) -> None:
    env = ctx.env
    fam = family(env.kind)
    usable = [d for d in env.devices if d.usable]
    if usable:
        env.backend = fam
        if env.usable is not Usability.ARCH_UNSUPPORTED:
            env.usable = Usability.USABLE
    elif ctx.probe_required and not env.devices and not env.hidden_devices:
        env.backend, env.usable = fam, Usability.PROBE_REQUIRED
    elif env.devices or env.hidden_devices:
        env.backend, env.usable = "cpu", Usability.UNUSABLE
    else:
        env.backend = "cpu"
        # nothing found is not a failure, unless a probe was needed and counted no GPU
        env.usable = Usability.UNUSABLE if env.probe.get("ran") and fam != "cpu" else Usability.USABLE


def _unreadable(ctx: Ctx) -> None:
    fs = ctx.fs
    errs = [(p, e) for p, e in fs.errors if not (p in fs.denied and "/kfd/" in p)]
    if errs and ctx.env.problem("sysfs-unreadable") is None:
        text = ", ".join(f"{p} ({e})" for p, e in errs[:4]) + (f" (+{len(errs) - 4} more)" if len(errs) > 4 else "")
        ctx.add("sysfs-unreadable", f"some system files could not be read: {text}",
                "check their permissions and type; a foreign or damaged tree gives this", "warning", "sysfs")
