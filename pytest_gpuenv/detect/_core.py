"""The decision procedure of DETECTION.md section 2, filling a ``GpuEnv`` in place."""

from __future__ import annotations

import re
import sys
from typing import Any, Optional

from pytest_gpuenv.detect import _amd, _nvidia, _probe
from pytest_gpuenv.detect._compilers import find_compilers
from pytest_gpuenv.detect._fs import Fs
from pytest_gpuenv.detect._torch import read_torch
from pytest_gpuenv.detect._visible import apply_masks, visible_vars
from pytest_gpuenv.model import Device, GpuEnv, Problem, family
from pytest_gpuenv.runtime import nvml

_CU_INDEXES = ((13, 0, "cu130"), (12, 9, "cu129"), (12, 8, "cu128"), (12, 6, "cu126"), (12, 4, "cu124"),
               (12, 1, "cu121"), (11, 8, "cu118"))


class _Ctx:
    def __init__(self, env: GpuEnv, fs: Fs, environ: Any, probe: str, timeout: float, cache: Any) -> None:
        self.env, self.fs, self.environ = env, fs, environ
        self.probe_mode, self.timeout, self.cache = probe, timeout, cache
        self.ev = env.evidence
        self.problems = env.problems
        self.rocm: dict[str, Any] = {}
        self.probe_required = False
        self.devices: list[Device] = []
        self.arch_list: Optional[list[str]] = None

    def add(self, code: str, message: str, fix: Optional[str], severity: str, category: str) -> None:
        if self.env.problem(code) is None:
            self.problems.append(Problem(code, message, fix=fix, severity=severity, category=category))


def run(env: GpuEnv, root: Optional[str], environ: Any, probe: str, timeout: float, cache: Any,
        platform: Optional[str]) -> None:
    fs = Fs(root)
    ctx = _Ctx(env, fs, environ, probe if probe in ("auto", "always", "never") else "auto", timeout, cache)
    env.platform = _platform(fs, platform)
    env.visible = visible_vars(environ)
    if env.platform != "windows" or not fs.root_mode:
        env.torch = read_torch(fs, environ, ctx.ev)
    if env.platform == "windows":
        _windows(ctx)
    elif env.platform == "linux":
        _linux(ctx)
    else:
        env.kind = "cpu"
        ctx.ev.append(f"platform {env.platform}: no ROCm/CUDA support, CPU only")
    _maybe_probe(ctx)
    _masks(ctx)
    _arch_support(ctx)
    _torch_problems(ctx)
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
def _linux(ctx: _Ctx) -> None:
    fs, env, ev, environ = ctx.fs, ctx.env, ctx.ev, ctx.environ
    osrel = (fs.read("/proc/sys/kernel/osrelease", 256) or "").strip()
    if osrel:
        ev.append(f"/proc/sys/kernel/osrelease: {osrel[:80]}")
    env.wsl = _wsl(fs, osrel, environ)
    env.container = (
        fs.exists("/.dockerenv")
        or fs.exists("/run/.containerenv")
        or (fs.read("/proc/1/cgroup", 4096) or "").strip() == "0::/"
    )
    if env.container:
        ev.append("container: /.dockerenv, /run/.containerenv or /proc/1/cgroup '0::/'")
    ctx.rocm = _amd.rocm_userspace(fs, environ, ev)
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
        _wsl2(ctx)
        return
    _native_linux(ctx)


def _wsl(fs: Fs, osrel: str, environ: Any) -> Optional[int]:
    low = osrel.lower()
    if "microsoft" in low or "wsl" in low:
        return 1 if ("Microsoft" in osrel and "standard" not in low) else 2
    if environ.get("WSL_DISTRO_NAME") or fs.exists("/proc/sys/fs/binfmt_misc/WSLInterop") or fs.isdir("/run/WSL"):
        if environ.get("WSL_INTEROP") or fs.exists("/dev/dxg") or fs.isdir("/run/WSL"):
            return 2
        return 1 if environ.get("WSL_DISTRO_NAME") else 2
    return None


