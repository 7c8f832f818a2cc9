"""``CpuKernel``: a kernel compiled for the CPU executor, launched like the GPU ones.

``k(grid, block, *args, shared_mem=0)`` with CPU torch tensors or array-interface objects (numpy).
Arguments are checked against the declared parameters first (``TypeError`` naming the parameter);
each pointer argument's buffer is registered for the bounds checks (``const`` ones read-only).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import struct
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv.rtc import _args, _cpu
from pytest_gpuenv.rtc import names as _names
from pytest_gpuenv.rtc._gpu_kernel import Kernel
from pytest_gpuenv.rtc.cache import shared as get_cache
from pytest_gpuenv.rtc.source import Param, Source
from pytest_gpuenv.rtc.target import CpuTarget
from pytest_gpuenv.runtime.cpu import report as _cpu_report
from pytest_gpuenv.runtime.cpu import watchdog_seconds, worker_limit
from pytest_gpuenv.runtime.cpu.copies import mapped
from pytest_gpuenv.runtime.cpu.protocol import Mode
from pytest_gpuenv.runtime.cpu.request import (
    NO_STATE,
    Arguments,
    Buffer,
    Geometry,
    KernelLayout,
    LaunchRequest,
    ModuleState,
)

_CONST = re.compile(r"\bconst\b[^*]*\*")


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of ``shape``."""
    out, step = [], itemsize
    for n in reversed(list(shape)):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _not_contiguous(p: Param, how: str, fix: str) -> str:
    return (f"argument {p.name!r} ({p.decl}) is not contiguous ({how}): a kernel indexes a pointer's memory from its "
            f"first element on, past what the view holds; pass a contiguous copy ({fix})")


def _extent(shape: Sequence[int], itemsize: int) -> int:
    """Bytes of a contiguous array of ``shape`` (0 for an empty one)."""
    return math.prod(shape) * itemsize


def host_pointer(p: Param, value: Any) -> tuple[int, int, bool]:
    """(address, bytes, read-only) of a host buffer for pointer parameter ``p``; TypeError otherwise."""
    if value is None:
        return 0, 0, False
    if _args._is_tensor(value):
        if value.device.type != "cpu":
            raise TypeError(f"argument {p.name!r} ({p.decl}) is a tensor on {value.device}; the CPU executor "
                            "(arch='cpu') runs on host memory: pass CPU tensors")
        _args._check_dtype(p, str(value.dtype), None, _args._describe(value))
        if p.vector is not None:
            _args.check_count(p, value.numel(), _args._describe(value))
        if not value.is_contiguous():
            raise TypeError(_not_contiguous(p, f"strides {tuple(value.stride())}", "tensor.contiguous()"))
        return int(value.data_ptr()), value.numel() * value.element_size(), False
    if hasattr(value, "__cuda_array_interface__"):
        raise TypeError(f"argument {p.name!r} ({p.decl}) is GPU memory ({_args._describe(value)}); the CPU "
                        "executor (arch='cpu') needs host arrays")
    ai = getattr(value, "__array_interface__", None)
    if ai is not None:
        typestr = ai.get("typestr", "?")
        _args._check_dtype(p, "", typestr, f"an array of typestr {typestr!r}")
        addr, readonly = ai["data"]
        itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
        if p.vector is not None:
            _args.check_count(p, math.prod(ai["shape"]), f"an array of shape {tuple(ai['shape'])}")
        strides = ai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(ai["shape"], itemsize) and math.prod(ai["shape"]) > 1:
            raise TypeError(_not_contiguous(p, f"strides {tuple(strides)}", "numpy.ascontiguousarray(x)"))
        size = _extent(ai["shape"], itemsize)
        if size and not _real_memory(value) and not mapped(int(addr), size, not readonly):
            raise TypeError(f"argument {p.name!r} ({p.decl}): its __array_interface__ gives {size} bytes at "
                            f"{int(addr):#x}, which are not {'readable' if readonly else 'writable'} memory of this "
                            "process")
        return int(addr), size, bool(readonly)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value, 0, False  # a raw address: not a registered buffer
    raise TypeError(f"argument {p.name!r} ({p.decl}) expects a host buffer (a CPU tensor or an object with "
                    f"__array_interface__), got {_args._describe(value)}")


