"""Whether ROCm's AddressSanitizer can check kernels on an AMD GPU here, and what is missing where it cannot.

ROCm's GPU AddressSanitizer (ROCm docs, "Using AddressSanitizer", rocm.docs.amd.com/en/latest/conceptual/
using-gpu-sanitizer.html; "Install AMD ROCm with ASAN", .../install/asan.html) needs:

- an arch it supports: gfx90a, gfx942, gfx950 (the ASan builds exist only for these);
- device code built by the clang driver (``hipcc``) with ``-fsanitize=address -shared-libsan -g`` for the
  target with XNACK on (``--offload-arch=gfx942:xnack+``; clang's ``AMDGPUToolChain::shouldSkipSanitizeOption``
  drops the device instrumentation, with a warning, on a target without ``xnack+``), which links the device
  runtime ``asanrtl.bc`` from the ROCm device library folder (``amdgcn/bitcode``; ``lib/llvm/amdgcn/bitcode``
  from ROCm 7);
- the host ASan runtime, ``libclang_rt.asan-x86_64.so`` in ``llvm/lib/clang/<version>/lib/linux`` (LLVM's
  per-target layout: ``libclang_rt.asan.so`` in ``lib/x86_64-unknown-linux-gnu``), preloaded into a program
  such as Python that was not linked against it;
- XNACK on at run time: ``HSA_XNACK=1`` (ROCr switches the process's mode through KFD), which needs the
  kernel driver's HMM/SVM support: the KFD node's ``capability`` has ``HSA_CAP_SVMAPI_SUPPORTED``
  (0x08000000, linux include/uapi/linux/kfd_sysfs.h; set by ``kfd_topology_add_device`` where
  ``KFD_IS_SVM_API_SUPPORTED``). The mode without the variable is the driver's: ``amdgpu.noretry=0``
  (``/sys/module/amdgpu/parameters/noretry``) turns retry, XNACK, on by default;
- optionally, ROCm's ASan-instrumented libraries in ``lib/asan`` (the ``*-asan`` packages), put first on
  ``LD_LIBRARY_PATH`` so that their own accesses are checked too.

Everything is read through ``Fs``, so a machine tree (``--gpuenv-root``) answers as the machine would.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from pytest_gpuenv.base.model import Device
from pytest_gpuenv.detect._amd import number, topology_dir
from pytest_gpuenv.detect.compilers import find_tool
from pytest_gpuenv.detect.fs import Fs

#: the arches ROCm ships AddressSanitizer builds for
ASAN_ARCHS = ("gfx90a", "gfx942", "gfx950")
#: include/uapi/linux/kfd_sysfs.h
HSA_CAP_SVMAPI_SUPPORTED = 0x08000000
#: the compile options of an instrumented build (ROCm docs, "Compiling for ASan")
COMPILE_OPTIONS = ("-fsanitize=address", "-shared-libsan", "-g")
_HOST_RUNTIMES = ("llvm/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so",
                  "llvm/lib/clang/*/lib/x86_64-unknown-linux-gnu/libclang_rt.asan.so",
                  "lib/llvm/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so",
                  "lib/llvm/lib/clang/*/lib/x86_64-unknown-linux-gnu/libclang_rt.asan.so")
_DEVICE_RUNTIMES = ("amdgcn/bitcode/asanrtl.bc", "llvm/amdgcn/bitcode/asanrtl.bc", "lib/llvm/amdgcn/bitcode/asanrtl.bc")


class RocmAsan(NamedTuple):
    """What was found: ``missing`` (each a sentence saying what and where; empty: it can run), the host runtime
    to preload, the instrumented library folder (None: absent, optional), ``hipcc``, and the XNACK mode."""

    missing: list[str]
    runtime: Optional[str]
    lib_dir: Optional[str]
    hipcc: Optional[str]
    xnack: str

    @property
    def ready(self) -> bool:
        return not self.missing


def _first(fs: Fs, home: str, patterns: tuple[str, ...]) -> Optional[str]:
    for pat in patterns:
        found = fs.glob(f"{home}/{pat}")
        if found:
            return found[-1]  # (the highest clang version: glob sorts)
    return None


def _capability(fs: Fs, node: Optional[int]) -> Optional[int]:
    topo = topology_dir(fs)
    if topo is None or node is None:
        return None
    for line in (fs.read(f"{topo}/nodes/{node}/properties", 65536) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "capability":
            return number(parts[1])
    return None


def _xnack(fs: Fs, device: Device, environ: Any, missing: list[str]) -> str:
    """The XNACK mode the child will run with (it sets HSA_XNACK=1 unless the user set it), and what stops it."""
    cap = _capability(fs, device.node)
    if cap is not None and not cap & HSA_CAP_SVMAPI_SUPPORTED:
        missing.append(f"XNACK: the amdgpu kernel driver has no HMM/SVM support for this GPU (KFD node {device.node} "
                       "capability lacks HSA_CAP_SVMAPI_SUPPORTED; a kernel built with CONFIG_HSA_AMD_SVM has it)")
    user = environ.get("HSA_XNACK")
    if user is not None and user.strip() != "1":
        missing.append(f"XNACK: HSA_XNACK={user} in the environment keeps it off; unset it (the run sets HSA_XNACK=1)")
        return f"off (HSA_XNACK={user})"
    noretry = (fs.read("/sys/module/amdgpu/parameters/noretry", 64) or "").strip()
    default = {"0": "on", "1": "off"}.get(noretry, "unknown")
    return f"on (HSA_XNACK=1; the driver's default is {default}" + (f", amdgpu.noretry={noretry})" if noretry else ")")


def rocm_asan(fs: Fs, rocm_path: Optional[str], device: Device, environ: Any) -> RocmAsan:
    """What AddressSanitizer needs on ``device`` (an AMD GPU) with the ROCm install at ``rocm_path``."""
    missing: list[str] = []
    arch = (device.arch or "").split(":")[0]
    if arch not in ASAN_ARCHS:
        missing.append(f"arch: ROCm's AddressSanitizer supports {', '.join(ASAN_ARCHS)}; {device.describe()} is "
                       f"{arch or 'of unknown arch'}")
    runtime = lib_dir = hipcc = None
    if not rocm_path:
        missing.append("ROCm: no ROCm install was found (ROCM_PATH, /opt/rocm)")
    else:
        home = rocm_path.rstrip("/") or "/"
        runtime = _first(fs, home, _HOST_RUNTIMES)
        if runtime is None:
            missing.append(f"the host ASan runtime: no libclang_rt.asan under {home}/llvm/lib/clang/*/lib/linux "
                           "(ROCm's llvm package, rocm-llvm)")
        if _first(fs, home, _DEVICE_RUNTIMES) is None:
            missing.append(f"the device ASan runtime: no asanrtl.bc under {home}/amdgcn/bitcode "
                           "(ROCm's device libraries, rocm-device-libs)")
        lib_dir = f"{home}/lib/asan" if fs.glob(f"{home}/lib/asan/libamdhip64.so*") else None
        hipcc = find_tool(fs, "hipcc", {"PATH": environ.get("PATH", "")}, [home])
        if hipcc is None:
            missing.append(f"hipcc: not on PATH nor in {home}/bin (the clang driver links the device ASan runtime)")
    xnack = _xnack(fs, device, environ, missing)
    return RocmAsan(missing, runtime, lib_dir, hipcc, xnack)
