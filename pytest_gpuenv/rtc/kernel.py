"""``compile_kernel`` and ``Kernel``: compile a HIP source once (cached), launch it many times.

A Kernel loads its code object once per device and launches through the runtime layer
(``pytest_gpuenv.runtime.get(backend, device)``); a backend already poisoned by a sticky error in
this process refuses the load with the poisoner's reason.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from pytest_gpuenv import runtime
from pytest_gpuenv.rtc import _args, _compilers, _cuda, _names
from pytest_gpuenv.rtc._attribute import attribute
from pytest_gpuenv.rtc._cache import Cache, make_key, shared
from pytest_gpuenv.rtc._deps import device_headers, merge
from pytest_gpuenv.rtc._errors import KernelCompileError, KernelLaunchError
from pytest_gpuenv.rtc._source import Param, Source, find_headers, load_source

__all__ = ["Kernel", "compile_kernel"]


def get_cache(cache_dir: Optional[str]) -> Cache:
    """This process's compile cache for ``cache_dir`` (``_cache.shared``)."""
    return shared(cache_dir)


class Kernel:
    """A compiled kernel. Call it as ``k(grid, block, *args, shared_mem=0, stream=None)``.

    Attributes
    ----------
    name, arch : str
        The kernel as it was named (``vector_add``, ``transpose<16>``, ``ns::scale``) and the target it
        was built for (``gfx90a``, ``sm_90``).
    lowered_name : str
        The symbol the code object has for it (the mangled name of a C++ kernel; ``name`` for extern "C").
    backend : str
        ``"rocm"`` (AMD code object) or ``"cuda"`` (cubin).
    compiler : str
        ``hiprtc``, ``hipcc``, ``nvrtc`` or ``nvcc``.
    binary : bytes
        The code object; ``size`` is its length in bytes.
    compile_seconds : float
        Time the compiler took when the entry was built (0.0 if this process never compiled it).
    cache_hit : bool
        True when the code object came from the cache.
    params : list of Param
        The parameters, which arguments are checked against: as declared, or for a C++ kernel as
        instantiated (template parameters substituted, typedefs resolved, sizes from the compiler).
    """

    __module__ = "pytest_gpuenv.rtc"

    def __init__(
        self,
        *,
        name: str,
        arch: str,
        compiler: str,
        binary: bytes,
        params: Sequence[Param],
        compile_seconds: float,
        cache_hit: bool,
        source: Optional[str] = None,
        device: Optional[int] = None,
        sync: bool = False,
        lowered_name: Optional[str] = None,
    ) -> None:
        self.name = name
        self.lowered_name = lowered_name or name
        self.arch = arch
        self.backend = "rocm" if arch.startswith("gfx") else "cuda"
        self.compiler = compiler
        self.binary = binary
        self.params = list(params)
        self.compile_seconds = compile_seconds
        self.cache_hit = cache_hit
        self.source = source
        #: device index the kernel launches on (None: torch's current device, else 0)
        self.device = device
        #: wait for the kernel after each launch, so a fault fails the call that caused it
        self.sync = sync
        self._functions: dict[int, Any] = {}
        #: set by a Module: (device) -> the function in the module's one loaded code object
        self._loader: Optional[Callable[[int], Any]] = None

    @property
    def size(self) -> int:
        return len(self.binary)

    def __repr__(self) -> str:
        sig = ", ".join(p.decl for p in self.params)
        return f"<Kernel {self.name}({sig}) for {self.arch} via {self.compiler}, {self.size} bytes>"

    def _device(self) -> int:
        if self.device is not None:
            return self.device
        import sys

        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                if torch.cuda.is_initialized():
                    return int(torch.cuda.current_device())
            except Exception:
                pass
        return 0

    def pack(self, *args: Any, device: Optional[int] = None) -> _args.PackedArgs:
        """Check and pack arguments for a launch (TypeError naming the parameter on a mismatch)."""
        return _args.pack_args(self.name, self.params, args, device, "amd" if self.backend == "rocm" else "nvidia")

    def load(self, device: Optional[int] = None) -> Any:
        """The kernel loaded on ``device`` (default: the launch device): a ``runtime`` function handle."""
        dev = self._device() if device is None else device
        fn = self._functions.get(dev)
        if fn is None:
            poison = runtime.poisoned(self.backend)
            if poison is not None:
                raise KernelLaunchError(poison.reason(), code=poison.code, sticky=True)
            if self._loader is not None:
                fn = self._functions[dev] = self._loader(dev)
            else:
                fn = self._functions[dev] = runtime.get(self.backend, dev).load(self.binary, self.lowered_name)
        return fn

    def __call__(self, grid: Any, block: Any, *args: Any, shared_mem: int = 0, stream: Any = None) -> None:
        g = _args.launch_dims(grid, "grid")
        b = _args.launch_dims(block, "block")
        if b[0] * b[1] * b[2] > 1024:
            raise TypeError(f"block {block!r} has {b[0] * b[1] * b[2]} threads; the limit is 1024")
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise TypeError(f"shared_mem must be a non-negative int of bytes, got {shared_mem!r}")
        dev = self._device()
        packed = self.pack(*args, device=dev)
        fn = self.load(dev)
        rt = runtime.get(self.backend, dev)
        handle = rt.launch(fn, g, b, packed.address, shared_mem, stream)
        if self.sync:
            rt.synchronize(handle)


