"""Name expressions: kernels named as C++ names them (``transpose<16>``, ``reduce<float, 256>``, ``ns::scale``).

A name that is a plain identifier of an ``extern "C"`` kernel whose parameters are all scalars and
pointers compiles exactly as before: its symbol is its name, its parameters are the parsed ones
(``Source.targets`` says which declaration each name names, and whether it is such a name).
Anything else gets a *marker* appended to the source, one explicit instantiation per name::

    template __global__ void __gpuenv_lower<0, &(reduce<float, 256>)>();

``__gpuenv_lower``'s third (defaulted) template argument is ``__gpuenv_sig<void(A...), sizeof(A)...,
alignof(A)..., __is_enum(A)...>`` of the kernel's instantiated parameter types, so the marker's symbol,
demangled, says the kernel's signature with template parameters substituted and typedefs resolved
(``void reduce<float, 256u>(float*, float const*, unsigned long, HIP_vector_type<float, 4u>, Params)``),
and the size and alignment the compiler gave each parameter (an enum by value is an integer of its
size). Taking the kernel's address instantiates
it, so every compiler emits it; the marker is an empty kernel of its own.

The lowered (mangled) name: hiprtc and NVRTC are asked (``AddNameExpression``/``GetLoweredName``);
hipcc and nvcc have no such API, so it is the symbol of the code object whose demangled name is the
marker's kernel. ROCm 5.2's hiprtc answers HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID for
``reduce<float, 256>`` (it compares the expression with the demangled ``reduce<float, 256u>``; seen
on Debian's ROCm 5.2.3): there the symbol table answers too. The CPU executor launches through
``GPUENV_ENTRY((expr))`` and needs only the signature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from pytest_gpuenv.rtc import _symbols
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.source import Param, Source, Target, split_params, vector_name

MARKER = "__gpuenv_lower"
#: in the cache key of every compile with markers or several kernels: change it when the appended code changes
MARKER_VERSION = "gpuenv-name-markers-3"
_MARKER_HEAD = (  # every name reserved (__gpuenv_..., _Gpuenv_...): a user's #define A 0 comes before this code
    "template <class _Gpuenv_F, unsigned long long... _Gpuenv_S> struct __gpuenv_sig {};\n"
    "template <class _Gpuenv_F> struct __gpuenv_sig_of;\n"
    "template <class... _Gpuenv_A> struct __gpuenv_sig_of<void (*)(_Gpuenv_A...)> "
    "{ using _Gpuenv_type = __gpuenv_sig<void(_Gpuenv_A...), sizeof(_Gpuenv_A)..., alignof(_Gpuenv_A)..., "
    "__is_enum(_Gpuenv_A)...>; };\n"
    f"template <int _Gpuenv_I, auto _Gpuenv_F, class _Gpuenv_L = typename __gpuenv_sig_of<decltype(_Gpuenv_F)>::_Gpuenv_type> "
    f"__global__ void {MARKER}() {{}}\n"
)
#: the line (under ``#line 1 "<gpuenv>"``) of the first instantiation
FIRST_LINE = _MARKER_HEAD.count("\n") + 1
GENERATED = "<gpuenv>"


@dataclass
class Resolved:
    """A name expression after the compile: the symbol to load and the instantiated parameters."""

    expr: str
    lowered: str
    params: list[Param]


def cpu_entry(ts: Sequence[Target]) -> Optional[str]:
    """What the CPU executor's kernel library ends with: the markers, then ``GPUENV_ENTRY`` of the one
    kernel, or for several a dispatch on ``__gpuenv_kernel_index`` (set before each launch). None: as before."""
    if len(ts) == 1 and ts[0].simple:
        return None
    code = marker_text(ts) + '#line 1000000 "<gpuenv>"\n'  # the entry's lines are never a marker's
    if len(ts) == 1:
        return code + f"GPUENV_ENTRY(({ts[0].expr}))\n"
    # names looked up from the global namespace: inside __gpuenv, a kernel namespace could meet one of the executor's
    cases = "".join(f"    case {i}: _Call(({'' if t.expr.startswith('::') else '::'}{t.expr}), __gpuenv_a); break;\n"
                    for i, t in enumerate(ts))
    return code + (
        'extern "C" __attribute__((__visibility__("default"))) int __gpuenv_kernel_index;\n'
        "int __gpuenv_kernel_index = 0;\n"
        "struct __gpuenv_dispatch {};\n"
        "namespace __gpuenv {\n"
        '__attribute__((__no_sanitize__("thread"))) inline void _Call(__gpuenv_dispatch, void** __gpuenv_a) {\n'
        f"  switch (__gpuenv_kernel_index) {{\n{cases}  }}\n}}\n}}\n"
        "GPUENV_ENTRY(__gpuenv_dispatch{})\n")


def marker_text(ts: Sequence[Target]) -> str:
    """C++ to append to the source ('' when every target is simple)."""
    if all(t.simple for t in ts):
        return ""
    lines = [f'\n#line 1 "{GENERATED}"\n', _MARKER_HEAD]
    lines += [f"template __global__ void {MARKER}<{i}, &({t.expr})>();\n" for i, t in enumerate(ts)]
    return "".join(lines)


def with_markers(src: Source, extra: str, include_dirs: Sequence[str]) -> tuple[Source, list[str]]:
    """For a compiler driver (hipcc, nvcc): a source of ``src`` and ``extra``, and the include path for it.
    A file is ``#include``d, so its own quoted includes, its name and its line numbers stay as they are."""
    if not extra:
        return src, list(include_dirs)
    text = f'#include "{src.path}"\n{extra}' if src.path and '"' not in src.path else src.text + extra
    return Source(text, None, src.display), ([src.dir] if src.dir else []) + list(include_dirs)


