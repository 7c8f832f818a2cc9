"""``compile_kernel(..., arch="cpu")``: a HIP kernel built with the host C++ compiler for the CPU executor.

The whole file is compiled, host code included (the executor's ``hip/hip_runtime_api.h`` declares HIP's host
API as stubs that are never run). The source gets line-preserving rewrites (``rtc._cpu_rewrite``: host-code
launches, shared memory, the globals' red zones), the executor's ``hip/hip_runtime.h`` comes first on the
include path, and one entry point is appended. In checking
mode (the default) it is compiled with ``-fsanitize=thread`` and linked without the TSan runtime: the
executor implements those entry points. The shared library is cached in the kernel cache (key: source
and headers, warp size, checking mode, compiler identity and version) and loaded from its bytes.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from pytest_gpuenv.rtc import _cpu_globals, _cpu_rewrite
from pytest_gpuenv.rtc._cpu_globals import section_symbols
from pytest_gpuenv.rtc._cpu_rewrite import rewrite_with_headers
from pytest_gpuenv.rtc._deps import cpu_headers, merge
from pytest_gpuenv.rtc._run import run_tool
from pytest_gpuenv.rtc.cache import make_key
from pytest_gpuenv.rtc.errors import KernelCompileError, KernelLaunchError
from pytest_gpuenv.rtc.logs import first_error
from pytest_gpuenv.rtc.source import (
    Source,
    find_headers,
    include_path_env,
    refuse_irregular_headers,
    split_outside_brackets,
)
from pytest_gpuenv.rtc.target import ROCM_INI, ROCM_KEYWORD, CpuTarget
from pytest_gpuenv.runtime import cpu as cpu_runtime
from pytest_gpuenv.runtime.cpu import protocol as cpu_protocol
from pytest_gpuenv.runtime.cpu import sources as cpu_sources

TIMEOUT = 300.0
GLOBALS_FILE_LIMIT = 16 << 20  # bytes of kernel module above which globals are built without red zones
_UNSUPPORTED = (
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile|__volatile__)?\s*[({]"), "inline assembly"),
    (re.compile(r"\b__builtin_amdgcn_\w+"), "the AMD GPU builtin {0}"),
    (re.compile(r"\b(?:tex[123]D\w*|texture\s*<|hipTextureObject_t|surf[123]D\w*)"), "textures ({0})"),
)
# libc functions checked mode intercepts (src/include/gpuenv_libc.h): never expanded inline
LIBC_CHECKED = ("memset", "memcpy", "memmove", "strcpy", "strncpy", "strlen", "sprintf", "snprintf", "vsprintf",
                "vsnprintf")
#: options the CPU build passes on, as g++ spells them: one that takes a value -> (its g++ spelling, whether it is
#: a path); GPU compilers' spellings map onto them (NVRTC's ``--include-path=``, nvcc's ``--std``, ...)
_VALUE_OPTIONS = {
    "-D": ("-D", False), "--define-macro": ("-D", False), "-U": ("-U", False), "--undefine-macro": ("-U", False),
    "-I": ("-I", True), "--include-path": ("-I", True), "-isystem": ("-isystem", True), "-iquote": ("-iquote", True),
    "-idirafter": ("-idirafter", True), "-include": ("-include", True), "--pre-include": ("-include", True),
}
#: options passed on as they are (a language standard, an optimisation level, floating-point contraction)
_PLAIN_OPTION = re.compile(r"^(?:-std=c\+\+\w+|-O[0-3sgz]?|-f(?:no-)?fast-math|-ffp-contract=\w+|-w|-g)$")
#: GPU code generation alone: nothing for the CPU executor to do, so accepted and left out of its build
_GPU_ONLY_OPTION = re.compile(
    r"^(?:--offload-arch=\S+|--gpu-architecture=\S+|-arch=\S+|-lineinfo|--generate-line-info|-G|--device-debug"
    r"|-fgpu-rdc|-rdc=\w+|--relocatable-device-code=\w+|-munsafe-fp-atomics|-mcumode|-mno-cumode"
    r"|-maxrregcount=\d+|--maxrregcount=\d+|-Xptxas=\S+|--ptxas-options=\S+|-fgpu-flush-denormals-to-zero"
    r"|--ftz=\w+|--prec-div=\w+|--prec-sqrt=\w+|--fmad=\w+|--extra-device-vectorization)$")


def cpu_options(options: Sequence[str]) -> list[str]:
    """``options`` as g++ takes them for a CPU executor build: the preprocessor's and the language's passed on
    (``-I dir`` and ``-Idir`` alike, NVRTC's and nvcc's spellings translated), GPU code generation left out;
    any other option is a KernelCompileError naming it, never dropped in silence."""
    out: list[str] = []
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = str(opts[i])
        i += 1
        if opt == "--use_fast_math":
            out.append("-ffast-math")
            continue
        if _PLAIN_OPTION.match(opt) or _GPU_ONLY_OPTION.match(opt):
            out += [opt] if _PLAIN_OPTION.match(opt) else []
            continue
        flag = opt if opt in _VALUE_OPTIONS else next(
            (f for f in _VALUE_OPTIONS if opt.startswith(f + "=") or (f in ("-D", "-U", "-I") and opt.startswith(f))
             or (f.startswith("-i") and opt.startswith(f) and len(opt) > len(f))), None)
        if flag is None:
            if opt.startswith("--std=") or opt.startswith("-std="):
                out.append("-std=" + opt.split("=", 1)[1])
                continue
            raise KernelCompileError(f"option {opt!r} is not one the CPU executor's build takes: give include, define "
                                     "and language options (-I, -isystem, -include, -D, -U, -std=, -O) or GPU "
                                     "code-generation options, which it leaves out", arch="cpu")
        if opt == flag:
            if i >= len(opts):
                raise KernelCompileError(f"option {opt!r} needs a value (e.g. {opt} VALUE)", arch="cpu")
            value = str(opts[i])
            i += 1
        else:
            value = opt[len(flag):].removeprefix("=")
        spelling, is_path = _VALUE_OPTIONS[flag]
        if is_path and (spelling != "-include" or os.path.exists(value)):  # (the build runs in a temporary folder;
            value = os.path.abspath(value)  # an -include that is no file here is looked up on the include path)
        out += [spelling + value] if spelling in ("-D", "-U", "-I") else [spelling, value]
    return out


@functools.cache
def compiler_identity(cxx: str) -> str:
    """``path: first line of --version`` (part of the cache key)."""
    res = run_tool([cxx, "--version"], 30.0, compiler=cxx)
    return f"{cxx}: {(res.stdout.splitlines() or ['?'])[0]}"


def find_cxx() -> Optional[str]:
    from pytest_gpuenv.detect.compilers import cxx_compiler
    from pytest_gpuenv.detect.fs import Fs

    return cxx_compiler(Fs(None), os.environ)


def require_cxx() -> str:
    cxx = find_cxx()
    if cxx is None:
        raise KernelCompileError("arch='cpu' needs a C++ compiler: none of $CXX, g++, clang++, c++ is on PATH "
                                 "(apt-get install g++)", arch="cpu")
    return cxx


def binutil(cxx: str, name: str) -> Optional[str]:
    """``nm``/``addr2line`` next to the compiler, else on PATH (llvm- prefixed for clang-only hosts)."""
    here = os.path.dirname(os.path.realpath(cxx))
    for n in (name, "llvm-" + name):
        cand = os.path.join(here, n)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
        found = shutil.which(n)
        if found:
            return found
    return None


def _provided_builtins() -> frozenset[str]:
    """The ``__builtin_amdgcn_*`` that the executor's headers define (src/include/hip/amdgcn_builtins.h)."""
    with open(os.path.join(cpu_runtime.INCLUDE_DIR, "hip", "amdgcn_builtins.h"), encoding="utf-8") as f:
        return frozenset(re.findall(r"\b(__builtin_amdgcn_\w+)\(", f.read()))


