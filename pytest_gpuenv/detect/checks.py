"""The installed torch build, read from ``torch/version.py`` as text (torch is never imported: ``read_torch``),
and the checks once the devices are known: an arch or memory no source could give, gfx targets the build lacks,
the torch build against the GPUs, and on ROCm what a GPU fault does to the process and which hip-python release
matches the installed ROCm."""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Optional

from pytest_gpuenv.base.model import Device, Usability, family
from pytest_gpuenv.detect import _amd
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect._hipmask import clr_uint
from pytest_gpuenv.detect.fs import Fs

# ------------------------------------------------------------------------------------------ torch/version.py
#: site-packages folders where torch may be installed, under a root
_SITE_GLOBS = (
    "/opt/*/lib/python3*/site-packages",
    "/opt/*/*/lib/python3*/site-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/lib/python3*/dist-packages",
    "/root/.local/lib/python3*/site-packages",
    "/home/*/.local/lib/python3*/site-packages",
    "/venv/lib/python3*/site-packages",
)


def find_version_py(fs: Fs, environ: Any) -> Optional[str]:
    """Path (as the examined system names it) of torch/version.py, or None."""
    if not fs.root_mode:
        try:
            import importlib.util

            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError, AttributeError):
            return None
        if spec is None:
            return None
        locs = list(spec.submodule_search_locations or [])
        for loc in locs:
            path = loc.rstrip("/") + "/version.py"
            if fs.isfile(path):
                return path
        return None
    venv = environ.get("VIRTUAL_ENV") or environ.get("CONDA_PREFIX")
    patterns = [glob.escape(venv.rstrip("/")) + "/lib/python3*/site-packages"] if venv and venv.startswith("/") else []
    for pat in patterns + list(_SITE_GLOBS):
        for path in fs.glob(pat + "/torch/version.py"):
            return path
    return None


#: the fields read, each from its first ``name = 'text'`` / ``"text"`` / ``None`` at the start of a line (an
#: annotation allowed: ``cuda: Optional[str] = None``)
_NAMES = ("__version__", "hip", "cuda", "xpu")


def _fields(text: str) -> dict[str, Optional[str]]:
    """The first assignment of each field (a string, or None for ``None``); other assignments are passed over."""
    out: dict[str, Optional[str]] = {}
    for line in text.splitlines():
        target, eq, value = line.partition("=")
        name, value = target.partition(":")[0].rstrip(), value.strip()
        if not eq or name not in _NAMES or name in out:
            continue
        if value.startswith("None"):
            out[name] = None
        elif value[:1] in ("'", '"') and value[0] in value[1:]:
            out[name] = value[1:value.index(value[0], 1)]
    return out


def read_torch(fs: Fs, environ: Any, ev: list[str]) -> Optional[dict[str, Any]]:
    path = find_version_py(fs, environ)
    if path is None:
        return None
    text = fs.read(path, 16384)
    if text is None:
        return None
    fields = _fields(text)
    version = fields.get("__version__")
    if not version:
        ev.append(f"{path}: no __version__")
        return {"version": None, "build": None, "hip": None, "cuda": None, "path": path}
    hip, cuda, xpu = fields.get("hip"), fields.get("cuda"), fields.get("xpu")
    build = "rocm" if hip else "cuda" if cuda else "xpu" if xpu else "cpu"
    ev.append(f"{path}: __version__ {version!r}, hip {hip!r}, cuda {cuda!r}")
    return {"version": version, "build": build, "hip": hip, "cuda": cuda, "path": path}


# ------------------------------------------------------------------------------------------ checks
def facts_unknown(devices: list[Device]) -> list[Device]:
    """The usable devices whose arch or memory is unknown: what ``requires_arch``, ``requires_memory`` and
    ``requires_capability`` skip on."""
    return [d for d in devices if d.usable and (d.arch is None or d.memory_bytes is None)]