def _native_linux(ctx: _Ctx) -> None:
    fs, env, ev = ctx.fs, ctx.env, ctx.ev
    amd: list[Device] = []
    mod = _amd.amdgpu_module(fs)
    env.rocm["driver_version"] = mod["version"]
    topo = _amd.topology_dir(fs)
    if topo:
        amd = _amd.kfd_devices(fs, topo, ev, ctx.problems)
    if mod["loaded"]:
        ev.append(f"/sys/module/amdgpu: initstate {mod['initstate']}, version {mod['version']}")
    if amd and mod["loaded"] and mod["initstate"] not in (None, "live"):
        ctx.add("amdgpu-not-live", f"amdgpu module state is '{mod['initstate']}', not 'live' (rocminfo: "
                "'ROCk module is NOT live')", "check `dmesg | grep amdgpu`; reboot after a driver update",
                "error", "driver")
        for d in amd:
            d.usable, d.unusable_reason = False, "amdgpu module not live"
    if amd:
        ctx.problems.extend(_amd.apply_override(amd, ctx.environ, "linux", ev))
        found = len(amd)
        amd, probs = _amd.check_access(fs, amd, env.container, ev)
        ctx.problems.extend(probs)
        if found and not amd:
            ctx.add("render-nodes-missing", f"/dev/kfd is present but none of the {found} AMD GPU(s)' "
                    "/dev/dri/renderD* nodes are, so ROCm sees no GPU",
                    "pass the render nodes too: `--device /dev/dri` (or the GPUs' `/dev/dri/renderD<N>`)",
                    "error", "container" if env.container else "driver")

    nv: list[Device] = []
    nv_loaded = fs.exists("/proc/driver/nvidia/version") or fs.isdir("/proc/driver/nvidia/gpus")
    if nv_loaded:
        env.cuda["driver_version"] = _nvidia.driver_version(fs)
        ev.append(f"/proc/driver/nvidia/version: {env.cuda['driver_version']}")
        nv = _nvidia.proc_devices(fs, ev, ctx.problems)
        nv, probs = _nvidia.check_nodes(fs, nv, env.container, ev)
        ctx.problems.extend(probs)
        if nv or fs.exists("/dev/nvidiactl"):
            _nvml(ctx, nv, None)
        _cuda_order(ctx, nv)

    if not amd and not nv:
        pci = _nvidia.pci_vendor_gpus(fs) if fs.isdir("/sys/bus/pci/devices") else {}
        if pci.get("nvidia") and not nv_loaded:
            ctx.add("nvidia-driver-not-loaded", f"NVIDIA GPU present (PCI {', '.join(pci['nvidia'][:4])}) but the "
                    "kernel driver is not loaded (/proc/driver/nvidia missing)",
                    "install the NVIDIA driver and load it (`sudo modprobe nvidia`), or check `dmesg | grep -i nvrm`",
                    "error", "driver")
        if pci.get("amd") and not mod["loaded"]:
            ctx.add("amdgpu-driver-not-loaded", f"AMD GPU present (PCI {', '.join(pci['amd'][:4])}) but the amdgpu "
                    "driver is not loaded", "`sudo modprobe amdgpu` (install amdgpu-dkms if needed)", "error",
                    "driver")
        if ctx.rocm.get("version") or ctx.rocm.get("hip_runtime"):
            if not mod["loaded"] or not topo:
                where = ctx.rocm.get("path")
                why = ("the amdgpu kernel driver is not loaded (/sys/module/amdgpu missing)" if not mod["loaded"]
                       else "amdgpu is loaded but exposes no KFD compute nodes")
                ctx.add(
                    "rocm-installed-no-driver",
                    f"ROCm {ctx.rocm.get('version') or '(unknown version)'} found at {where} but {why} and "
                    f"/dev/kfd {'exists' if fs.exists('/dev/kfd') else 'does not exist'}; ROCm tests skipped "
                    "(rocminfo would say 'ROCk module is NOT loaded'). Compile-only tests can still run.",
                    "nothing to do on a machine without an AMD GPU; with one, load the driver "
                    "(`sudo modprobe amdgpu`, or `sudo amdgpu-install --usecase=dkms`) and reboot",
                    "info",
                    "driver",
                )
    if amd and (not nv or (ctx.env.torch or {}).get("build") != "cuda"):
        env.kind, ctx.devices = "rocm", amd
        if nv:
            ev.append(f"also found {len(nv)} NVIDIA GPU(s); ROCm chosen (rocm > cuda unless torch is a CUDA build)")
    elif nv:
        env.kind, ctx.devices = "cuda", nv
        if amd:
            ev.append(f"also found {len(amd)} AMD GPU(s); CUDA chosen to match the torch build")
    else:
        env.kind = "cpu"


