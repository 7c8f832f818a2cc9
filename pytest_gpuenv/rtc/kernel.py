"""``compile_kernel`` and ``Kernel``: compile a HIP source once (cached), launch it many times."""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv.rtc import _args, _compilers, _launch
from pytest_gpuenv.rtc._cache import Cache
from pytest_gpuenv.rtc._errors import KernelLaunchError
from pytest_gpuenv.rtc._source import SHIPPED_INCLUDE, Param, find_headers, kernel_decl, load_source

__all__ = ["Kernel", "compile_kernel"]

_CACHES: dict[Optional[str], Cache] = {}


def get_cache(cache_dir: Optional[str]) -> Cache:
    c = _CACHES.get(cache_dir)
    if c is None:
        c = _CACHES[cache_dir] = Cache(cache_dir)
    return c


class Kernel:
    """A compiled kernel. Call it as ``k(grid, block, *args, shared_mem=0, stream=None)``.

    Attributes
    ----------
    name, arch : str
        The kernel and the target it was built for (``gfx90a``, ``sm_90``).
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
        The declared parameters, which arguments are checked against.
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
    ) -> None:
        self.name = name
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
        self._modules: dict[int, Any] = {}

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
        dev = self._device() if device is None else device
        mod = self._modules.get(dev)
        if mod is None:
            if _launch.POISON.by is not None and _launch.POISON.backend == self.backend:
                raise KernelLaunchError(_launch.POISON.reason(), code=_launch.POISON.code, sticky=True)
            mod = self._modules[dev] = _launch.load(self.backend, self.binary, self.name, dev)
        return mod

    def __call__(self, grid: Any, block: Any, *args: Any, shared_mem: int = 0, stream: Any = None) -> None:
        g = _args.launch_dims(grid, "grid")
        b = _args.launch_dims(block, "block")
        if b[0] * b[1] * b[2] > 1024:
            raise TypeError(f"block {block!r} has {b[0] * b[1] * b[2]} threads; the limit is 1024")
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise TypeError(f"shared_mem must be a non-negative int of bytes, got {shared_mem!r}")
        dev = self._device()
        packed = self.pack(*args, device=dev)
        mod = self.load(dev)
        handle = mod.launch(g, b, packed, shared_mem, stream)
        if self.sync:
            mod.synchronize(handle)


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
) -> Kernel:
    """Compile kernel ``name`` from a HIP source (text, or a path looked up in ``kernel_dirs``).

    ``arch`` defaults to the arch of the current GPU (device ``device``, else torch's current, else
    0). gfx targets build with hiprtc (hipcc where hiprtc is missing), sm targets with NVRTC and the
    shipped HIP-on-CUDA header (nvcc where NVRTC is missing). The code object is cached (see
    ``_cache``). Raises KernelCompileError with the compiler's log, file and line.
    """
    src = load_source(source_or_path, list(kernel_dirs or ()))
    decl = kernel_decl(src, name)
    if arch is None:
        arch = _current_arch(device)
    arch = _compilers.check_arch(arch)
    comp = _compilers.for_arch(arch, compiler)
    defines = dict(defines or {})
    vendor = _compilers.vendor_of(arch)
    dirs = list(include_dirs) + ([SHIPPED_INCLUDE] if vendor == "nvidia" else [])
    headers = find_headers(src, dirs)
    parts = {
        "name": name,
        "arch": arch,
        "options": list(options),
        "defines": {str(k): str(v) for k, v in defines.items()},
        "include_dirs": [os.path.abspath(d) for d in include_dirs],
        "compiler": comp.identity(),
    }

    def build() -> tuple[dict, bytes]:
        t = time.perf_counter()
        binary = comp.compile(src, name, arch, tuple(options), defines, tuple(include_dirs))
        return {"name": name, "arch": arch, "compiler": comp.name,
                "compile_seconds": time.perf_counter() - t}, binary

    if use_cache:
        cache = get_cache(cache_dir)
        from pytest_gpuenv.rtc._cache import make_key

        meta, binary, hit = cache.get_or_compile(make_key(parts, src.data, headers), build)
    else:
        (meta, binary), hit = build(), False
    return Kernel(
        name=name,
        arch=arch,
        compiler=comp.name,
        binary=binary,
        params=decl.params,
        compile_seconds=float(meta.get("compile_seconds", 0.0)),
        cache_hit=hit,
        source=src.path,
        device=device,
        sync=sync,
    )


def _current_arch(device: Optional[int]) -> str:
    """The arch of the GPU a launch would use, from the detector (no runtime started here)."""
    from pytest_gpuenv.rtc._errors import KernelCompileError

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
    return devs[0].arch.split(":")[0]