def _real_memory(value: Any) -> bool:
    """Whether an array's memory is known to be real: an ndarray whose chain of bases ends in one that owns its
    data, or in an object with the buffer protocol (bytes, bytearray, mmap, ctypes). One that ends in an object
    that only *claims* an address (its own ``__array_interface__``: ``np.asarray(forged)``) is not."""
    base = value
    while type(base).__name__ == "ndarray" and type(base).__module__ == "numpy":
        if base.flags.owndata:
            return True
        base = base.base
    if _args._is_tensor(base):  # (t.numpy(): torch's memory)
        return True
    if base is None or hasattr(base, "__array_interface__"):
        return False
    try:
        memoryview(base).release()
    except TypeError:
        return False
    return True


def pack_host_args(kernel: str, params: Sequence[Param], args: Sequence[Any]) -> Arguments:
    """The launch's arguments: their values in parameter order and the host buffers to register."""
    if len(args) != len(params):
        sig = ", ".join(p.decl for p in params)
        raise TypeError(f"kernel {kernel!r} takes {len(params)} arguments ({sig}), got {len(args)}")
    values: list[Any] = []
    buffers: list[Buffer] = []
    for i, (p, a) in enumerate(zip(params, args)):
        code = p.code
        if code == "P":
            addr, size, readonly = host_pointer(p, a)
            values.append(ctypes.c_void_p(addr))
            if addr:
                buffers.append(Buffer(addr, size, readonly or bool(_CONST.search(p.decl)), i))
        else:
            values.append(_args.by_value(p, code, a))
    return Arguments(values, buffers)


@dataclass(frozen=True)
class CpuLayout:
    """What the build of a CPU kernel library found (its meta, which the cache keeps as JSON), in the forms
    its launches and reports use: made once, when the library is loaded (``from_meta``)."""

    shared_vars: tuple[tuple[str, int, int], ...]  # (name, offset from the load address, bytes), by offset
    #: each static ``__shared__`` variable (by its number in ``shared_vars``) and red zone (-1), for the executor:
    #: (offset, bytes, number), by offset
    shared_checks: tuple[tuple[int, int, int], ...]
    device_globals: tuple[tuple[str, int, int], ...]  # (name, offset in the globals section, bytes), red-zoned
    dyn_names: tuple[str, ...]  # the ``extern __shared__`` arrays' names
    #: blocks may run on several worker threads, each on its own copy of the library: no ``__device__``
    #: variables that blocks could share, no symbol the copies would share
    parallel: bool
    #: bytes of static ``__shared__`` memory of each kernel, by unqualified name (``_cpu.check_shared_limit``)
    kernel_shared: tuple[tuple[str, int], ...] = ()

    @property
    def static_shared(self) -> int:
        """Bytes of static ``__shared__`` memory of the whole library."""
        return sum(size for _, _, size in self.shared_vars)

    def static_shared_of(self, name: str) -> int:
        """Bytes of static ``__shared__`` memory kernel ``name`` (a name expression) uses; the library's where the
        build did not count it."""
        base = name.split("<", 1)[0].rsplit("::", 1)[-1].strip()
        return dict(self.kernel_shared).get(base, self.static_shared)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> CpuLayout:
        shared = tuple((str(n), int(o), int(s)) for n, o, s in meta.get("shared_vars", ()))
        zones = [(int(o), int(s), -1) for o, s in meta.get("red_zones", ())]
        return cls(shared_vars=shared,
                   shared_checks=tuple(sorted([(o, s, i) for i, (_, o, s) in enumerate(shared)] + zones)),
                   device_globals=tuple((str(n), int(o), int(s)) for n, o, s in meta.get("globals", ())),
                   dyn_names=tuple(str(n) for n in meta.get("dyn_names", ())), parallel=bool(meta.get("parallel")),
                   kernel_shared=tuple((str(k), int(v)) for k, v in dict(meta.get("kernel_shared") or {}).items()))


#: the most blocks one launch may have: the executor counts them in a signed 64-bit integer
MAX_BLOCKS = 2**63 - 1