def check_supported(src: Source) -> None:
    """KernelCompileError naming the first construct the executor cannot run, with file and line."""
    clean = src.clean
    provided = _provided_builtins()
    for rx, what in _UNSUPPORTED:
        m = next((m for m in rx.finditer(clean) if m.group(0) not in provided), None)
        if m:
            line = clean.count("\n", 0, m.start()) + 1
            where = f"{src.path or src.display}:{line}"
            raise KernelCompileError(
                f"{where}: {what.format(m.group(0).strip())} is not supported by the CPU executor (arch='cpu'); "
                "run this kernel on a GPU, or guard it with #ifdef __GPUENV_CPU__",
                file=src.path, line=line, arch="cpu")


_LINE_MARK = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"')
#: files whose assembly is not the kernel's: the compiler's and the system's headers, the executor's own
_NOT_THE_KERNELS = ("<built-in>", "<command-line>", "<gpuenv>", "/usr/include/", "/usr/lib/", "/usr/local/include/",
                    cpu_runtime.INCLUDE_DIR)


def check_preprocessed(cxx: str, flags: Sequence[str], cpp: str) -> None:
    """Inline assembly that only the preprocessor shows (behind a macro, pasted from tokens, in a header of
    the kernel's): KernelCompileError at the line that expands to it. Runs on a cache miss only."""
    res = run_tool([cxx, *flags, "-E", cpp], TIMEOUT, compiler=os.path.basename(cxx))
    if res.returncode != 0:
        return  # the compile that follows reports it
    asm, what = _UNSUPPORTED[0]
    file, line = "", 0
    for text in res.stdout.splitlines():
        m = _LINE_MARK.match(text)
        if m:
            file, line = m.group(2), int(m.group(1))
            continue
        if file and not file.startswith(_NOT_THE_KERNELS) and asm.search(text):
            raise KernelCompileError(
                f"{file}:{line}: {what} (through a macro or a header) is not supported by the CPU executor "
                "(arch='cpu'); run this kernel on a GPU, or guard it with #ifdef __GPUENV_CPU__",
                file=file, line=line, arch="cpu")
        line += 1