def _cuda_order(ctx: _Ctx, nv: list[Device]) -> None:
    order = ctx.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    if len(nv) > 1 and order != "PCI_BUS_ID":
        same = len({(d.name, d.arch) for d in nv}) == 1
        ctx.ev.append(
            "CUDA_DEVICE_ORDER=FASTEST_FIRST: devices listed in PCI order, "
            + ("identical GPUs so CUDA's order is the same" if same else
               "GPUs differ so CUDA's indices may not match; set CUDA_DEVICE_ORDER=PCI_BUS_ID")
        )


def _nvml(ctx: _Ctx, devices: list[Device], lib: Optional[str]) -> Optional[dict[str, Any]]:
    """T2: NVML on a real system (never in root mode, skipped by probe='never')."""
    if ctx.fs.root_mode or ctx.probe_mode == "never":
        return None
    key = _probe.cache_key(ctx.fs, ctx.environ, "nvml", ["/proc/driver/nvidia/version"]).replace("probe", "nvml")
    data = _probe.cache_get(ctx.cache, key)
    if data is None:
        data = nvml.query(lib)
        if data is None:
            ctx.ev.append("NVML: not available")
            return None
        _probe.cache_set(ctx.cache, key, data)
    _nvidia.merge_nvml(devices, data, ctx.ev)
    env = ctx.env
    env.cuda["driver_version"] = env.cuda.get("driver_version") or data.get("driver_version")
    env.cuda["max_cuda"] = data.get("max_cuda")
    return data


def _wsl2(ctx: _Ctx) -> None:
    fs, env, ev = ctx.fs, ctx.env, ctx.ev
    dxg = fs.exists("/dev/dxg")
    ev.append(f"/dev/dxg: {'present' if dxg else 'missing'}")
    libcuda = next((p for p in (f"{_nvidia.WSL_LIB}/libcuda.so.1", f"{_nvidia.WSL_LIB}/libcuda.so") if fs.exists(p)),
                   None)
    if libcuda is None:
        for drv in fs.listdir("/usr/lib/wsl/drivers"):
            if any(n.startswith("libcuda.so") for n in fs.listdir(f"/usr/lib/wsl/drivers/{drv}")):
                libcuda = f"/usr/lib/wsl/drivers/{drv}/libcuda.so"
                break
    rocm = ctx.rocm
    if libcuda:
        env.kind = "cuda-wsl"
        env.cuda["libcuda"] = libcuda
        ev.append(f"{libcuda}: present (CUDA through the Windows driver)")
        if not fs.which("nvidia-smi", ctx.environ.get("PATH")) and fs.exists(f"{_nvidia.WSL_LIB}/nvidia-smi"):
            ctx.add("nvidia-smi-not-on-path", "nvidia-smi is not on PATH under WSL 2; it lives in /usr/lib/wsl/lib",
                    "call /usr/lib/wsl/lib/nvidia-smi, or add /usr/lib/wsl/lib to PATH", "warning", "wsl")
        if not dxg:
            _no_gpu_pv(ctx)
        nvml_lib = f"{_nvidia.WSL_LIB}/libnvidia-ml.so.1"
        devices: list[Device] = []
        data = _nvml(ctx, devices, nvml_lib if fs.exists(nvml_lib) else None)
        if data is not None and devices:
            for d in devices:
                d.source = "nvml"
            ctx.devices = devices
        else:
            ctx.probe_required = True
        return
    if rocm.get("version") or rocm.get("hip_runtime"):
        env.kind = "rocm-wsl"
        ctx.add("wsl-no-kfd-sysfs", "no /dev/kfd or KFD sysfs under WSL 2 (normal: ROCm reaches the GPU through "
                "/dev/dxg); device count and arch need the runtime probe",
                "nothing to fix; run with --gpuenv-probe=auto (default) outside --gpuenv-root to count devices",
                "info", "wsl")
        if ctx.environ.get("HSA_ENABLE_DXG_DETECTION") != "1":
            ctx.add("rocm-wsl-dxg-disabled", "ROCm under WSL 2 without HSA_ENABLE_DXG_DETECTION=1: ROCm >= 7.1 with "
                    "librocdxg finds no GPU" + ("" if rocm.get("rocdxg") else " (and librocdxg.so was not found)"),
                    "`export HSA_ENABLE_DXG_DETECTION=1` and install librocdxg (ROCm >= 7.1 runtime)",
                    "warning", "wsl")
        if not dxg:
            _no_gpu_pv(ctx)
        for shadow in ("/lib/x86_64-linux-gnu/libhsa-runtime64.so.1", "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1"):
            if rocm.get("path") not in (None, "/usr") and fs.exists(shadow):
                ctx.add("rocm-wsl-runtime-shadowed", f"{shadow} (a distribution package) can shadow "
                        f"{rocm['path']}/lib: the old runtime lacks WSL support ('ROCk module is NOT loaded')",
                        "remove the distribution's libhsa-runtime64/libhsakmt packages", "warning", "wsl")
                break
        ctx.probe_required = True
        return
    env.kind = "cpu"