class CpuKernel(Kernel):
    """A kernel built for the CPU executor (``backend == arch == "cpu"``).

    ``warp_size`` (32 or 64) is ``warpSize`` in the kernel; ``check`` says whether loads and stores are
    checked (races, bounds, uninitialised shared memory); ``lockstep`` runs each wavefront's lanes in
    lockstep as AMD hardware does (each lane's k-th shared-memory access before any lane's (k+1)-th);
    ``watchdog`` is the seconds a launch may run.
    """

    __module__ = "pytest_gpuenv.rtc"

    def __init__(self, *, target: CpuTarget, check: bool, layout: CpuLayout, cache_dir: Optional[str],
                 index: Optional[int] = None, lockstep: bool = False, **kw: Any) -> None:
        super().__init__(arch="cpu", **kw)
        warp_size = target.warp_size
        #: the AMD target this run stands for (``"gfx90a"``) and the ROCm version (``"7.0.0"``): rtc.target
        self.target = target.arch
        self.rocm_version = target.rocm_version
        self.shared_limit = target.shared_limit
        #: this kernel's case in a module's dispatching entry point (None: the library's only kernel)
        self.index = index
        #: the Module this kernel came from: its globals are synced around each launch
        self.module: Optional[Any] = None
        self.backend = "cpu"
        self.warp_size = warp_size
        self.check = check
        self.lockstep = lockstep
        self.watchdog = watchdog_seconds()
        self._layout = layout
        self._request_layout = KernelLayout(warp_size, layout.shared_checks,
                                            tuple((o, s) for _, o, s in layout.device_globals),
                                            tuple(p.align for p in self.params))
        self._mode = (Mode.CHECK if check else Mode(0)) | (Mode.LOCKSTEP if lockstep else Mode(0))
        # the kernel index travels in each launch request (a module's dispatching entry point reads it)
        self._index_write = () if index is None else (("__gpuenv_kernel_index", struct.pack("<i", index)),)
        self._cache_dir = cache_dir
        self._module_name = re.sub(r"\W", "_", self.name)[:64]  # the executor's name for its library
        self._loaded: Optional[tuple[Any, Any]] = None  # (runtime, module), at the first launch

    def __repr__(self) -> str:
        mode = ("checked" if self.check else "unchecked") + (", lockstep" if self.lockstep else "")
        sig = ", ".join(p.decl for p in self.params)
        return (f"<Kernel {self.name}({sig}) for cpu ({self.target}, wave{self.warp_size}, ROCm {self.rocm_version}, "
                f"{mode}) via {self.compiler}>")

    def load(self, device: Optional[int] = None) -> Any:
        return self._runtime_and_module()[1]

    def _runtime_and_module(self) -> tuple[Any, Any]:
        if self._loaded is None:
            rt = _cpu.runtime(get_cache(self._cache_dir))
            self._loaded = rt, rt.load(self.binary, self._module_name)
        return self._loaded

    def _launch_mode(self, cooperative: bool) -> tuple[Mode, int]:
        """The launch's mode and its worker cap."""
        workers = worker_limit()  # (a bad GPUENV_CPU_WORKERS is reported at every launch)
        if cooperative:  # each block on a worker thread of its own, on one copy of the library (src/coop.cpp)
            return self._mode | Mode.COOPERATIVE, 0
        # several worker threads, each on its own copy of the library: never for a module's kernels (their
        # globals and kernel index are written to the first copy before a launch)
        if not self._mode and self._layout.parallel and self.module is None and self.index is None and workers != 1:
            return Mode.PARALLEL, workers  # 0: one per core
        return self._mode, 0

    def __call__(self, grid: Any, block: Any, *args: Any, shared_mem: int = 0, stream: Any = None,
                 cooperative: bool = False) -> None:
        __tracebackhide__ = True  # pytest shows the test's line and the error, not this frame
        cooperative = _args.launch_flag(cooperative, "cooperative")
        g = _args.launch_dims(grid, "grid")
        b = _args.launch_dims(block, "block")
        if b[0] * b[1] * b[2] > 1024:
            raise TypeError(f"block {block!r} has {b[0] * b[1] * b[2]} threads; the limit is 1024")
        if g[0] * g[1] * g[2] > MAX_BLOCKS:
            raise ValueError(f"grid {grid!r} has {g[0] * g[1] * g[2]} blocks; a launch counts at most {MAX_BLOCKS} "
                             "(2**63 - 1)")
        limit = self.shared_limit
        if not isinstance(shared_mem, int) or isinstance(shared_mem, bool) or not 0 <= shared_mem <= limit:
            raise TypeError(f"shared_mem must be an int of bytes in 0..{limit} (the shared memory of a block on "
                            f"{self.target}), got {shared_mem!r}")
        arguments = pack_host_args(self.name, self.params, args)
        rt, mod = self._runtime_and_module()
        layout = self._layout
        static = layout.static_shared_of(self.name)
        if shared_mem and static + shared_mem > limit:  # (static alone: checked at the build)
            names = ", ".join(f"{n!r} ({s} bytes)" for n, _, s in layout.shared_vars)
            raise TypeError(f"kernel {self.name!r}: {static} bytes of static __shared__ memory ({names}) "
                            f"and shared_mem={shared_mem} exceed the {limit}-byte limit of a block on {self.target}")
        mode, workers = self._launch_mode(cooperative)
        # the module's globals travel in the launch request, and come back in its reply
        mirrors = () if self.module is None else self.module._mirror_list()
        state = NO_STATE if not self._index_write and not mirrors else ModuleState(
            self._index_write + tuple((sym, arr.tobytes()) for sym, arr in mirrors), [sym for sym, _ in mirrors])
        res = rt.launch(mod, LaunchRequest(self._request_layout, Geometry(g, b, shared_mem), arguments, self.watchdog,
                                           mode, workers, state))
        for (_, arr), data in zip(mirrors, res.symbols):  # none when the executor process did not survive
            memoryview(arr.view("u1"))[:] = data
        if not res.report.kind and not res.report.warnings:  # the common case: no report to symbolize
            if res.output:
                _cpu.emit_output(res.output, ())
            return
        ctx = _cpu_report.Context(warp_size=self.warp_size, block_dims=b,
            kernel=self.name, binary=self.binary, params=self.params, shared_vars=layout.shared_vars,
            dyn_names=layout.dyn_names, shared_mem=shared_mem,
            regions={buf.param: buf.size for buf in arguments.buffers}, device_globals=layout.device_globals,
            addr2line=_cpu.binutil(_cpu.find_cxx() or "", "addr2line"), source=self.source)
        _cpu.emit_output(res.output, _cpu_report.warnings_of(ctx, res.report))
        if res.report.kind:
            raise _cpu_report.to_error(ctx, res.report)


