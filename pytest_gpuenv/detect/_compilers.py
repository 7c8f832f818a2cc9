"""Kernel compilers found from files and PATH only (no library is loaded)."""

from __future__ import annotations

from typing import Any, Optional

from pytest_gpuenv.detect._fs import Fs

_NVRTC_NAMES = ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11")


def cuda_home(fs: Fs, environ: Any) -> Optional[str]:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        v = environ.get(var)
        if v and v.startswith("/") and fs.isdir(v):
            return v.rstrip("/")
    return "/usr/local/cuda" if fs.isdir("/usr/local/cuda") else None


def find_compilers(fs: Fs, environ: Any, rocm: dict[str, Any], ev: list[str]) -> dict[str, Any]:
    path_var = environ.get("PATH")
    out: dict[str, Any] = {"hiprtc": bool(rocm.get("hiprtc")), "nvrtc": False, "hipcc": None, "nvcc": None}
    extra = (rocm["path"] + "/bin",) if rocm.get("path") else ()
    out["hipcc"] = fs.which("hipcc", path_var, extra)
    home = cuda_home(fs, environ)
    out["nvcc"] = fs.which("nvcc", path_var, (home + "/bin",) if home else ())
    libdirs = []
    if home:
        libdirs += [home + "/lib64", home + "/lib"]
        libdirs += [f"{home}/targets/{t}/lib" for t in fs.listdir(home + "/targets")]
    libdirs.append(f"/usr/lib/{_arch()}-linux-gnu")
    for d in libdirs:
        for n in _NVRTC_NAMES:
            if fs.exists(f"{d}/{n}"):
                out["nvrtc"] = f"{d}/{n}"
                break
        if out["nvrtc"]:
            break
    if not out["nvrtc"]:
        out["nvrtc"] = _nvrtc_wheel(fs)
    if out["nvrtc"]:
        ev.append(f"nvrtc: {out['nvrtc']}")
        out["nvrtc"] = True
    for k in ("hipcc", "nvcc"):
        if out[k]:
            ev.append(f"{k}: {out[k]}")
    return out


def _arch() -> str:
    import os

    try:
        return os.uname().machine
    except AttributeError:  # pragma: no cover - Windows
        return "x86_64"


def _nvrtc_wheel(fs: Fs) -> Optional[str]:
    """The nvidia-cuda-nvrtc wheel: nvidia/cuda_nvrtc/lib (CUDA 12) or nvidia/cu13/lib (CUDA 13)."""
    if fs.root_mode:
        import glob

        roots = [
            p[len(fs.base):]
            for pat in ("/opt/*/lib/python3*/site-packages/nvidia", "/usr/local/lib/python3*/*-packages/nvidia",
                        "/usr/lib/python3*/*-packages/nvidia")
            for p in glob.glob(glob.escape(fs.base) + pat)
        ]
    else:
        try:
            import importlib.util

            spec = importlib.util.find_spec("nvidia")
        except (ImportError, ValueError, AttributeError):
            return None
        roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for sub in fs.listdir(root):
            if sub not in ("cuda_nvrtc",) and not sub.startswith("cu"):
                continue
            lib = f"{root}/{sub}/lib"
            for n in fs.listdir(lib):
                if n.startswith("libnvrtc.so") or (n.startswith("nvrtc64_") and n.endswith(".dll")):
                    return f"{lib}/{n}"
    return None