#: what a compile log says where a kernel uses warpSize as a constant expression (ROCm 7 made it none)
_WARPSIZE_CONSTANT = re.compile(r"warpSize|gpuenv_warp_size_t|__gpuenv_warp_size")


def _older_rule(log: str, target: Optional[CpuTarget]) -> str:
    """A hint when a kernel relies on an older ROCm's rule: warpSize a constant expression (not from ROCm 7),
    a *_sync function's mask narrower than 64 bits (refused from ROCm 6.2)."""
    if target is not None and "The mask must be a 64-bit integer" in log:
        return (f" (this CPU run stands for ROCm {target.rocm_version}, whose *_sync functions take a 64-bit mask, "
                f"as on the GPU: pass an unsigned long long such as ~0ull; {ROCM_KEYWORD}= (compile_kernel, "
                f"hip_kernel) or the ini option {ROCM_INI} sets the ROCm version)")
    if target is None or target.rocm[0] < 7 or not _WARPSIZE_CONSTANT.search(log) or not re.search(
            r"constant expression|not usable in a constant|static assertion|template argument|non-constant", log):
        return ""
    return (f" (this CPU run stands for ROCm {target.rocm_version}, where warpSize is no constant expression, as "
            f"on the GPU: use __AMDGCN_WAVEFRONT_SIZE or a template parameter, or build for an older ROCm with "
            f"{ROCM_KEYWORD}='6.4' (compile_kernel, hip_kernel) or the ini option {ROCM_INI})")


def _run(cmd: list[str], display: str, target: Optional[CpuTarget] = None) -> None:
    res = run_tool(cmd, TIMEOUT, compiler=os.path.basename(cmd[0]))
    if res.returncode != 0:
        log = (res.stderr or res.stdout).strip()
        err = first_error(log)
        where = f"{err[0]}:{err[1]}: {err[2]}" if err else log.splitlines()[-1] if log else "failed"
        where += _older_rule(log, target)
        raise KernelCompileError(f"CPU executor build of {display} failed: {where}", log=log, arch="cpu",
                                 compiler=os.path.basename(cmd[0]), file=err[0] if err else None,
                                 line=err[1] if err else None)


_RED_ZONE = re.compile(r"^(?P<scope>.*?)__gpuenv_rz(?P<ab>[ab])(?P<n>\d+)$")


class SharedVars(NamedTuple):
    """The ``__shared__`` variables of a kernel module, at their offsets from its load address."""

    vars: list[tuple[str, int, int]]  # (name, offset, size), sorted by offset
    red_zones: list[tuple[int, int]]  # (offset, size)
    #: the scope each variable is declared in, by offset: ``scan<int, 512>(long, int*, int const*)::``, ``ns::``, ""
    scopes: dict[int, str] = {}