def compile_cpu(src: Source, targets: Sequence[_names.Target], name: str, *, target: CpuTarget, check: bool,
                options: Sequence[str], defines: Mapping[str, Any], include_dirs: Sequence[str],
                cache_dir: Optional[str], use_cache: bool, key_name: Optional[str] = None,
                lockstep: bool = False) -> list[CpuKernel]:
    """Build (or take from the cache) the kernels ``targets`` of ``src`` in one library for the CPU executor
    (``name``: the one kernel's name as given, or the module's names; ``key_name``: its cache key's)."""
    cxx = _cpu.require_cxx()
    entry = _names.cpu_entry(targets)

    def build() -> tuple[dict[str, Any], bytes]:
        return _cpu.build_kernel(cxx, src, name, target, check, options, defines, include_dirs, entry, lockstep)

    if use_cache:
        key = _cpu.kernel_key(cxx, src, key_name or name, target, check, options, defines, include_dirs,
                              lockstep)
        meta, binary, hit = get_cache(cache_dir).get_or_compile(key, build)
    else:
        (meta, binary), hit = build(), False
    resolved = _names.resolve(binary, targets, {}, False, "the CPU executor's kernel library")
    layout = CpuLayout.from_meta(meta)
    return [CpuKernel(target=target, check=check, lockstep=lockstep, layout=layout, cache_dir=cache_dir,
                      index=i if len(targets) > 1 else None, name=r.expr if len(targets) > 1 else name,
                      compiler=str(meta.get("compiler", os.path.basename(cxx))), binary=binary, params=r.params,
                      compile_seconds=float(meta.get("compile_seconds", 0.0)), cache_hit=hit, source=src.path,
                      lowered_name=r.lowered)
            for i, r in enumerate(resolved)]
