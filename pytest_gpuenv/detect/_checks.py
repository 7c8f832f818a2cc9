"""Checks once the devices are known: gfx targets the build lacks, and the installed torch build."""

from __future__ import annotations

from pytest_gpuenv.detect import _amd
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.model import family

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
        env.usable = "arch-unsupported"


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