def shared_symbols(nm_lines: Sequence[str]) -> SharedVars:
    """Every ``__shared__`` variable of the module, wherever it was declared (kernel, template, inline helper,
    namespace scope), found in the symbol table (``nm -S -C`` lines) next to its red zones (see ``__shared__``
    in the executor's hip_runtime.h): the symbol beside ``__gpuenv_rzb<N>`` on the side away from
    ``__gpuenv_rza<N>``, in the same scope. Sections are no help: g++ ignores a section attribute on a
    template's static local."""
    syms: list[tuple[int, int, str]] = []
    starts: list[int] = []  # every defined symbol's address
    for line in nm_lines:
        parts = line.split(None, 3)
        if parts and all(c in "0123456789abcdef" for c in parts[0]):
            starts.append(int(parts[0], 16))
        if len(parts) == 4 and parts[2] in "bBdDuVvgGsS" and all(c in "0123456789abcdef" for c in parts[1]):
            syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    syms.sort()
    starts.sort()
    zones: dict[tuple[str, str], dict[str, int]] = {}
    for i, (_, _, name) in enumerate(syms):
        m = _RED_ZONE.match(name)
        if m:
            zones.setdefault((m["scope"], m["n"]), {})[m["ab"]] = i
    out, red, scopes = [], [], {}
    for (scope, _), z in zones.items():
        red += [(syms[i][0], syms[i][1]) for i in z.values()]
        if "a" not in z or "b" not in z:
            continue
        ia, ib = z["a"], z["b"]
        j = ib + 1 if ia < ib else ib - 1  # the variable follows rzb (declaration order) or precedes it
        if not 0 <= j < len(syms):
            continue
        addr, size, name = syms[j]
        rest = name[len(scope):]
        if size and name.startswith(scope) and "::" not in rest and not _RED_ZONE.match(name):
            out.append((rest, addr, size))
            scopes[addr] = scope
            if ia < ib:  # declaration order: the variable's own red zones are before it; guard the padding after
                end = addr + size
                nxt = starts[bisect.bisect_left(starts, end)] if bisect.bisect_left(starts, end) < len(starts) else end + 64
                if min(nxt, end + 64) > end:
                    red.append((end, min(nxt, end + 64) - end))
    return SharedVars(sorted(out, key=lambda v: v[1]), sorted(red), scopes)


#: a line of ``nm -S`` for a GNU unique symbol: address, [size,] type ``u``
_UNIQUE = re.compile(r"[0-9a-fA-F]+ (?:[0-9a-fA-F]+ )?u ")


def module_symbols(nm: Optional[str], so_path: str) -> tuple[SharedVars, list[tuple[str, int, int]], bool]:
    """The ``__shared__`` variables (``shared_symbols``), (name, offset in the section, size) of every
    red-zoned ``__device__``/``__constant__`` variable (``_cpu_globals``), red zones left out, and whether
    the library has a process-wide (STB_GNU_UNIQUE, ``nm`` type ``u``) symbol, which every copy of the
    module would share (a compiler that ignores ``-fno-gnu-unique``); True where nm cannot tell."""
    if nm is None:
        return SharedVars([], []), [], True
    try:
        res = run_tool([nm, "-S", "-C", "--defined-only", so_path], 60.0)
    except KernelCompileError:  # nm missing or wedged: shared memory is not told apart from other globals
        return SharedVars([], []), [], True
    lines = res.stdout.splitlines()
    unique = any(_UNIQUE.match(line) for line in lines)
    return shared_symbols(lines), section_symbols(lines, _cpu_globals.SECTION, _cpu_globals.RZ_MARKER), unique