def unknown_facts(ctx: Ctx) -> None:
    """``gpu-facts-unknown``: usable GPUs whose arch or memory neither the files, nor NVML, nor the runtime probe
    gave, so the markers that need them would skip tests this machine can run; the fix names what supplies them.
    Under a root only the files are read: a note (the machine itself knows more), not a warning."""
    env = ctx.env
    devs = facts_unknown(env.devices)
    if not devs:
        return
    arch, memory = any(d.arch is None for d in devs), any(d.memory_bytes is None for d in devs)
    what = " and ".join(w for w, gone in (("arch", arch), ("memory", memory)) if gone)
    marks = [m for m, gone in (("requires_arch", arch), ("requires_memory", memory), ("requires_capability", arch))
             if gone]
    nvidia = devs[0].vendor == "nvidia"
    message = f"the {what} of {env.describe_devices(devs)} {'is' if ' and ' not in what else 'are'} unknown"
    if ctx.fs.root_mode:
        ctx.add("gpu-facts-unknown", message + " (not in the files under the root; no library is loaded there)",
                "run `gpuenv info` on that machine: " + ("NVML (nvidia-ml-py) reads them there" if nvidia else
                                                         "the runtime probe (hip-python or torch) reads them there"),
                "info", "probe")
        return
    why = [f"NVML: {ctx.nvml_why}"] if nvidia and ctx.nvml_why else []
    probe = env.probe
    if probe.get("ran") and not probe.get("ok"):
        why.append(f"the runtime probe failed: {probe.get('error')}")
    elif not probe.get("ran"):
        why.append("the runtime probe is off (probe 'never')" if ctx.probe_mode == "never"
                   else "the runtime probe did not run")
    else:
        why.append(f"the runtime probe ({probe.get('source')}) did not give them")
    asked = "NVML and the runtime probe" if nvidia else "the runtime probe"
    fixes = [f"let {asked} run (--gpuenv-probe=auto; `gpuenv doctor --probe auto`)"] if ctx.probe_mode == "never" else []
    if nvidia:
        from pytest_gpuenv.runtime import nvml

        if not nvml.installed():
            fixes.insert(0, nvml.INSTALL_HINT)
        elif ctx.nvml_why and ctx.probe_mode != "never":  # the binding is there, the library or driver failed
            fixes.append("give NVML its library: in a container, the driver's utility libraries "
                         "(NVIDIA_DRIVER_CAPABILITIES=compute,utility, or `docker run --gpus all`)")
        fixes.append("or install cuda-python (pip install 'pytest-gpuenv[nvidia]') or a CUDA build of torch for "
                     "the runtime probe")
    else:
        fixes.append(f'install hip-python (pip install "{hip_python_requirement(env.rocm.get("version"))}") or a '
                     "ROCm build of torch for the runtime probe")
    ctx.add("gpu-facts-unknown", f"{message}: {', '.join(marks[:-1])}{' and ' if len(marks) > 1 else ''}{marks[-1]} "
            f"{'skip' if len(marks) > 1 else 'skips'} on them ({'; '.join(why)})", "; ".join(fixes), "warning", "probe")


_CU_INDEXES = ((13, 0, "cu130"), (12, 9, "cu129"), (12, 8, "cu128"), (12, 6, "cu126"), (12, 4, "cu124"),
               (12, 1, "cu121"), (11, 8, "cu118"))


def arch_support(ctx: Ctx) -> None:
    """AMD devices whose gfx target the ROCm/torch build lacks: a warning, and "arch-unsupported" if all."""
    env = ctx.env
    amd = [d for d in env.devices if d.vendor == "amd" and d.usable and d.arch]
    if not amd:
        return
    if ctx.arch_list:
        supported, where = frozenset(a.split(":")[0] for a in ctx.arch_list), "torch.cuda.get_arch_list()"
    else:
        supported, where = _amd.supported_archs(ctx.fs, ctx.rocm.get("lib_dirs") or [], ctx.ev)
        where = where if where.startswith("the targets") else f"rocBLAS in {where}"
    missing = sorted({d.arch for d in amd if d.arch and d.arch not in supported})
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
        env.usable = Usability.ARCH_UNSUPPORTED


def torch_problems(ctx: Ctx) -> None:
    """The installed torch build against the GPUs found: CPU build, wrong flavour, ROCm/CUDA version."""
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


def _pip_fix(ctx: Ctx, fam: str) -> str:
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


# ------------------------------------------------------------------------------------------ ROCm runtime
#: the variable clr reads to keep the process alive on a GPU fault (rocclr/utils/flags.hpp, default on since
#: HIP 7.0: "Exceptions occurring during a kernel execution will not abort the process anymore but will
#: return an error unless core dump is enabled", clr CHANGELOG.md, HIP 7.0)
SKIP_ABORT_VAR = "HIP_SKIP_ABORT_ON_GPU_ERROR"
#: the first hip-python release on PyPI (6.2.0.499.16) loads the unversioned libamdhip64.so/libhiprtc.so
_FIRST_HIP_PYTHON = (6, 2)


