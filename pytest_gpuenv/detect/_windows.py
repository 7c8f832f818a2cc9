"""Native Windows: the HIP SDK (``HIP_PATH``, the driver's amdhip64 DLL) and the CUDA driver (nvcuda.dll).

Files and environment variables only; the runtime probe counts the devices. In root mode a Windows
path (``C:\\X``) is read under the root as ``/C/X`` (or ``/c/X``: ``Fs.winpath``).
"""

from __future__ import annotations

import re
from typing import Optional

from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.compilers import cuda_sdk_compilers, hip_sdk_compilers
from pytest_gpuenv.detect.fs import Fs


def windows(ctx: Ctx) -> None:
    fs, env, environ = ctx.fs, ctx.env, ctx.environ
    sysroot = environ.get("SystemRoot") or environ.get("SYSTEMROOT") or "C:\\Windows"
    system32 = fs.winpath(sysroot.rstrip("\\/") + "\\System32")
    hip_path = environ.get("HIP_PATH")
    hip_dir = fs.winpath(hip_path) if hip_path else None
    sep = "/" if fs.root_mode else "\\"
    dll = _hip_runtime(fs, system32, hip_dir)
    if hip_path or dll:
        _hip_sdk(ctx, hip_path, hip_dir, dll, sep)
    elif fs.exists(f"{system32}/nvcuda.dll"):
        env.kind = "cuda-windows"
        ctx.ev.append(f"{system32}/nvcuda.dll: present")
        ctx.probe_required = True
    else:
        env.kind = "cpu"
    cuda_path = environ.get("CUDA_PATH")
    if cuda_path:
        env.compilers.update(cuda_sdk_compilers(fs, fs.winpath(cuda_path).rstrip("/\\") + sep + "bin", sep))


def _hip_runtime(fs: Fs, system32: str, hip_dir: Optional[str]) -> Optional[tuple[str, str]]:
    """(DLL name, path) of the HIP runtime the AMD driver installs, in System32 or the SDK's bin."""
    for name in ("amdhip64_7.dll", "amdhip64_6.dll", "amdhip64.dll"):
        for d in (system32, hip_dir.rstrip("/") + "/bin" if hip_dir else None):
            if d and fs.exists(f"{d}/{name}"):
                return name, f"{d}/{name}"
    return None


def _hip_sdk(ctx: Ctx, hip_path: Optional[str], hip_dir: Optional[str], dll: Optional[tuple[str, str]],
             sep: str) -> None:
    fs, env = ctx.fs, ctx.env
    env.kind = "hip-windows"
    bin_dir = (hip_dir.rstrip("/\\") + sep + "bin") if hip_dir else None
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", hip_path or "")
    env.hip_sdk = {
        "path": hip_path,
        "version": m.group(1) if m else None,
        "dll": dll[0] if dll else None,
        "hipinfo": f"{bin_dir}{sep}hipInfo.exe" if bin_dir and fs.exists(f"{bin_dir}{sep}hipInfo.exe") else None,
    }
    ctx.ev.append(f"HIP_PATH: {hip_path}; HIP runtime: {dll[1] if dll else 'missing'}")
    if bin_dir:
        env.compilers.update(hip_sdk_compilers(fs, bin_dir, sep))
        ctx.rocm = {"lib_dirs": [bin_dir]}
    if not dll:
        ctx.add("hip-runtime-missing", "Unable to find amdhip64_6.dll / amdhip64_7.dll: HIP_PATH is set but the "
                "HIP runtime (shipped by the AMD GPU driver) is missing",
                "install or upgrade the AMD Adrenalin driver / HIP SDK", "error", "driver")
    ctx.add("no-torch-rocm-on-windows", "native Windows with the HIP SDK: HIP kernels compile and run, but there "
            "are no official PyTorch ROCm wheels for Windows", "for PyTorch on an AMD GPU use WSL 2 "
            "(ROCm on WSL, HSA_ENABLE_DXG_DETECTION=1); HIP tests run here", "info", "torch")
    override = ctx.environ.get("HSA_OVERRIDE_GFX_VERSION")
    ctx.add("hsa-override-ignored-on-windows", "HSA_OVERRIDE_GFX_VERSION has no effect on Windows"
            + (f" (it is set to {override!r})" if override is not None else "")
            + "; a GPU whose gfx target is not built into the HIP SDK libraries cannot be made to run as another",
            "unset HSA_OVERRIDE_GFX_VERSION on Windows; use a supported GPU or WSL 2",
            "warning" if override is not None else "info", "arch")
    ctx.probe_required = True