def check_shared_limit(shared: SharedVars, src: Source, display: str, limit: int, arch: str) -> dict[str, int]:
    """Bytes of static ``__shared__`` memory of each kernel of the module (by unqualified name, the largest of its
    instances), as a GPU counts them: what the kernel declares, what the functions it may call declare, and the
    namespace-scope variables it or they name (``Source.function_uses``); KernelCompileError naming the kernel
    when that exceeds ``limit``, a block's shared memory on the target ``arch``. The variables of the module's other kernels are not its own
    (HeCBench scan: 16 kernels, each within the limit, 80 KiB together). A variable the source scan cannot place
    (a function it does not see, through a macro) counts for every kernel."""
    uses = src.function_uses
    kernels = set(src.kernels)
    known = set(uses) | kernels
    own: dict[str, list[tuple[str, int]]] = {}  # owner (function instance) -> its variables
    base_of: dict[str, str] = {}
    loose: list[tuple[str, str, int]] = []  # (last name, name, size) of variables at namespace scope
    for name, addr, size in shared.vars:
        scope = shared.scopes.get(addr, "")
        owner = _owner(scope, known)
        if owner is None:
            loose.append((name.rsplit("::", 1)[-1], scope + name, size))
        else:
            own.setdefault(owner[0], []).append((name, size))
            base_of[owner[0]] = owner[1]

    def total(key: str) -> int:
        return sum(size for _, size in own[key])

    def biggest(base: str) -> tuple[int, list[tuple[str, int]]]:
        keys = [k for k in own if base_of[k] == base]
        key = max(keys, key=total) if keys else None
        return (total(key), [(f"{key}::{n}", s) for n, s in own[key]]) if key else (0, [])

    unplaced = [k for k in own if base_of[k] not in uses and base_of[k] not in kernels]
    out: dict[str, int] = {}
    for k in sorted(kernels):
        reach, todo = {k}, [k]
        while todo:
            for w in uses.get(todo.pop(), ()):
                if w in uses and w not in reach:
                    reach.add(w)
                    todo.append(w)
        words = set().union(*(uses.get(f, frozenset()) for f in reach))
        seen = k in uses
        extra = [v for base in sorted(reach - {k}) for v in biggest(base)[1]]
        extra += [(f"{key}::{n}", s) for key in unplaced for n, s in own[key]]
        extra += [(full, size) for last, full, size in loose if not seen or last in words]
        if not seen:  # its body was not read: every variable of the other functions may be its
            extra += [(f"{key}::{n}", s) for key in own if base_of[key] not in (k, *reach) and key not in unplaced
                      for n, s in own[key]]
        for key in [key for key in own if base_of[key] == k] or [""]:
            mine = [(f"{key}::{n}", s) for n, s in own[key]] if key else []
            used = sum(s for _, s in mine + extra)
            out[k] = max(out.get(k, 0), used)
            if used > limit:
                names = ", ".join(f"{n!r} ({size} bytes)" for n, size in sorted(mine + extra, key=lambda v: -v[1]))
                raise KernelCompileError(
                    f"{display}: kernel {key or k}: {used} bytes of static __shared__ memory ({names}) exceed the "
                    f"{limit}-byte ({limit // 1024} KiB) limit of a block on {arch}", arch="cpu")
    return out


def _owner(scope: str, known: set[str]) -> Optional[tuple[str, str]]:
    """(the function instance, its unqualified name) a static local's scope (``nm -C``) is in: the outermost
    function of ``scan<int, 512>(long, int*, int const*)::`` or of ``k::{lambda(float)#1}::operator()(float)
    const::`` (an ``extern "C"`` kernel is a bare name there); None at namespace scope."""
    parts = split_outside_brackets(scope, "::")[:-1]  # (a scope ends with ``::``)
    for i, part in enumerate(parts):
        base = re.split(r"[<(]", part, maxsplit=1)[0].split()[-1:] or [""]
        if "(" in part or base[0] in known:
            return "::".join(parts[: i + 1]), base[0]
    return None


def _kernel_flags(target: CpuTarget, check: bool) -> list[str]:
    # -fexceptions: a whole file's host code may try and catch (HeCBench bitonic-sort's main); never run here
    flags = ["-std=c++17", "-O2", "-g1", "-gdwarf-4", "-fPIC", "-fno-math-errno", "-fexceptions",
             "-fstack-clash-protection",  # a frame bigger than the stack probes the guard page: a stack overflow
             f"-DGPUENV_CHECK={int(check)}",
             # what hipcc and clang define for the target's device code, and the ROCm version's (rtc.target)
             *target.defines()]
    if check:
        # checked: every load and store calls the executor's __tsan_* entry point, through the GOT (-fno-plt)
        return flags + ["-fsanitize=thread", "-fno-plt", *(f"-fno-builtin-{f}" for f in LIBC_CHECKED)]
    # unchecked: the module binds its own symbols (-Wl,-Bsymbolic), so g++ may inline the kernel into the
    # entry's loop over threads and __device__ functions into the kernel; the executor's functions (a barrier)
    # are called through the GOT, with no PLT stub between
    return flags + ["-fno-semantic-interposition", "-fno-plt"]