def rocm_runtime(ctx: Ctx) -> None:
    """On ROCm: whether a GPU fault aborts the process, and the hip-python release for this ROCm."""
    if family(ctx.env.kind) != "rocm" and not ctx.env.rocm.get("version"):
        return
    if family(ctx.env.kind) == "rocm" and ctx.env.platform == "linux":
        _fault_policy(ctx)
    _hip_python(ctx)


def _vtuple(v: Any) -> Optional[tuple[int, ...]]:
    nums = re.findall(r"\d+", str(v or ""))[:3]
    return tuple(int(n) for n in nums) if len(nums) >= 2 else None


def _core_limit(ctx: Ctx) -> Optional[int]:
    """The soft RLIMIT_CORE of this process (None in root mode or where unknown; -1: unlimited)."""
    if ctx.fs.root_mode:
        return None
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_CORE)[0]
        return -1 if soft == resource.RLIM_INFINITY else int(soft)
    except (ImportError, OSError, ValueError):
        return None


def _fault_policy(ctx: Ctx) -> None:
    """ROCr's VMFaultHandler and clr's queue callback call abort() on a GPU fault (ROCR-Runtime
    runtime/hsa-runtime/core/runtime/runtime.cpp, clr rocclr/device/rocm/rocdevice.cpp ``callbackQueue``);
    from HIP 7.0 clr returns an error instead unless HIP_SKIP_ABORT_ON_GPU_ERROR is 0 or core dumps are on
    (clr ``Os::DumpCoreFile``: RLIMIT_CORE != 0)."""
    version = ctx.env.rocm.get("version")
    setting = ctx.environ.get(SKIP_ABORT_VAR)  # uint flag, default 1; clr aborts where it reads 0
    core = _core_limit(ctx)
    recovery = ("run GPU tests under pytest-xdist (-n N): a crashed worker is replaced and its test is named; "
                "pytest-gpuenv records the running test before each HIP launch, so the next run names it too")
    runtimes = _hip_runtimes(ctx)
    old = next(((label, v) for label, v in runtimes if v is None or v[0] < 7), None)
    if old is not None:
        why = (f"{old[0]} aborts the whole process on a GPU fault ('Memory access fault by GPU node-N'): "
               f"{SKIP_ABORT_VAR} exists from ROCm 7.0 (HIP 7.0)")
        return ctx.add("hip-fault-aborts", why, recovery + "; or upgrade to ROCm >= 7.0", "info", "driver")
    version = " and ".join(label.removeprefix("ROCm ") if label.startswith("ROCm ") else label
                           for label, _v in runtimes)
    if setting is not None and clr_uint(setting, 1) == 0:
        why = (f"{SKIP_ABORT_VAR}={setting!r} is set, which clr reads as 0 (a uint flag: atoi): ROCm {version} "
               "aborts the whole process on a GPU fault")
        return ctx.add("hip-fault-aborts", why, f"unset {SKIP_ABORT_VAR}, or " + recovery, "info", "driver")
    if core is not None and core != 0:
        limit = "unlimited" if core < 0 else str(core)
        why = (f"core dumps are enabled (ulimit -c {limit}): ROCm {version} aborts the whole process on a GPU "
               f"fault to write one, whatever {SKIP_ABORT_VAR} says")
        return ctx.add("hip-fault-aborts", why, "`ulimit -c 0` before pytest, or " + recovery, "info", "driver")
    ctx.add("hip-fault-returns-error", f"ROCm {version}: a GPU fault comes back as an error ({SKIP_ABORT_VAR} "
            "in effect" + ("" if core is not None else "; it aborts after all when core dumps are enabled")
            + "): the faulting test fails, later GPU tests in that process skip naming it",
            "nothing to do; keep core dumps off (`ulimit -c 0`) for this to hold", "info", "driver")