def _no_gpu_pv(ctx: _Ctx) -> None:
    ctx.add("wsl-no-gpu-paravirtualisation", "WSL 2 without /dev/dxg: no GPU paravirtualisation",
            "install the Windows GPU driver (NVIDIA / AMD Adrenalin) and run `wsl --update`; do not install a "
            "Linux GPU driver inside WSL", "error", "wsl")


# ------------------------------------------------------------------------------------------ Windows
def _winpath(ctx: _Ctx, path: str) -> str:
    """A Windows path (``C:\\X\\Y``) as the Fs names it: under the root in root mode."""
    if not ctx.fs.root_mode:
        return path
    m = re.match(r"^([A-Za-z]):[\\/]*(.*)$", path)
    rest = (m.group(2) if m else path).replace("\\", "/").strip("/")
    drive = ctx.fs.isdir("/C/Windows") and "/C" or ctx.fs.isdir("/c/Windows") and "/c" or ""
    return f"{drive}/{rest}" if rest else drive or "/"


def _windows(ctx: _Ctx) -> None:
    fs, env, ev, environ = ctx.fs, ctx.env, ctx.ev, ctx.environ
    sysroot = environ.get("SystemRoot") or environ.get("SYSTEMROOT") or "C:\\Windows"
    system32 = _winpath(ctx, sysroot.rstrip("\\/") + "\\System32")
    hip_path = environ.get("HIP_PATH")
    hip_dir = _winpath(ctx, hip_path) if hip_path else None
    dll = None
    for name in ("amdhip64_7.dll", "amdhip64_6.dll", "amdhip64.dll"):
        for d in (system32, (hip_dir or "").rstrip("/") + "/bin" if hip_dir else None):
            if d and fs.exists(f"{d}/{name}"):
                dll = (name, f"{d}/{name}")
                break
        if dll:
            break
    sep = "/" if fs.root_mode else "\\"
    if hip_path or dll:
        env.kind = "hip-windows"
        bin_dir = (hip_dir.rstrip("/\\") + sep + "bin") if hip_dir else None
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", hip_path or "")
        env.hip_sdk = {
            "path": hip_path,
            "version": m.group(1) if m else None,
            "dll": dll[0] if dll else None,
            "hipinfo": f"{bin_dir}{sep}hipInfo.exe" if bin_dir and fs.exists(f"{bin_dir}{sep}hipInfo.exe") else None,
        }
        ev.append(f"HIP_PATH: {hip_path}; HIP runtime: {dll[1] if dll else 'missing'}")
        if bin_dir:
            for exe in ("hipcc.exe", "hipcc.bin.exe", "hipcc"):
                if fs.exists(f"{bin_dir}{sep}{exe}"):
                    env.compilers["hipcc"] = f"{bin_dir}{sep}{exe}"
                    break
            env.compilers["hiprtc"] = any(n.lower().startswith("hiprtc") and n.lower().endswith(".dll")
                                          for n in fs.listdir(bin_dir))
            ctx.rocm = {"lib_dirs": [bin_dir]}
        if not dll:
            ctx.add("hip-runtime-missing", "Unable to find amdhip64_6.dll / amdhip64_7.dll: HIP_PATH is set but the "
                    "HIP runtime (shipped by the AMD GPU driver) is missing",
                    "install or upgrade the AMD Adrenalin driver / HIP SDK", "error", "driver")
        ctx.add("no-torch-rocm-on-windows", "native Windows with the HIP SDK: HIP kernels compile and run, but there "
                "are no official PyTorch ROCm wheels for Windows", "for PyTorch on an AMD GPU use WSL 2 "
                "(ROCm on WSL, HSA_ENABLE_DXG_DETECTION=1); HIP tests run here", "info", "torch")
        override = environ.get("HSA_OVERRIDE_GFX_VERSION")
        ctx.add("hsa-override-ignored-on-windows", "HSA_OVERRIDE_GFX_VERSION has no effect on Windows"
                + (f" (it is set to {override!r})" if override is not None else "")
                + "; a GPU whose gfx target is not built into the HIP SDK libraries cannot be made to run as another",
                "unset HSA_OVERRIDE_GFX_VERSION on Windows; use a supported GPU or WSL 2",
                "warning" if override is not None else "info", "arch")
        ctx.probe_required = True
    elif fs.exists(f"{system32}/nvcuda.dll"):
        env.kind = "cuda-windows"
        ev.append(f"{system32}/nvcuda.dll: present")
        ctx.probe_required = True
    else:
        env.kind = "cpu"
    cuda_path = environ.get("CUDA_PATH")
    if cuda_path:
        cdir = _winpath(ctx, cuda_path).rstrip("/\\") + sep + "bin"
        if fs.exists(f"{cdir}{sep}nvcc.exe"):
            env.compilers["nvcc"] = f"{cdir}{sep}nvcc.exe"
        env.compilers["nvrtc"] = any(n.lower().startswith("nvrtc64_") for n in fs.listdir(cdir))