def gcc_flags(cxx: str, check: bool) -> list[str]:
    """g++'s own flags for a kernel (none for clang): g++ makes a template's or inline function's static locals
    STB_GNU_UNIQUE, which the dynamic loader binds process-wide (every kernel module would share the first one's
    __shared__ arrays); and, checked, no loop-invariant motion: it moves a store to a loop-invariant address
    (``tile[tid] = f(in[i])`` in a loop) to the loop's exit, so the store was checked once, after the loop,
    and reported at the line of the code after it (or of the inlined helper that computed its value)."""
    if "clang" in compiler_identity(cxx):
        return []
    return ["-fno-gnu-unique", "-fno-tree-loop-im"] if check else ["-fno-gnu-unique"]


def _compile_flags(cxx: str, src: Source, target: CpuTarget, check: bool, options: Sequence[str],
                   defines: Mapping[str, Any], include_dirs: Sequence[str]) -> list[str]:
    """A kernel's compile flags (the executor's header first on the include path); the cache key lists its
    headers with them too."""
    incs = [f"-I{cpu_runtime.INCLUDE_DIR}"] + ([f"-I{src.dir}"] if src.dir else []) + [f"-I{i}" for i in include_dirs]
    defs = [f"-D{k}={v}" for k, v in defines.items()]
    return [*_kernel_flags(target, check), *gcc_flags(cxx, check), *incs, *defs, *cpu_options(options)]


def build_kernel(cxx: str, src: Source, name: str, target: CpuTarget, check: bool, options: Sequence[str],
                 defines: Mapping[str, Any], include_dirs: Sequence[str], entry: Optional[str] = None,
                 lockstep: bool = False) -> tuple[dict[str, Any], bytes]:
    """(meta, shared library bytes) of kernel ``name``; KernelCompileError with the compiler's log.
    ``entry``: the C++ appended instead of ``GPUENV_ENTRY(name)`` (name expressions, modules).
    Red-zoned globals sit in a section with file contents (zero-initialised ones too): a module that
    grows past ``GLOBALS_FILE_LIMIT`` that way is built again with its globals left in .bss.
    ``lockstep`` needs the instrumented build even unchecked: the executor runs a wave in lockstep by
    making every shared-memory access wait for the wave's other lanes.
    """
    check_supported(src)
    refuse_irregular_headers(src, [*include_dirs, cpu_runtime.INCLUDE_DIR], options=options)
    t0 = time.perf_counter()
    meta, binary = _build(cxx, src, name, target, check, options, defines, include_dirs, entry, True, lockstep)
    if meta["globals"] and len(binary) > GLOBALS_FILE_LIMIT:
        meta, binary = _build(cxx, src, name, target, check, options, defines, include_dirs, entry, False, lockstep)
    meta["compile_seconds"] = time.perf_counter() - t0
    return meta, binary


def _build(cxx: str, src: Source, name: str, target: CpuTarget, check: bool, options: Sequence[str],
           defines: Mapping[str, Any], include_dirs: Sequence[str], entry: Optional[str], red_zones: bool,
           lockstep: bool = False) -> tuple[dict[str, Any], bytes]:
    display = (src.path or src.display).replace("\\", "/").replace('"', "")
    with tempfile.TemporaryDirectory(prefix="gpuenv-cpu-") as d:
        text, dyn_names = rewrite_with_headers(src, d, red_zones)
        lines = text.count("\n") + 2
        code = (f'#line 1 "{display}"\n{text}\n#line {lines} "<gpuenv>"\nGPUENV_GLOBAL_RZ\n'
                f'{entry or f"GPUENV_ENTRY({name})"}\n')
        cpp, obj, so = (os.path.join(d, n) for n in ("kernel.cpp", "kernel.o", "kernel.so"))
        with open(cpp, "w", encoding="utf-8", errors="surrogateescape") as f:  # a Latin-1 comment as it was
            f.write(code)
        flags = _compile_flags(cxx, src, target, check or lockstep, options, defines, include_dirs)
        check_preprocessed(cxx, flags, cpp)
        _run([cxx, *flags, "-c", cpp, "-o", obj], display, target)
        _run([cxx, "-shared", "-Wl,-Bsymbolic", "-o", so, obj], display)
        with open(so, "rb") as f:
            binary = f.read()
        shared, device_globals, unique = module_symbols(binutil(cxx, "nm"), so)
    kernel_shared = check_shared_limit(shared, src, display, target.shared_limit, target.arch)
    meta = {"name": name, "arch": "cpu", "compiler": os.path.basename(cxx), "warp_size": target.warp_size,
            "target": target.arch, "rocm": target.rocm_version, "check": check,
            "shared_vars": shared.vars, "kernel_shared": kernel_shared, "red_zones": shared.red_zones, "dyn_names": dyn_names,
            "globals": device_globals if red_zones else [],
            # blocks may run on several threads, each on its own copy of the module: not when kernels
            # could share __device__ variables across blocks, nor when the copies would share a symbol
            "parallel": red_zones and not device_globals and not unique}
    return meta, binary