def compile_kernel(
    source_or_path: str | os.PathLike[str],
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
    warp_size: int = 64,
    check: bool = True,
    lockstep: bool = False,
    dialect: Optional[str] = None,
) -> Kernel:
    """Compile kernel ``name`` from a HIP source (text, or a path looked up in ``kernel_dirs``).

    ``arch`` defaults to the arch of the current GPU (device ``device``, else torch's current, else
    0). gfx targets build with hiprtc (hipcc where hiprtc is missing), sm targets with NVRTC and the
    shipped HIP-on-CUDA header (nvcc where NVRTC is missing). The code object is cached (see
    ``_cache``). Raises KernelCompileError with the compiler's log, file and line.

    ``arch="cpu"`` builds for the CPU executor with the host C++ compiler (``rtc._cpu_kernel``):
    ``warp_size`` (32 or 64) is ``warpSize``, ``check`` turns on the race/bounds/uninitialised checks,
    ``lockstep`` runs each wavefront in lockstep as AMD hardware does (GPU builds ignore it).
    A compile log's error lines name the kernel whose source they are in (``rtc._attribute``).

    ``dialect``: ``"cuda"`` for a CUDA source (the default for a ``.cu``/``.cuh`` file; ``"hip"`` for
    anything else): CUDA as written on NVIDIA (nvcc where installed, else NVRTC), through the shipped
    CUDA-to-HIP headers on AMD and the CPU executor (``rtc._cuda``).
    """
    src = load_source(source_or_path, list(kernel_dirs or ()))
    return build_kernels(src, [name], arch=arch, options=options, defines=defines, include_dirs=include_dirs,
                         cache_dir=cache_dir, compiler=compiler, device=device, sync=sync, use_cache=use_cache,
                         warp_size=warp_size, check=check, lockstep=lockstep, dialect=dialect)[0]


def build_kernels(src: Source, names: Sequence[str], *, arch: Optional[str], options: Sequence[str] = (),
                  defines: Optional[Mapping[str, Any]] = None, include_dirs: Sequence[str] = (),
                  cache_dir: Optional[str] = None, compiler: Optional[str] = None, device: Optional[int] = None,
                  sync: bool = False, use_cache: bool = True, warp_size: int = 64, check: bool = True,
                  lockstep: bool = False, dialect: Optional[str] = None) -> list[Kernel]:
    """Compile the name expressions ``names`` of ``src`` in one code object: one Kernel each, in order."""
    src = _cuda.with_dialect(src, dialect)
    targets = _names.targets(src, names)
    key_name = "\n".join(t.expr for t in targets) if len(targets) > 1 else names[0]  # the cache key's name
    if len(targets) > 1 or not targets[0].simple:
        key_name += f"\n{_names.MARKER_VERSION}"  # the markers (and the CPU dispatch) are part of what is compiled
    name = ", ".join(t.expr for t in targets) if len(targets) > 1 else names[0]  # in messages
    try:
        if arch == "cpu":
            from pytest_gpuenv.rtc._cpu_kernel import compile_cpu

            if src.dialect == "cuda":
                _cuda.check_mappable(src, "cpu")
            csrc, cdirs = _cuda.for_amd(src, include_dirs, keep_path=True)
            return list(compile_cpu(csrc, targets, name, warp_size=warp_size, check=check, options=options,
                                    defines=dict(defines or {}), include_dirs=cdirs, cache_dir=cache_dir,
                                    use_cache=use_cache, key_name=key_name, lockstep=lockstep))
        arch = _compilers.check_arch(_current_arch(device) if arch is None else arch)
        comp = _compilers.for_arch(arch, _cuda.compiler_for(src, arch, compiler))
        defs = dict(defines or {})
        csrc, cdirs = src, list(include_dirs)
        if src.dialect == "cuda" and comp.vendor == "amd":
            _cuda.check_mappable(src, arch)
            csrc, cdirs = _cuda.for_amd(src, include_dirs, keep_path=False)
        elif src.dialect == "cuda":
            defs[_cuda.NVIDIA_DEFINE] = 1
        target = arch
        extra = _names.marker_text(targets)

        def build() -> tuple[dict, bytes]:
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
