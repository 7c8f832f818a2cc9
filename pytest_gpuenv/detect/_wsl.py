"""WSL 2's two GPU paths (DETECTION.md); which WSL a system is (WSL 1 has no GPU compute) is ``_core``'s.

CUDA reaches the GPU through the Windows driver's libraries in /usr/lib/wsl (libcuda, libnvidia-ml);
ROCm through /dev/dxg and librocdxg. There is no /proc/driver/nvidia or KFD sysfs to list devices, so
NVML (CUDA, on a real system) or the runtime probe counts them.
"""

from __future__ import annotations

from typing import Optional

from pytest_gpuenv.base.model import Device
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.fs import Fs

WSL_LIB = "/usr/lib/wsl/lib"


def wsl2(ctx: Ctx) -> None:
    """CUDA when the Windows driver's libcuda is there, else ROCm when installed, else CPU."""
    dxg = ctx.fs.exists("/dev/dxg")
    ctx.ev.append(f"/dev/dxg: {'present' if dxg else 'missing'}")
    libcuda = _libcuda(ctx.fs)
    if libcuda:
        _cuda(ctx, libcuda, dxg)
    elif ctx.rocm.get("version") or ctx.rocm.get("hip_runtime"):
        _rocm(ctx, dxg)
    else:
        ctx.env.kind = "cpu"


def _libcuda(fs: Fs) -> Optional[str]:
    for p in (f"{WSL_LIB}/libcuda.so.1", f"{WSL_LIB}/libcuda.so"):
        if fs.exists(p):
            return p
    for drv in fs.listdir("/usr/lib/wsl/drivers"):
        if any(n.startswith("libcuda.so") for n in fs.listdir(f"/usr/lib/wsl/drivers/{drv}")):
            return f"/usr/lib/wsl/drivers/{drv}/libcuda.so"
    return None


def _cuda(ctx: Ctx, libcuda: str, dxg: bool) -> None:
    fs, env = ctx.fs, ctx.env
    env.kind = "cuda-wsl"
    env.cuda["libcuda"] = libcuda
    ctx.ev.append(f"{libcuda}: present (CUDA through the Windows driver)")
    if not fs.which("nvidia-smi", ctx.environ.get("PATH")) and fs.exists(f"{WSL_LIB}/nvidia-smi"):
        ctx.add("nvidia-smi-not-on-path", "nvidia-smi is not on PATH under WSL 2; it lives in /usr/lib/wsl/lib",
                "call /usr/lib/wsl/lib/nvidia-smi, or add /usr/lib/wsl/lib to PATH", "warning", "wsl")
    if not dxg:
        _no_gpu_pv(ctx)
    from pytest_gpuenv.detect._nvidia import ask_nvml

    nvml_lib = f"{WSL_LIB}/libnvidia-ml.so.1"
    devices: list[Device] = []
    data = ask_nvml(ctx, devices, nvml_lib if fs.exists(nvml_lib) else None)
    if data is not None and devices:
        for d in devices:
            d.source = "nvml"
        ctx.devices = devices
    else:
        ctx.probe_required = True


def _rocm(ctx: Ctx, dxg: bool) -> None:
    rocm = ctx.rocm
    ctx.env.kind = "rocm-wsl"
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
        if rocm.get("path") not in (None, "/usr") and ctx.fs.exists(shadow):
            ctx.add("rocm-wsl-runtime-shadowed", f"{shadow} (a distribution package) can shadow "
                    f"{rocm['path']}/lib: the old runtime lacks WSL support ('ROCk module is NOT loaded')",
                    "remove the distribution's libhsa-runtime64/libhsakmt packages", "warning", "wsl")
            break
    ctx.probe_required = True


def _no_gpu_pv(ctx: Ctx) -> None:
    ctx.add("wsl-no-gpu-paravirtualisation", "WSL 2 without /dev/dxg: no GPU paravirtualisation",
            "install the Windows GPU driver (NVIDIA / AMD Adrenalin) and run `wsl --update`; do not install a "
            "Linux GPU driver inside WSL", "error", "wsl")