def _hip_runtimes(ctx: Ctx) -> list[tuple[str, Optional[tuple[int, ...]]]]:
    """The HIP runtimes GPU work in this process may go through, with their versions: the system ROCm's
    ``libamdhip64``, and a torch ROCm wheel's own copy in ``torch/lib`` (its ``torch.version.hip``), which
    torch's launches use whatever ROCm is installed."""
    version = ctx.env.rocm.get("version")
    out: list[tuple[str, Optional[tuple[int, ...]]]] = []
    torch = ctx.env.torch or {}
    lib = os.path.dirname(str(torch.get("path") or "")) + "/lib"
    if torch.get("build") == "rocm" and torch.get("hip") and ctx.fs.glob(glob.escape(lib) + "/libamdhip64.so*"):
        out.append((f"torch {torch.get('version')}'s own HIP runtime {torch['hip']} ({lib}/libamdhip64.so)",
                    _vtuple(torch["hip"])))
    if version or not out:
        out.insert(0, (f"ROCm {version or '(version unknown)'}", _vtuple(version)))
    return out


def hip_python_requirement(rocm_version: Any) -> str:
    """The pip requirement of the hip-python release for a ROCm version. hip-python's releases on PyPI are
    numbered after the ROCm release they were built for, then HIP's build numbers (6.4.1.552.39 for ROCm
    6.4.1, 7.2.0.562.43 for 7.2.0); the first, 6.2.0.499.16, loads the unversioned libamdhip64.so and
    libhiprtc.so and so is the one for ROCm before 6.3 as well."""
    v = _vtuple(rocm_version)
    if v is None or v[:2] < (6, 3):
        return "hip-python==6.2.*"
    return "hip-python==" + ".".join(str(n) for n in v) + ".*"


def _installed_hip_python(ctx: Ctx) -> Optional[str]:
    """The installed hip-python's version, from the name of the ``hip_python-<version>.dist-info`` folder its
    wheel leaves: beside the ``hip`` package this interpreter would import (looked up, not imported), or
    under the root in its site-packages folders. No package metadata is read (importlib.metadata would scan
    every installed distribution and parse a METADATA file: about 8 ms of every detection)."""
    fs = ctx.fs
    dirs = [d for pat in _SITE_GLOBS for d in fs.glob(pat)] if fs.root_mode else [os.path.dirname(p) for p in _hip_package()]
    for d in dirs:
        for name in fs.listdir(d):
            if name.startswith("hip_python-") and name.endswith(".dist-info") and len(name) > 21:
                return name[len("hip_python-"):-len(".dist-info")]
    return None


def _hip_package() -> list[str]:
    """The folder(s) of the ``hip`` package on this interpreter's path; [] when there is none."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("hip")
    except (ImportError, ValueError, AttributeError):
        return []
    return [p for p in (spec.submodule_search_locations or []) if os.path.isabs(p)] if spec else []


def _hip_python(ctx: Ctx) -> None:
    rocm = ctx.env.rocm.get("version")
    req = hip_python_requirement(rocm)
    fix = f'pip install "{req}"  (or: pip install "pytest-gpuenv[amd]" "{req}")'
    installed = _installed_hip_python(ctx)
    if installed is None:
        if family(ctx.env.kind) == "rocm":
            ctx.add("hip-python-missing", f"hip-python is not installed: hip_kernel and the driver timer need it "
                    f"on ROCm {rocm or '?'}", fix, "info", "toolchain")
        return
    have, want = _vtuple(installed), _vtuple(rocm)
    if have is None or want is None:
        return
    need = _FIRST_HIP_PYTHON if want[:2] < (6, 3) else want[:2]
    if have[:2] != need:
        ctx.add("hip-python-rocm-mismatch", f"hip-python {installed} does not match ROCm {rocm} (it needs the "
                f"hip-python built for its ROCm release: {req})", fix, "warning", "toolchain")
    elif need == _FIRST_HIP_PYTHON and ctx.rocm.get("lib_dirs") and not any(
            ctx.fs.exists(f"{d}/libamdhip64.so") for d in ctx.rocm["lib_dirs"]):
        ctx.add("hip-python-no-unversioned-lib", f"hip-python {installed} loads libamdhip64.so, which is not in "
                f"{', '.join(ctx.rocm['lib_dirs'])} (only the versioned library of ROCm {rocm} is)",
                "install ROCm's development package (hip-runtime-amd-dev, libamdhip64-dev) or link libamdhip64.so "
                "to the versioned library", "warning", "toolchain")