# ------------------------------------------------------------------------------------------ probe
def _maybe_probe(ctx: _Ctx) -> None:
    env, fs = ctx.env, ctx.fs
    fam = family(env.kind)
    env.probe = {"required": ctx.probe_required, "ran": False, "ok": None, "source": None}
    want = ctx.probe_mode == "always" or (ctx.probe_mode == "auto" and ctx.probe_required)
    if fs.root_mode or ctx.probe_mode == "never" or not want:
        if ctx.probe_required:
            env.probe["error"] = "root mode: no process is started" if fs.root_mode else "probe disabled"
        return
    order = {"rocm": ["hip", "torch"], "cuda": ["cuda", "torch"]}.get(fam, ["hip", "cuda", "torch"])
    paths = [p for p in ((ctx.rocm.get("path") or "") + "/.info/version", (env.torch or {}).get("path")) if p]
    key = _probe.cache_key(fs, ctx.environ, env.kind, paths)
    res = _probe.cache_get(ctx.cache, key)
    cached = res is not None
    if res is None:
        res = _probe.run_probe(order, ctx.environ, ctx.timeout)
        if res.get("ok"):
            _probe.cache_set(ctx.cache, key, res)
    env.probe = {"required": ctx.probe_required, "ran": True, "ok": bool(res.get("ok")), "source": res.get("source"),
                 "seconds": res.get("seconds"), "error": res.get("error"), "cached": cached}
    if res.get("timed_out"):
        ctx.add("probe-timeout", f"the runtime probe did not answer within {ctx.timeout:g} s (a hung driver or "
                "runtime); device count unknown", "raise --gpuenv-probe-timeout, or check the driver with "
                "`rocminfo` / `nvidia-smi`", "warning", "probe")
        return
    if not res.get("ok"):
        ctx.add("probe-failed", f"the runtime probe failed: {res.get('error')}", "run `python -c \"import torch; "
                "print(torch.cuda.device_count())\"` to see the error; install hip-python or cuda-python "
                "(pip install pytest-gpuenv[amd] / [nvidia])", "warning", "probe")
        return
    ctx.arch_list = res.get("arch_list")
    devs = []
    for i, d in enumerate(res.get("devices") or []):
        vendor = d.get("vendor") if d.get("vendor") in ("amd", "nvidia") else ("amd" if fam == "rocm" else "nvidia")
        arch = d.get("arch") if isinstance(d.get("arch"), str) else None
        devs.append(Device(index=i, vendor=vendor, name=_s(d.get("name")), arch=arch, physical_arch=arch,
                           memory_bytes=_i(d.get("memory_bytes")), warp_size=_i(d.get("warp_size")),
                           uuid=_s(d.get("uuid")), source="probe", physical_index=i))
    ctx.ev.append(f"probe ({res.get('source')}): {len(devs)} device(s)" + (" [cached]" if cached else ""))
    if ctx.devices:
        for d, p in zip(ctx.devices, devs):
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
    if not devs and env.kind == "rocm-wsl":
        ctx.add("rocm-wsl-no-device", "ROCm in WSL found no GPU", "check the librocdxg supported-GPU list and the "
                "Adrenalin version; remove distribution libhsa-runtime64/libhsakmt packages that shadow /opt/rocm; "
                "a torch wheel's bundled libhsa-runtime64 lacks WSL support (replace it with /opt/rocm/lib's)",
                "error", "wsl")
    elif not devs and env.kind == "cuda-wsl":
        ctx.add("cuda-wsl-no-device", "CUDA in WSL 2 found no GPU", "install the Windows NVIDIA driver and run "
                "`wsl --update`; do not install a Linux NVIDIA driver inside WSL", "error", "wsl")
    elif not devs and env.kind in ("hip-windows", "cuda-windows"):
        ctx.add("windows-no-device", f"the {env.kind} runtime reports no GPU", "install or upgrade the GPU driver",
                "error", "driver")


