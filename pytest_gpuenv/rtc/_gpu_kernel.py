"""``Kernel``: a kernel compiled for a GPU (by ``kernel.compile_kernel``), launched many times.

A Kernel loads its code object once per device and launches through the runtime layer
(``pytest_gpuenv.runtime.get(backend, device)``); a backend already poisoned by a sticky error in
this process refuses the load with the poisoner's reason. The CPU executor's ``CpuKernel``
(``_cpu_kernel``) extends it.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv import runtime
from pytest_gpuenv.rtc import _args
from pytest_gpuenv.rtc.errors import KernelLaunchError
from pytest_gpuenv.rtc.source import Param

__all__ = ["Kernel"]


class Kernel:
    """A compiled kernel. Call it as ``k(grid, block, *args, shared_mem=0, stream=None, cooperative=False)``.

    ``cooperative=True`` makes the launch a cooperative one (``cuLaunchCooperativeKernel``,
    ``hipModuleLaunchCooperativeKernel``), under which ``cooperative_groups::this_grid().sync()`` works:
    every block of the grid must then fit on the device at once, else the launch raises
    ``KernelLaunchError`` (nothing ran, the context stays usable) naming the grid's blocks and the limit.

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

    def __call__(
        self, grid: Any, block: Any, *args: Any, shared_mem: int = 0, stream: Any = None, cooperative: bool = False,
    ) -> None:
        cooperative = _args.launch_flag(cooperative, "cooperative")
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
        handle = rt.launch(fn, g, b, packed.address, shared_mem, stream, cooperative=cooperative)
        if self.sync:
            rt.synchronize(handle)
