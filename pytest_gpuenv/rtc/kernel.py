"""``compile_kernel``: compile a HIP source once (cached) into a ``Kernel`` (``_gpu_kernel``) for a GPU,
or into a ``CpuKernel`` (``_cpu_kernel``) for the CPU executor; launch it many times.

``build_kernels`` is the one compile path (also ``compile_module``'s): the arch, the compiler, the cache
key over every header the compiler can reach, and the CPU executor's build for ``arch="cpu"``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv.rtc import _cuda, compilers, instrument
from pytest_gpuenv.rtc import names as _names
from pytest_gpuenv.rtc._deps import device_headers, merge
from pytest_gpuenv.rtc._gpu_kernel import Kernel
from pytest_gpuenv.rtc.cache import Cache, make_key, shared
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.logs import attribute
from pytest_gpuenv.rtc.source import Source, find_headers, include_path_env, load_source, refuse_irregular_headers

__all__ = ["Kernel", "compile_kernel"]


def get_cache(cache_dir: Optional[str]) -> Cache:
    """This process's compile cache for ``cache_dir`` (``rtc.cache.shared``)."""
    return shared(cache_dir)


def compile_kernel(
    source_or_path: str | os.PathLike[str] | Source,
    name: str,
    *,
    arch: Optional[str] = None,
    options: Sequence[str] = (),
    defines: Optional[Mapping[str, Any]] = None,
    include_dirs: Sequence[str] = (),
    kernel_dirs: Optional[Sequence[str]] = None,
    cache_dir: Optional[str] = None,
    compiler: Optional[str] = None,
    device: Optional[int] = None,
    sync: bool = False,
    use_cache: bool = True,
    warp_size: Optional[int] = None,
    check: bool = True,
    lockstep: bool = False,
    dialect: Optional[str] = None,
    target: Optional[str] = None,
    rocm_version: Optional[str] = None,
) -> Kernel:
    """Compile kernel ``name`` from a HIP source (text, a path looked up in ``kernel_dirs``, or a ``Source``
    that ``load_source`` made: it is not read or parsed again).

    ``arch`` defaults to the arch of the current GPU (device ``device``, else torch's current, else
    0). gfx targets build with hiprtc (hipcc where hiprtc is missing), sm targets with NVRTC and the
    shipped HIP-on-CUDA header (nvcc where NVRTC is missing). The code object is cached (see
    ``rtc.cache``). Raises KernelCompileError with the compiler's log, file and line.

    ``arch="cpu"`` builds for the CPU executor with the host C++ compiler (``rtc._cpu_kernel``), standing
    for the AMD ``target`` (``"gfx942"``, ``"gfx1100"``, ``"gfx11-generic"``: its macros, wave size and
    shared-memory limit) under ROCm ``rocm_version`` (``"6.4"``: ``warpSize``'s rule, ``HIP_VERSION``;
    default the installed ROCm's, else 7.0) (``rtc.target``): ``warp_size`` (32 or 64) is ``warpSize``
    (default the target's; without a target, 64 stands for gfx90a and 32 for gfx1100), ``check`` turns on
    the race/bounds/uninitialised checks, ``lockstep`` runs each wavefront in lockstep as AMD hardware does
    (GPU builds ignore these).
    A compile log's error lines name the kernel whose source they are in (``rtc.logs``).

    ``dialect``: ``"cuda"`` for a CUDA source (the default for a ``.cu``/``.cuh`` file; ``"hip"`` for
    anything else): CUDA as written on NVIDIA (nvcc where installed, else NVRTC), through the shipped
    CUDA-to-HIP headers on AMD and the CPU executor (``rtc._cuda``).
    """
    src = given_source(source_or_path, kernel_dirs, dialect)
    return build_kernels(src, [name], arch=arch, options=options, defines=defines, include_dirs=include_dirs,
                         cache_dir=cache_dir, compiler=compiler, device=device, sync=sync, use_cache=use_cache,
                         warp_size=warp_size, check=check, lockstep=lockstep, target=target,
                         rocm_version=rocm_version)[0]


def given_source(source_or_path: str | os.PathLike[str] | Source, kernel_dirs: Optional[Sequence[str]],
                 dialect: Optional[str]) -> Source:
    """The Source a compile is given: one that ``load_source`` made is handed on as it is (in ``dialect`` when
    one is given), not read or parsed again; text or a path is loaded."""
    if isinstance(source_or_path, Source):
        return source_or_path.with_dialect(dialect)
    return load_source(source_or_path, list(kernel_dirs or ()), dialect)


