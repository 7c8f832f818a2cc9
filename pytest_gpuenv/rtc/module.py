"""``compile_module`` and ``Module``: several kernels of one source in one code object, and its globals.

On a GPU the code object is loaded once per device and every kernel of the module is looked up in
that one load, so a ``__device__`` variable one kernel writes is what the next one reads, and
``get_global`` is a torch tensor over the variable itself (``hipModuleGetGlobal``/``cuModuleGetGlobal``).
On the CPU executor ``get_global`` is a numpy array mirroring the variable: the module writes each
mirror to the kernel library before every launch of one of its kernels and reads it back after
(``CpuRuntime.read_symbol``/``write_symbol``), so the array is what the kernels see and did.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv import runtime
from pytest_gpuenv.rtc import _symbols
from pytest_gpuenv.rtc.errors import KernelLaunchError
from pytest_gpuenv.rtc.kernel import Kernel, build_kernels, given_source
from pytest_gpuenv.rtc.source import SCALAR_TYPES, Source, split_params, vector_type

__all__ = ["Module", "compile_module"]

_VAR = r"(?:__constant__|__device__)\s+(?:(?:const|static|volatile)\s+)*(?P<type>[A-Za-z_][\w:]*(?:\s+(?:int|long|short|char))*)\s+{}\s*(?P<dims>(?:\[[^\]]*\]\s*)*)[=;{{]"


class Module:
    """Kernels compiled together from one source: ``kernel(name)`` and ``get_global(name)``.

    Attributes: ``names`` (the name expressions, in order), ``arch``, ``backend``, ``compiler``,
    ``binary`` (the one code object or kernel library), ``cache_hit``.
    """

    __module__ = "pytest_gpuenv.rtc"

    def __init__(self, kernels: Sequence[Kernel], text: str) -> None:
        self._kernels = {k.name: k for k in kernels}
        self.names = [k.name for k in kernels]
        first = kernels[0]
        self.arch, self.backend, self.compiler, self.binary = first.arch, first.backend, first.compiler, first.binary
        self.cache_hit = first.cache_hit
        self._text = text
        self._loaded: dict[int, Any] = {}  # device -> the loaded GPU module
        self._views: dict[str, Any] = {}  # variable -> the tensor / array handed out
        self._mirrors: dict[str, tuple[str, Any]] = {}  # CPU: symbol -> (symbol, numpy array)
        for k in kernels:
            if self.backend == "cpu":
                k.module = self  # type: ignore[attr-defined]
            else:
                k._loader = functools.partial(self._function, k.lowered_name)

    def __repr__(self) -> str:
        return f"<Module {', '.join(self.names)} for {self.arch} via {self.compiler}>"

    def kernel(self, name: str) -> Kernel:
        """The kernel compiled for name expression ``name`` (as given to ``compile_module``)."""
        k = self._kernels.get(name) or self._kernels.get(" ".join(str(name).split()))
        if k is None:
            raise KeyError(f"kernel {name!r} is not in this module (compiled: {', '.join(self.names)}); "
                           "add it to names=[...]")
        return k

    # ------------------------------------------------------------------------------ GPU loading
    def _module(self, dev: int) -> Any:
        mod = self._loaded.get(dev)
        if mod is None:
            poison = runtime.poisoned(self.backend)
            if poison is not None:
                raise KernelLaunchError(poison.reason(), code=poison.code, sticky=True)
            mod = self._loaded[dev] = runtime.get(self.backend, dev).load_module(self.binary)
        return mod

    def _function(self, lowered: str, dev: int) -> Any:
        return runtime.get(self.backend, dev).get_function(self._module(dev), lowered)

    # ------------------------------------------------------------------------------ globals
    def _symbol(self, name: str) -> tuple[str, int]:
        """(symbol, bytes) of global variable ``name`` (``coeffs``, ``ns::table``) from the symbol table."""
        objs = [s for s in _symbols.symbols(self.binary) if s.kind == _symbols.STT_OBJECT and not s.name.endswith(".kd")]
        names = _symbols.demangle([s.name for s in objs])
        wanted = canonical_name(name)
        for s, d in zip(objs, names):
            if (name == s.name or wanted == canonical_name(d)) and _user_variable(s.name, d):
                return s.name, s.size
        have = sorted(d for s, d in zip(objs, names) if _user_variable(s.name, d) and not d.startswith("_"))
        raise KeyError(f"no __constant__ or __device__ variable {name!r} in this module (variables there: "
                       f"{', '.join(have) or 'none'})")

    def _dtype(self, name: str, dtype: Any, size: int) -> Any:
        import numpy as np

        if dtype is not None:
            try:  # numpy's types and dtypes, their names, and torch's dtypes (torch.float32 -> float32)
                dt = np.dtype(str(dtype).replace("torch.", "") if type(dtype).__module__ == "torch" else dtype)
            except TypeError:
                raise TypeError(f"get_global({name!r}): dtype {dtype!r} is no numpy or torch dtype") from None
            if size % dt.itemsize:
                raise ValueError(f"get_global({name!r}): the variable has {size} bytes, not a whole number of {dt} "
                                 f"({dt.itemsize} bytes each)")
            return dt
        t = _declared_type(self._text, name.rsplit("::", 1)[-1])
        code = SCALAR_TYPES.get(t) or (vector_type(t) or (None, 0))[0]  # float4: its floats
        dt = np.dtype(code or "u1")  # the struct codes of SCALAR_TYPES are numpy's too
        return dt if size % dt.itemsize == 0 else np.dtype(np.uint8)

    def get_global(self, name: str, dtype: Any = None) -> Any:
        """A writable 1-D view of ``__constant__``/``__device__`` variable ``name`` that the next launch sees.

        On a GPU a torch tensor over the variable on the kernel's device, on the CPU executor a numpy
        array. ``dtype`` (numpy or torch, or their names) defaults to the declared scalar type where the
        declaration names one (``__constant__ float c[16]`` -> float32; ``float4`` -> its floats), else
        bytes (uint8).
        """
        key = canonical_name(name)  # ``mask<int16_t>`` and ``mask<short>``: one variable, one view
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self._declared_view(name)
        return view if dtype is None else self._as(name, view, dtype)

    def _declared_view(self, name: str) -> Any:
        """The variable's view in its declared type (kept: the next launch reads what it holds)."""
        sym, size = self._symbol(name)
        dt = self._dtype(name, None, size)
        if self.backend == "cpu":
            import numpy as np

            k = next(iter(self._kernels.values()))
            rt, mod = k._runtime_and_module()  # type: ignore[attr-defined]
            arr = np.frombuffer(bytearray(rt.read_symbol(mod, sym)), dtype=dt)
            self._mirrors[sym] = (sym, arr)
            return arr
        import torch

        dev = next(iter(self._kernels.values()))._device()
        dptr, nbytes = runtime.get(self.backend, dev).get_global(self._module(dev), sym)
        holder = _DeviceArray(dptr, nbytes // dt.itemsize, dt.str)
        return torch.as_tensor(holder, device=f"cuda:{dev}")

    def _as(self, name: str, view: Any, dtype: Any) -> Any:
        """The variable's view read as ``dtype``: the same memory, so each view sees the other's writes."""
        nbytes = view.nbytes if hasattr(view, "nbytes") else view.numel() * view.element_size()
        dt = self._dtype(name, dtype, nbytes)
        if self.backend == "cpu":
            return view if view.dtype == dt else view.view(dt)
        import torch

        return view.view(getattr(torch, dt.name))

    def _mirror_list(self) -> list[tuple[str, Any]]:
        """(symbol, numpy array) of each global a CPU launch writes before it runs and reads back after."""
        return list(self._mirrors.values())


def _declared_type(text: str, name: str) -> str:
    """The type a declaration in ``text`` gives variable ``name`` ('' where none is found); for an instance of a
    variable template (``mask<float>`` of ``template <typename T> __constant__ T mask[10];``) the template
    argument that its type parameter stands for (HeCBench convolution1D)."""
    base, _, rest = name.partition("<")
    m = re.search(_VAR.format(re.escape(base.strip())), text)
    if m is None:
        return ""
    t = " ".join(m.group("type").replace("std::", "").split())
    head = re.search(r"template\s*<(?P<params>[^<>]*)>\s*$", text[:m.start()])
    if rest and head:
        params = [p.split("=")[0].split()[-1] if p.split() else "" for p in split_params(head.group("params"))]
        args = split_params(rest.rstrip().removesuffix(">"))
        if t in params and params.index(t) < len(args):
            t = " ".join(args[params.index(t)].replace("std::", "").split())
    return t


def _user_variable(symbol: str, demangled: str) -> bool:
    """Whether a symbol may be a variable of the kernel's source: not the executor's own (``__gpuenv_*``:
    writing its kernel index made a launch run nothing) nor a compiler's local one (``completed.0``). A
    source's own ``gpuenv_hits`` is the source's."""
    last = demangled.rsplit("::", 1)[-1]  # (its red zones sit in the variables' namespaces)
    return not (last.startswith("__gpuenv") or "." in symbol)


#: the fixed-width and size typedefs a name may spell a template argument with, as the demangler spells the
#: type on LP64 Linux (``<stdint.h>``, ``<stddef.h>``): ``mask<int16_t>`` is ``mask<short>``
_TYPEDEFS = {
    "int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long", "uint64_t": "unsigned long",
    "size_t": "unsigned long", "ssize_t": "long", "ptrdiff_t": "long", "intptr_t": "long",
    "uintptr_t": "unsigned long",
}
#: C++'s other spellings of a builtin type -> the demangler's
_BUILTIN_SPELLINGS = (
    (re.compile(r"\b(short|long(?: long)?) int\b"), r"\1"),
    (re.compile(r"\bsigned (short|long|int)\b"), r"\1"),
    (re.compile(r"\bsigned(?! char)\b"), "int"),
    (re.compile(r"\bunsigned(?! (?:char|short|int|long))\b"), "unsigned int"),
)
_STD_TYPEDEF = re.compile(r"\bstd\s*::\s*(?=(?:{})\b)".format("|".join(_TYPEDEFS)))
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+[uUlL]*|::|\S")


def canonical_name(name: str) -> str:
    """A variable's name as the demangler spells it: one space between words alone, the typedefs of
    ``_TYPEDEFS`` (``std::`` or not) as their types, ``short int`` as ``short``, no suffix on a number
    (``tile<16u>``): ``mask< std::int16_t >`` and ``mask<short>`` are one name."""
    out: list[str] = []
    for tok in _TOKEN.findall(_STD_TYPEDEF.sub("", name)):
        t = _TYPEDEFS.get(tok, tok.rstrip("uUlL") if tok[0].isdigit() else tok)
        word = t[0].isalnum() or t[0] == "_"
        if word and out and (out[-1][-1].isalnum() or out[-1][-1] == "_"):
            out.append(" ")
        out.append(t)
    text = "".join(out)
    for rx, repl in _BUILTIN_SPELLINGS:
        text = rx.sub(repl, text)
    return text


class _DeviceArray:
    """``__cuda_array_interface__`` over a module global, for ``torch.as_tensor`` (no copy)."""

    def __init__(self, ptr: int, n: int, typestr: str) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None}


def compile_module(
    source_or_path: str | os.PathLike[str] | Source,
    names: Sequence[str],
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
) -> Module:
    """Compile the kernels ``names`` (name expressions: ``"vector_add"``, ``"transpose<16>"``,
    ``"ns::scale"``) of one HIP source once, into one code object; options as ``compile_kernel``."""
    if isinstance(names, str) or not names:
        raise TypeError(f"names must be a non-empty list of kernel names, got {names!r}")
    src = given_source(source_or_path, kernel_dirs, dialect)
    ks = build_kernels(src, list(names), arch=arch, options=options, defines=defines, include_dirs=include_dirs,
                       cache_dir=cache_dir, compiler=compiler, device=device, sync=sync, use_cache=use_cache,
                       warp_size=warp_size, check=check, lockstep=lockstep, target=target,
                       rocm_version=rocm_version)
    return Module(ks, src.text)