def build_executor(cxx: str) -> tuple[dict[str, Any], bytes]:
    """The executor library (one per compiler; ``GPUENV_CPU_UCONTEXT=1`` builds the ucontext fallback), as
    ``src/build.mk`` says (its Makefile builds the same): the layout header generated from protocol.py into
    the output folder first."""
    t0 = time.perf_counter()
    build = cpu_sources.executor_build()
    srcs = [os.path.join(cpu_sources.SRC_DIR, n) for n in build.sources]
    extra = build.ucontext_flags if os.environ.get("GPUENV_CPU_UCONTEXT") == "1" else []
    with tempfile.TemporaryDirectory(prefix="gpuenv-cpu-") as d:
        so = os.path.join(d, "executor.so")
        with open(os.path.join(d, cpu_sources.LAYOUT_HEADER), "w", encoding="utf-8") as f:
            f.write(cpu_protocol.layout_header())
        _run([cxx, *build.flags, *extra, f"-I{d}", "-o", so, *srcs, *build.libs], "the CPU executor")
        with open(so, "rb") as f:
            binary = f.read()
    return {"name": "executor", "arch": "cpu", "compile_seconds": time.perf_counter() - t0}, binary


def executor_key(cxx: str) -> str:
    parts = {"what": "gpuenv-cpu-executor", "compiler": compiler_identity(cxx),
             "ucontext": os.environ.get("GPUENV_CPU_UCONTEXT") == "1"}
    return make_key(parts, b"", cpu_sources.executor_files())


def _own_files() -> list[tuple[str, bytes]]:
    """The modules whose rewrites of a source are part of what is compiled (a new version, a new build)."""
    out = []
    for mod in (sys.modules[__name__], _cpu_rewrite, _cpu_globals):
        with open(str(mod.__file__), "rb") as f:
            out.append((str(mod.__file__), f.read()))
    return out


_REWRITERS = _own_files()


def kernel_key(cxx: str, src: Source, name: str, target: CpuTarget, check: bool, options: Sequence[str],
               defines: Mapping[str, Any], include_dirs: Sequence[str], lockstep: bool = False) -> str:
    parts = {"name": name, "arch": "cpu", "target": list(target), "check": check or lockstep,
             "options": list(options),
             "defines": {str(k): str(v) for k, v in defines.items()},
             "include_dirs": [os.path.abspath(i) for i in include_dirs], "compiler": compiler_identity(cxx),
             "flags": _kernel_flags(target, check) + gcc_flags(cxx, check or lockstep),
             "include_path_env": include_path_env()}
    dirs = list(include_dirs) + [cpu_runtime.INCLUDE_DIR]
    flags = _compile_flags(cxx, src, target, check or lockstep, options, defines, include_dirs)
    junk: list[str] = []  # a FIFO on the path would block the preprocessor: the scan alone keys it
    headers = find_headers(src, dirs, options=options, irregular=junk)
    headers = merge(headers, [] if junk else cpu_headers(cxx, flags, src))  # (see rtc/_deps)
    return make_key(parts, src.data, headers + _REWRITERS)


def runtime(cache: Any) -> cpu_runtime.CpuRuntime:
    """The process's CPU runtime; the executor is built (or taken from ``cache``) on first use."""
    def executor() -> bytes:
        cxx = require_cxx()
        return bytes(cache.get_or_compile(executor_key(cxx), lambda: build_executor(cxx))[1])

    return cpu_runtime.get(executor)


def emit_output(text: str, messages: Sequence[Warning]) -> None:
    """Device printf output to sys.stdout (pytest shows it with the test); the launch's warnings
    (``KernelWarning`` and its subclasses) warned."""
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    for m in messages:
        warnings.warn(m, stacklevel=3)


__all__ = ["KernelLaunchError", "build_kernel", "kernel_key", "runtime"]