def explain(exc: KernelCompileError, ts: Sequence[Target]) -> KernelCompileError:
    """A compile error located in the marker: which name expression the compiler could not instantiate."""
    if exc.file != GENERATED or exc.line is None or not 0 <= exc.line - FIRST_LINE < len(ts):
        return exc
    t = ts[exc.line - FIRST_LINE]
    return KernelCompileError(
        f"name expression {t.expr!r} does not name one kernel instantiation ({t.decl.describe(always_line=True)}): "
        f"{exc.message}", log=exc.log, file=None, arch=exc.arch, compiler=exc.compiler)


def _split_call(text: str) -> tuple[str, Optional[str]]:
    """``void f<1>(int, float*)`` -> ("f<1>", "int, float*"); ``ns::f`` -> ("ns::f", None)."""
    text = text.strip()
    if not text.endswith(")"):
        return text, None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            name = text[:i].strip()
            return (name[5:] if name.startswith("void ") else name), text[i + 1: -1].strip()
    return text, None


def split_types(params: str) -> list[str]:
    """The parameter types of a demangled signature's list (``void`` alone: none)."""
    return [] if params.strip() in ("", "void") else split_params(params)


def _marker(demangled: str) -> Optional[tuple[int, str, list[str], list[int]]]:
    """(index, the kernel as the marker names it, parameter types, sizes then alignments then enum flags)."""
    head = f"void {MARKER}<"
    if not demangled.startswith(head) or demangled.endswith("]"):  # "[clone .kd]": AMD's kernel descriptor
        return None
    idx, _, rest = demangled[len(head):].partition(", ")
    cut = rest.rfind(", __gpuenv_sig<void (")
    if not idx.isdigit() or cut < 0:
        return None
    fn = rest[:cut].strip()
    fn = fn[1:] if fn.startswith("&") else fn
    fn = fn[1:-1] if fn.startswith("(") and fn.endswith(")") else fn
    sig = rest[cut + len(", __gpuenv_sig<void ("):]
    depth, end = 1, 0
    while end < len(sig):
        depth += {"(": 1, ")": -1}.get(sig[end], 0)
        if depth == 0:
            break
        end += 1
    types = split_types(sig[:end])
    nums = [int(re.sub(r"[ul]+$", "", n)) for n in re.findall(r"\b\d+[ul]*\b", sig[end + 1:].split(">", 1)[0])]
    return int(idx), fn, types, nums


#: an enum passed by value is an integer of its size (``enum class Mode : short`` takes an int)
_ENUM_AS = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}


def param_of(t: str, name: str, size: int, align: int, enum: bool = False) -> Param:
    """A Param from a demangled type: ``float const*`` -> Param(name, "float", True, "const float* name")."""
    t = " ".join(re.sub(r"\b(?:restrict|__restrict__|__restrict)\b", "", t).split())
    pointer = t.endswith("*") or t.endswith("&")
    base = t[:-1].strip() if pointer else t
    const = bool(re.search(r"(?:^|\s)const$|^const\s", base))
    base = " ".join(w for w in base.split() if w not in ("const", "volatile"))
    shown = vector_name(base)  # HIP's typedef name in messages: float4, uchar4, ulonglong2
    decl = f"{'const ' if const else ''}{shown}{'*' if pointer else ''} {name}"
    if enum and not pointer and size in _ENUM_AS:
        base = _ENUM_AS[size]
    return Param(name=name, type=base, pointer=pointer, decl=decl, size=size, align=align)


def resolve(binary: bytes, ts: Sequence[Target], api_lowered: dict[str, str], need_symbol: bool,
            where: str) -> list[Resolved]:
    """Each target's symbol and instantiated parameters, read from the code object's symbol table."""
    if all(t.simple for t in ts):
        return [Resolved(t.expr, api_lowered.get(t.expr, t.expr), list(t.decl.params)) for t in ts]
    syms = _symbols.symbols(binary)
    dem = _symbols.demangle([s.name for s in syms])
    markers = {m[0]: m for m in (_marker(d) for d in dem) if m is not None}
    calls: dict[tuple[str, Optional[str]], str] = {}
    for s, d in zip(syms, dem):
        if s.kind == _symbols.STT_FUNC and not d.startswith(f"void {MARKER}<"):
            calls.setdefault(_split_call(d), s.name)
    out = []
    for i, t in enumerate(ts):
        if t.simple:
            out.append(Resolved(t.expr, api_lowered.get(t.expr, t.expr), list(t.decl.params)))
            continue
        m = markers.get(i)
        if m is None:
            raise KernelCompileError(f"kernel {t.expr!r}: the compiler emitted no signature marker in {where}; "
                                     "its parameters are unknown")
        _, fn, types, nums = m
        names = [p.name for p in t.decl.params]
        if len(names) != len(types):
            names = [f"arg{j}" for j in range(len(types))]
        n = len(types)
        sizes, aligns, enums = nums[:n], nums[n:2 * n], nums[2 * n:3 * n] or [0] * n
        params = [param_of(ty, nm, sz, al, bool(en)) for ty, nm, sz, al, en in zip(types, names, sizes, aligns, enums)]
        lowered = api_lowered.get(t.expr)
        if lowered is None:
            name, args = _split_call(fn)
            lowered = calls.get((name, args or ", ".join(types))) or calls.get((name, None))
            if lowered is None and need_symbol:
                raise KernelCompileError(f"kernel {t.expr!r}: no symbol for {fn} in {where}")
        out.append(Resolved(t.expr, lowered or t.expr, params))
    return out


__all__ = ["Resolved", "Target", "cpu_entry", "explain", "marker_text", "resolve", "with_markers"]