def _s(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _i(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# ------------------------------------------------------------------------------------------ after
def _masks(ctx: _Ctx) -> None:
    if not ctx.devices:
        return
    vendor = ctx.devices[0].vendor
    vis, hidden, probs, ev = apply_masks(ctx.devices, vendor, ctx.environ, ctx.env.platform)
    ctx.env.devices, ctx.env.hidden_devices = vis, hidden
    ctx.problems.extend(probs)
    ctx.ev.extend(ev)


def _arch_support(ctx: _Ctx) -> None:
    env = ctx.env
    amd = [d for d in env.devices if d.vendor == "amd" and d.usable and d.arch]
    if not amd:
        return
    if ctx.arch_list:
        supported, where = frozenset(a.split(":")[0] for a in ctx.arch_list), "torch.cuda.get_arch_list()"
    else:
        supported, where = _amd.supported_archs(ctx.fs, ctx.rocm.get("lib_dirs") or [], ctx.ev)
        where = where if where.startswith("the targets") else f"rocBLAS in {where}"
    missing = sorted({d.arch for d in amd if d.arch not in supported})
    if not missing:
        return
    tips = []
    for a in missing:
        if a.startswith("gfx103"):
            tips.append("`HSA_OVERRIDE_GFX_VERSION=10.3.0` (runs RDNA2 as gfx1030)")
        elif a.startswith("gfx11"):
            tips.append("`HSA_OVERRIDE_GFX_VERSION=11.0.0` (runs RDNA3 as gfx1100)")
    phys = ", ".join(f"{d.physical_arch}->{d.arch}" if d.physical_arch != d.arch else d.arch or "?" for d in amd
                     if d.arch in missing)
    ctx.add("arch-not-in-build", f"GPU {phys} is not among the architectures this ROCm/torch build targets ({where}); "
            "kernels fail with hipErrorNoBinaryForGpu / 'HIP error: invalid device function'",
            ("unsupported workaround used by the community: " + " or ".join(dict.fromkeys(tips))
             if tips else "use a build that targets it (e.g. PYTORCH_ROCM_ARCH=" + ";".join(missing) + ")")
            + "; kernels compiled here with hiprtc/hipcc for the device's own arch still run",
            "warning", "arch")
    if all(d.arch in missing for d in amd):
        env.usable = "arch-unsupported"


def _torch_problems(ctx: _Ctx) -> None:
    env, t = ctx.env, ctx.env.torch
    if not t or not t.get("build"):
        return
    fam = family(env.kind)
    gpu_seen = bool(env.devices or env.hidden_devices or ctx.probe_required)
    if fam == "cpu" or not gpu_seen or env.kind == "hip-windows":
        return
    build, ver = t["build"], t.get("version")
    if build == "cpu":
        ctx.add("torch-cpu-build", f"GPU backend {fam} present but installed torch {ver} is a CPU build "
                "(torch.version.cuda and .hip are None)", _pip_fix(ctx, fam), "warning", "torch")
    elif build in ("rocm", "cuda") and build != fam:
        ctx.add("torch-wrong-flavour", f"torch {ver} targets {'ROCm' if build == 'rocm' else 'CUDA'} but this host "
                f"has {'AMD (ROCm)' if fam == 'rocm' else 'NVIDIA (CUDA)'} GPUs", _pip_fix(ctx, fam), "warning",
                "torch")
    elif build == "rocm" and t.get("hip") and env.rocm.get("version"):
        tmaj, smaj = t["hip"].split(".")[0], str(env.rocm["version"]).split(".")[0]
        if tmaj != smaj:
            ctx.add("torch-rocm-major-mismatch", f"torch {ver} was built for HIP {t['hip']} but the system ROCm is "
                    f"{env.rocm['version']}", _pip_fix(ctx, "rocm"), "warning", "torch")
    elif build == "cuda" and t.get("cuda") and env.cuda.get("max_cuda"):
        try:
            need = int(str(t["cuda"]).split(".")[0])
            have = int(str(env.cuda["max_cuda"]).split(".")[0])
        except ValueError:
            return
        if need > have:
            ctx.add("cuda-driver-too-old", f"NVIDIA driver {env.cuda.get('driver_version')} supports CUDA <= "
                    f"{env.cuda['max_cuda']}; torch {ver} was built for CUDA {t['cuda']}",
                    "upgrade the NVIDIA driver, or " + _pip_fix(ctx, "cuda")
                    + " (same-major runtimes are fine: minor-version compatibility since CUDA 11)", "warning", "torch")


def _pip_fix(ctx: _Ctx, fam: str) -> str:
    if fam == "rocm":
        v = ctx.env.rocm.get("version") or "6.4"
        mm = ".".join(str(v).split(".")[:2])
        return f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm{mm}"
    tag = "cu126"
    mx = ctx.env.cuda.get("max_cuda")
    if mx:
        try:
            major, minor = (int(x) for x in str(mx).split(".")[:2])
            tag = next((t for ma, mi, t in _CU_INDEXES if (ma, mi) <= (major, minor)), "cu118")
        except ValueError:
            pass
    return f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/{tag}"


def _conclude(ctx: _Ctx) -> None:
    env = ctx.env
    fam = family(env.kind)
    usable = [d for d in env.devices if d.usable]
    if usable:
        env.backend = fam
        if env.usable != "arch-unsupported":
            env.usable = True
    elif ctx.probe_required and not env.devices and not env.hidden_devices:
        env.backend, env.usable = fam, "probe-required"
    elif env.devices or env.hidden_devices:
        env.backend, env.usable = "cpu", False
    else:
        env.backend = "cpu"
        # nothing found is not a failure, unless a probe was needed and counted no GPU
        env.usable = False if env.probe.get("ran") and fam != "cpu" else True


def _unreadable(ctx: _Ctx) -> None:
    fs = ctx.fs
    errs = [(p, e) for p, e in fs.errors if not (p in fs.denied and "/kfd/" in p)]
    if errs and ctx.env.problem("sysfs-unreadable") is None:
        text = ", ".join(f"{p} ({e})" for p, e in errs[:4]) + (f" (+{len(errs) - 4} more)" if len(errs) > 4 else "")
        ctx.add("sysfs-unreadable", f"some system files could not be read: {text}",
                "check their permissions and type; a foreign or damaged tree gives this", "warning", "sysfs")