def build_kernels(src: Source, names: Sequence[str], *, arch: Optional[str], options: Sequence[str],
                  defines: Optional[Mapping[str, Any]], include_dirs: Sequence[str], cache_dir: Optional[str],
                  compiler: Optional[str], device: Optional[int], sync: bool, use_cache: bool,
                  warp_size: Optional[int], check: bool, lockstep: bool, target: Optional[str],
                  rocm_version: Optional[str]) -> list[Kernel]:
    """Compile the name expressions ``names`` of ``src`` in one code object: one Kernel each, in order.

    The body of ``compile_kernel`` and ``compile_module``, which keep their keywords spelled out (they are
    what ``help()`` and ``inspect.signature`` show) and declare the defaults; here every keyword is
    required, so a default exists only there (tests/kernels/test_rtc_compile_signatures.py keeps the two alike).
    ``kernel_dirs`` and ``dialect`` are theirs alone: they go to ``load_source``, which made ``src``."""
    src = src.searching(include_dirs, options)  # kernels in headers found through -I are the source's too
    targets = src.targets(names)
    key_name = "\n".join(t.expr for t in targets) if len(targets) > 1 else names[0]  # the cache key's name
    if len(targets) > 1 or not targets[0].simple:
        key_name += f"\n{_names.MARKER_VERSION}"  # the markers (and the CPU dispatch) are part of what is compiled
    name = ", ".join(t.expr for t in targets) if len(targets) > 1 else names[0]  # in messages
    inst = instrument.current()  # a sanitizer run's flags (off: nothing changes)
    instrument.note([t.expr for t in targets])
    try:
        if arch == "cpu":
            check = check or inst.cpu_checked
            from pytest_gpuenv.rtc import target as _target
            from pytest_gpuenv.rtc._cpu_kernel import compile_cpu

            cpu_target = _target.resolve(target, warp_size, rocm_version)
            csrc, cdirs = src, list(include_dirs)
            if src.dialect == "cuda":
                _cuda.check_mappable(src, "cpu", include_dirs)
                csrc, cdirs = _cuda.for_amd(src, include_dirs, keep_path=True)
            return list(compile_cpu(csrc, targets, name, target=cpu_target, check=check, options=options,
                                    defines=dict(defines or {}), include_dirs=cdirs, cache_dir=cache_dir,
                                    use_cache=use_cache, key_name=key_name, lockstep=lockstep))
        arch = compilers.check_arch(_current_arch(device) if arch is None else arch)
        arch, options, compiler = inst.apply(arch, options, compiler)
        if src.dialect == "cuda" and compilers.vendor_of(arch) == "amd":
            _cuda.check_mappable(src, arch, include_dirs)  # whichever compiler is installed
        comp = compilers.for_arch(arch, _cuda.compiler_for(src, arch, compiler))
        defs = dict(defines or {})
        csrc, cdirs = src, list(include_dirs)
        if src.dialect == "cuda" and comp.vendor == "amd":
            csrc, cdirs = _cuda.for_amd(src, include_dirs, keep_path=False)
        elif src.dialect == "cuda":
            defs[_cuda.NVIDIA_DEFINE] = 1
        target = arch
        extra = _names.marker_text(targets)

        def build() -> tuple[dict[str, Any], bytes]:
            refuse_irregular_headers(csrc, comp.include_path(csrc, cdirs), pre_includes=comp.pre_includes,
                                     options=options)
            t = time.perf_counter()
            binary, lowered = comp.compile_named(csrc, name, target, tuple(options), defs, tuple(cdirs),
                                                 [t.expr for t in targets if not t.simple], extra)
            return {"name": name, "arch": target, "compiler": comp.name, "lowered": lowered,
                    "compile_seconds": time.perf_counter() - t}, binary

        key = _cache_key(csrc, key_name, arch, comp, options, defs, cdirs)  # finds every header first
        if use_cache:
            meta, binary, hit = get_cache(cache_dir).get_or_compile(key, build)
        else:
            (meta, binary), hit = build(), False
        where = f"the {comp.name} code object of {src.path or src.display}"
        resolved = _names.resolve(binary, targets, dict(meta.get("lowered") or {}), True, where)
    except KernelCompileError as exc:
        exc = _names.explain(exc, targets)
        attribute(exc, src, name)
        raise exc from None
    instrument.note([r.lowered for r in resolved])
    return [Kernel(name=r.expr if len(names) > 1 else names[0], arch=arch, compiler=comp.name, binary=binary,
                   params=r.params, compile_seconds=float(meta.get("compile_seconds", 0.0)), cache_hit=hit,
                   source=src.path, device=device, sync=sync, lowered_name=r.lowered) for r in resolved]


def _cache_key(
    src: Source, name: str, arch: str, comp: Any, options: Sequence[str], defines: Mapping[str, Any],
    include_dirs: Sequence[str],
) -> str:
    """The cache key: every input of the compile, the compiler's identity, the source and every header
    the compiler can reach through the include path it is given (the source's folder, ``include_dirs``,
    its own, ``-I`` in options), quoted or angled."""
    parts = {
        "name": name,
        "arch": arch,
        "options": list(options),
        "defines": {str(k): str(v) for k, v in defines.items()},
        "include_dirs": [os.path.abspath(d) for d in include_dirs],
        "include_path_env": include_path_env(),
        "compiler": comp.identity(),
    }
    junk: list[str] = []  # a FIFO on the path would block the preprocessor: the scan alone keys it
    headers = find_headers(src, comp.include_path(src, include_dirs), pre_includes=comp.pre_includes, options=options,
                           irregular=junk)
    headers = merge(headers, [] if junk else device_headers(comp, src, arch, options, defines, include_dirs))
    return make_key(parts, src.data, headers)


def _current_arch(device: Optional[int]) -> str:
    """The arch of the GPU a launch would use, from the detector (no runtime started here)."""
    try:
        from pytest_gpuenv.detect import detect

        env = detect()
    except Exception as exc:  # detection is best effort here
        raise KernelCompileError(f"no arch given and the GPU could not be detected ({exc}); pass arch=") from None
    devs = [d for d in env.usable_devices if d.arch] if env.has_gpu else []
    if device is not None:
        devs = [d for d in devs if d.index == device]
    if not devs:
        raise KernelCompileError(
            f"no arch given and no usable GPU with a known arch ({env.describe()}); pass arch='gfx90a' or 'sm_90'"
        )
    return str(devs[0].arch).split(":")[0]
