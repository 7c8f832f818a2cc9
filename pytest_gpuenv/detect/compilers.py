"""ROCm and CUDA installs, their compilers and libraries, found from files and PATH (no library is loaded).

The one discovery module: detection (``gpuenv info``, any root) and compilation (``pytest_gpuenv.rtc``,
the real system: ``Fs(None)`` and ``os.environ``) look up homes, tools and libraries here, through ``Fs``.

- ROCm homes: ``$ROCM_PATH``, ``$ROCM_HOME``, ``$HIP_PATH``, ``/opt/rocm``, then ``/opt/rocm-<version>``
  newest first. ``rocm_userspace`` takes the first that holds an install, else Debian's packages (``/usr``).
- CUDA homes: ``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``; and the nvidia-* wheels
  (``nvidia/<package>/lib`` and ``include``).
- Tools (hipcc, nvcc): PATH, then ``<home>/bin``. Libraries: hiprtc (libhiprtc, or ROCm 5's libamdhip64)
  and NVRTC by file name.
- Native Windows: hipcc and hiprtc (``hiprtc<MM><mm>.dll``) in the HIP SDK's ``bin``, nvcc and NVRTC in
  ``$CUDA_PATH\\bin``.
- The host C++ compiler (the CPU executor's): ``$CXX``, then g++, clang++, c++ on PATH.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from typing import Any, Optional

from pytest_gpuenv.detect.fs import Fs

_VERSION_RE = r"^\s*(\d+\.\d+(?:\.\d+)?)"  # patterns as text: compiled by re on first use
_HIP_MAJORS = ("7", "6", "5", "8", "9")
#: hiprtc's own library (ROCm >= 6 has hiprtc only there)
HIPRTC_LIBS = ("libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so.8")
#: the HIP runtime, which carries hiprtc in ROCm 5: loaded for hiprtc when no libhiprtc is found
_HIPRTC_IN_AMDHIP = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
#: native Windows hiprtc: clr's hipamd/src/hiprtc/CMakeLists.txt names it ``hiprtc${HIP_MAJOR_VERSION}${HIP_MINOR_VERSION}``
#: (the major zero-padded to two digits, the minor prefixed with 0: ``hiprtc0602.dll`` for HIP 6.2), beside
#: ``amdhip64_<major>.dll``; ``hiprtc-builtins0602.dll`` is its helper, not the API
_HIPRTC_DLL = r"(?i)^hiprtc(\d{2})(\d{2,3})\.dll$"
#: this interpreter runs on native Windows (a module flag, so tests can take the Windows branch)
NATIVE_WINDOWS = sys.platform == "win32"
_NVRTC_NAMES = ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11")
_WHEEL_GLOBS = ("/opt/*/lib/python3*/site-packages/nvidia", "/usr/local/lib/python3*/*-packages/nvidia",
                "/usr/lib/python3*/*-packages/nvidia")


def _absolute(fs: Fs, path: str) -> bool:
    return path.startswith("/") if fs.root_mode else os.path.isabs(path)


def _env_dirs(fs: Fs, environ: Any, names: tuple[str, ...]) -> list[str]:
    return [v.rstrip("/") or "/" for v in (environ.get(n) for n in names) if v and _absolute(fs, v)]


# ------------------------------------------------------------------------------------------ homes
def rocm_homes(fs: Fs, environ: Any) -> list[str]:
    """Where a ROCm install may live, in the order looked at (existing or not)."""
    versioned = [n for n in fs.listdir("/opt") if n.startswith("rocm-") and re.match(_VERSION_RE, n[5:])]
    versioned.sort(key=lambda n: _vkey(n[5:]), reverse=True)
    homes = _env_dirs(fs, environ, ("ROCM_PATH", "ROCM_HOME", "HIP_PATH")) + ["/opt/rocm"]
    return list(dict.fromkeys(homes + ["/opt/" + n for n in versioned]))


def cuda_homes(fs: Fs, environ: Any) -> list[str]:
    """The CUDA toolkit folders that exist: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda."""
    homes = _env_dirs(fs, environ, ("CUDA_HOME", "CUDA_PATH")) + ["/usr/local/cuda"]
    return [h for h in dict.fromkeys(homes) if fs.isdir(h)]


def nvidia_wheels(fs: Fs) -> list[str]:
    """The ``nvidia`` namespace folders of the nvidia-* wheels (this interpreter's, or found under the root)."""
    if fs.root_mode:
        return [p for pat in _WHEEL_GLOBS for p in fs.glob(pat)]
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError, AttributeError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def find_tool(fs: Fs, name: str, environ: Any, homes: list[str]) -> Optional[str]:
    """``name`` on PATH, else the first ``<home>/bin/<name>``."""
    return fs.which(name, environ.get("PATH"), tuple(h.rstrip("/") + "/bin" for h in homes))


def _multiarch_dirs(fs: Fs) -> list[str]:
    machine = getattr(os, "uname", lambda: None)()
    first = f"/usr/lib/{machine.machine}-linux-gnu" if machine is not None and not fs.root_mode else None
    dirs = [first] if first and fs.isdir(first) else []
    if not dirs:
        dirs = ["/usr/lib/" + n for n in fs.listdir("/usr/lib") if n.endswith("-linux-gnu")]
    return dirs + [d for d in ("/usr/lib64",) if fs.isdir(d)]


# ------------------------------------------------------------------------------------------ ROCm
def rocm_userspace(fs: Fs, environ: Any, ev: list[str]) -> dict[str, Any]:
    """The ROCm install: its path, version, library folders, HIP runtime, hiprtc and librocdxg."""
    info: dict[str, Any] = {"version": None, "path": None, "driver_version": None, "hip_runtime": None,
                            "hip_major": None, "hiprtc": False, "rocdxg": False, "lib_dirs": []}
    if not _rocm_home(fs, environ, info, ev):
        # Debian/Ubuntu packages: libamdhip64 in the multiarch dir, version in the changelog
        for libdir in _multiarch_dirs(fs):
            major = next((m for m in _HIP_MAJORS if fs.exists(f"{libdir}/libamdhip64.so.{m}")), None)
            if major is not None:
                info.update(path="/usr", lib_dirs=[libdir], version=_debian_version(fs, ev, major))
                break
    for libdir in info["lib_dirs"]:
        for major in _HIP_MAJORS:
            if fs.exists(f"{libdir}/libamdhip64.so.{major}"):
                info["hip_runtime"], info["hip_major"] = f"{libdir}/libamdhip64.so.{major}", int(major)
                break
        if info["hip_runtime"] is None and fs.exists(libdir + "/libamdhip64.so"):
            info["hip_runtime"] = libdir + "/libamdhip64.so"
        if fs.exists(libdir + "/librocdxg.so") or fs.exists(libdir + "/librocdxg.so.1"):
            info["rocdxg"] = True
        if any(fs.exists(f"{libdir}/{n}") for n in HIPRTC_LIBS):
            info["hiprtc"] = True
        if info["hip_runtime"]:
            break
    if info["hip_major"] is None and info["version"]:
        m = re.match(r"\d+", info["version"])
        info["hip_major"] = int(m.group(0)) if m else None
    if info["hip_major"] == 5 and info["hip_runtime"]:
        info["hiprtc"] = True  # ROCm 5.x: hiprtc lives inside libamdhip64
    if info["hip_runtime"]:
        ev.append(f"HIP runtime: {info['hip_runtime']}")
    return info


def _rocm_home(fs: Fs, environ: Any, info: dict[str, Any], ev: list[str]) -> bool:
    """Fill path, lib_dirs and version from the first ROCm home that holds an install."""
    for cand in rocm_homes(fs, environ):
        if not fs.isdir(cand):
            continue
        libs = [d for d in (cand + "/lib", cand + "/lib64") if fs.isdir(d)]
        version = _version_file(fs, cand)
        if version is None and not libs and not fs.isdir(cand + "/bin"):
            continue
        if version is None and os.path.basename(cand).startswith("rocm-"):
            m = re.match(_VERSION_RE, os.path.basename(cand)[5:])
            version = m.group(1) if m else None
        info.update(path=cand, lib_dirs=libs, version=version)
        ev.append(f"{cand}/.info/version: {version}")
        return True
    return False


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", v)[:3])


def _version_file(fs: Fs, root: str) -> Optional[str]:
    text = fs.read(root + "/.info/version", 256)
    if text is None:
        return None
    m = re.match(_VERSION_RE, text)
    return m.group(1) if m else None


def _changelog_packages(fs: Fs, major: str) -> Iterator[str]:
    """The packages whose changelog may name the HIP runtime's version: Debian's names first; the folder is
    listed only when those are missing (another name, such as a ``t64`` rename of the library's package)."""
    names = (f"libamdhip64-{major}", "libamdhip64-dev")
    yield from names
    yield from (n for n in fs.listdir("/usr/share/doc") if n.startswith("libamdhip64") and n not in names)


def _debian_version(fs: Fs, ev: list[str], major: str) -> Optional[str]:
    """The version in the changelog of the package that installed ``libamdhip64.so.<major>`` (Debian names
    it after the library's major: ``libamdhip64-5``) or of its ``-dev`` package, else in hip_version.h."""
    for name in _changelog_packages(fs, major):
        path = f"/usr/share/doc/{name}/changelog.Debian.gz"
        data = fs.read_bytes(path, 4096)
        if not data:
            continue
        try:
            import zlib

            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, 400).decode("utf-8", "replace")
        except Exception:
            continue
        m = re.match(r"^\S+ \((?:\d+:)?(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            ev.append(f"{path}: {text.splitlines()[0]}")
            return m.group(1)
    header = fs.read("/usr/include/hip/hip_version.h", 4096)
    if header:
        mj = re.search(r"HIP_VERSION_MAJOR\s+(\d+)", header)
        mn = re.search(r"HIP_VERSION_MINOR\s+(\d+)", header)
        if mj and mn:
            ev.append(f"/usr/include/hip/hip_version.h: {mj.group(1)}.{mn.group(1)}")
            return f"{mj.group(1)}.{mn.group(1)}"
    return None


def hiprtc_library(fs: Fs, environ: Any) -> Optional[str]:
    """The library to load hiprtc from: in the ROCm homes' ``lib``, LD_LIBRARY_PATH, the system folders
    (native Windows: the newest ``hiprtc<MM><mm>.dll`` in ``%HIP_PATH%\\bin``, then on PATH)."""
    if NATIVE_WINDOWS and not fs.root_mode:
        return windows_hiprtc(fs, environ)
    dirs = [h + "/lib" for h in rocm_homes(fs, environ)]
    dirs += [d for d in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    dirs += _multiarch_dirs(fs) + ["/usr/lib", "/usr/local/lib"]
    for name in HIPRTC_LIBS + _HIPRTC_IN_AMDHIP:
        for d in dirs:
            if fs.isfile(f"{d.rstrip('/')}/{name}"):
                return f"{d.rstrip('/')}/{name}"
    return None


def hiprtc_dll(fs: Fs, bin_dir: str) -> Optional[str]:
    """The name of the newest hiprtc DLL in ``bin_dir`` (``hiprtc0604.dll``), or None."""
    found = [(int(m.group(1)), int(m.group(2)), n) for n in fs.listdir(bin_dir) for m in [re.match(_HIPRTC_DLL, n)] if m]
    return max(found)[2] if found else None


def windows_hiprtc(fs: Fs, environ: Any) -> Optional[str]:
    """Native Windows: the hiprtc DLL in ``%HIP_PATH%\\bin`` (read under the root in root mode), else in a
    folder on PATH."""
    sep = "/" if fs.root_mode else os.sep
    dirs = [fs.winpath(environ["HIP_PATH"]).rstrip("/\\") + sep + "bin"] if environ.get("HIP_PATH") else []
    if not fs.root_mode:
        dirs += [d for d in environ.get("PATH", "").split(os.pathsep) if d]
    for d in dirs:
        name = hiprtc_dll(fs, d)
        if name:
            return d.rstrip("/\\") + sep + name
    return None


# ------------------------------------------------------------------------------------------ CUDA
def cuda_include_dirs(fs: Fs, environ: Any) -> list[str]:
    """Where cuda_fp16.h lives (NVRTC has no builtin copy): the CUDA homes, then the nvidia wheels; with its
    ``cccl`` folder where CUDA 13 keeps ``cuda/std`` (cooperative_groups.h includes it; nvcc adds it itself)."""
    cands = [h + "/include" for h in cuda_homes(fs, environ)]
    cands += [f"{w}/{sub}/include" for w in nvidia_wheels(fs) for sub in fs.listdir(w)]
    found = [c for c in dict.fromkeys(cands) if fs.isfile(c + "/cuda_fp16.h")][:1]
    return found + [c + "/cccl" for c in found if fs.isdir(c + "/cccl/cuda/std")]


def _nvrtc_library(fs: Fs, environ: Any) -> Optional[str]:
    homes = cuda_homes(fs, environ)[:1]
    dirs = [d for h in homes for d in (h + "/lib64", h + "/lib")]
    dirs += [f"{h}/targets/{t}/lib" for h in homes for t in fs.listdir(h + "/targets")]
    for d in dirs + _multiarch_dirs(fs):
        for n in _NVRTC_NAMES:
            if fs.exists(f"{d}/{n}"):
                return f"{d}/{n}"
    # the nvidia-cuda-nvrtc wheel: nvidia/cuda_nvrtc/lib (CUDA 12) or nvidia/cu13/lib (CUDA 13)
    for root in nvidia_wheels(fs):
        for sub in fs.listdir(root):
            if sub != "cuda_nvrtc" and not sub.startswith("cu"):
                continue
            for n in fs.listdir(f"{root}/{sub}/lib"):
                if n.startswith("libnvrtc.so") or (n.startswith("nvrtc64_") and n.endswith(".dll")):
                    return f"{root}/{sub}/lib/{n}"
    return None


# ------------------------------------------------------------------------------------------ host C++
CXX_NAMES = ("g++", "clang++", "c++")


def cxx_compiler(fs: Fs, environ: Any) -> Optional[str]:
    """The host C++ compiler the CPU executor builds with: ``$CXX`` (a path or a name on PATH), then
    g++, clang++, c++ on PATH."""
    want = (environ.get("CXX") or "").split()
    names = ([want[0]] if want else []) + list(CXX_NAMES)
    for n in names:
        if _absolute(fs, n):
            if fs.isfile(n):
                return n
            continue
        found = fs.which(n, environ.get("PATH"), ())
        if found:
            return found
    return None


# ------------------------------------------------------------------------------------------ summary
def find_compilers(fs: Fs, environ: Any, rocm: dict[str, Any], ev: list[str]) -> dict[str, Any]:
    """``GpuEnv.compilers`` on Linux: hipcc/nvcc paths, whether hiprtc/NVRTC are installed."""
    out: dict[str, Any] = {"hiprtc": bool(rocm.get("hiprtc")), "nvrtc": False, "hipcc": None, "nvcc": None}
    cxx = cxx_compiler(fs, environ)
    if cxx:  # the host C++ compiler (the CPU executor's), listed only where there is one
        out["cxx"] = cxx
    out["hipcc"] = find_tool(fs, "hipcc", environ, [rocm["path"]] if rocm.get("path") else [])
    out["nvcc"] = find_tool(fs, "nvcc", environ, cuda_homes(fs, environ)[:1])
    # listed where installed; CUDA-dialect sources build through the shipped headers (rtc/_cuda), not hipify
    hipify = [find_tool(fs, n, environ, [rocm["path"]] if rocm.get("path") else []) for n in ("hipify-perl", "hipify-clang")]
    if any(hipify):
        out["hipify"] = next(h for h in hipify if h)
    nvrtc = _nvrtc_library(fs, environ)
    if nvrtc:
        ev.append(f"nvrtc: {nvrtc}")
        out["nvrtc"] = True
    for k in ("hipcc", "nvcc", "cxx", "hipify"):
        if out.get(k):
            ev.append(f"{k}: {out[k]}")
    return out


def hip_sdk_compilers(fs: Fs, bin_dir: str, sep: str) -> dict[str, Any]:
    """Native Windows, the HIP SDK's ``bin``: hipcc and whether a hiprtc DLL is there."""
    out: dict[str, Any] = {}
    for exe in ("hipcc.exe", "hipcc.bin.exe", "hipcc"):
        if fs.exists(f"{bin_dir}{sep}{exe}"):
            out["hipcc"] = f"{bin_dir}{sep}{exe}"
            break
    out["hiprtc"] = hiprtc_dll(fs, bin_dir) is not None
    return out


def cuda_sdk_compilers(fs: Fs, bin_dir: str, sep: str) -> dict[str, Any]:
    """Native Windows, ``$CUDA_PATH\\bin``: nvcc and whether an NVRTC DLL is there."""
    out: dict[str, Any] = {}
    if fs.exists(f"{bin_dir}{sep}nvcc.exe"):
        out["nvcc"] = f"{bin_dir}{sep}nvcc.exe"
    out["nvrtc"] = any(n.lower().startswith("nvrtc64_") for n in fs.listdir(bin_dir))
    return out
