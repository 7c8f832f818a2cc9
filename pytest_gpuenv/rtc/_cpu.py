"""``compile_kernel(..., arch="cpu")``: a HIP kernel built with the host C++ compiler for the CPU executor.

The source gets two line-preserving rewrites (``static __shared__`` -> ``__shared__``; ``extern
__shared__ T x[];`` -> a pointer to the launch's dynamic shared memory), the executor's
``hip/hip_runtime.h`` comes first on the include path, and one entry point is appended. In checking
mode (the default) it is compiled with ``-fsanitize=thread`` and linked without the TSan runtime: the
executor implements those entry points. The shared library is cached in the kernel cache (key: source
and headers, warp size, checking mode, compiler identity and version) and loaded from its bytes.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv.rtc._cache import make_key
from pytest_gpuenv.rtc._deps import cpu_headers, merge
from pytest_gpuenv.rtc._errors import KernelCompileError, KernelLaunchError
from pytest_gpuenv.rtc._run import run_tool
from pytest_gpuenv.rtc._source import Source, find_headers, first_error, strip_comments
from pytest_gpuenv.runtime import cpu as cpu_runtime

TIMEOUT = 300.0
_UNSUPPORTED = (
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile|__volatile__)?\s*[({]"), "inline assembly"),
    (re.compile(r"\b__builtin_amdgcn_\w+"), "the AMD GPU builtin {0}"),
    (re.compile(r"\b(?:tex[123]D\w*|texture\s*<|hipTextureObject_t|surf[123]D\w*)"), "textures ({0})"),
    (re.compile(r"\bthis_grid\s*\(\)|\bgrid_group\b|\bhipLaunchCooperativeKernel\w*"), "grid-wide sync ({0})"),
)
_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+(?P<type>[^;\[\]{}()]*(?:\([^)]*\)[^;\[\]{}()]*)*?)\s*\b(?P<name>[A-Za-z_]\w*)"
    r"\s*\[\s*\]\s*;")
_ATTR = re.compile(r"__align__\s*\([^)]*\)|__attribute__\s*\(\([^)]*\)\)|\bHIP_DYNAMIC_SHARED_ATTRIBUTE\b")
_PASS_OPTION = re.compile(r"^-(?:D|U|I|O|std=|f(?:no-)?fast-math|ffp-contract=)")


@functools.cache
def compiler_identity(cxx: str) -> str:
    """``path: first line of --version`` (part of the cache key)."""
    res = run_tool([cxx, "--version"], 30.0, compiler=cxx)
    return f"{cxx}: {(res.stdout.splitlines() or ['?'])[0]}"


def find_cxx() -> Optional[str]:
    from pytest_gpuenv.detect._compilers import cxx_compiler
    from pytest_gpuenv.detect._fs import Fs

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


def check_supported(src: Source) -> None:
    """KernelCompileError naming the first construct the executor cannot run, with file and line."""
    clean = strip_comments(src.text)
    for rx, what in _UNSUPPORTED:
        m = rx.search(clean)
        if m:
            line = clean.count("\n", 0, m.start()) + 1
            where = f"{src.path or src.display}:{line}"
            raise KernelCompileError(
                f"{where}: {what.format(m.group(0).strip())} is not supported by the CPU executor (arch='cpu'); "
                "run this kernel on a GPU, or guard it with #ifdef __GPUENV_CPU__",
                file=src.path, line=line, arch="cpu")


def rewrite(text: str) -> tuple[str, list[str]]:
    """The source with the two shared-memory rewrites (line numbers kept) and the extern array names."""
    names: list[str] = []

    def ext(m: re.Match[str]) -> str:
        t = " ".join(_ATTR.sub(" ", m.group("type")).split())
        names.append(m.group("name"))
        nl = m.group(0).count("\n")
        return f"{t}* const {m.group('name')} __attribute__((unused)) = ({t}*)gpuenv_state.dyn_shared;" + "\n" * nl

    text = _EXTERN_SHARED.sub(ext, text)
    text = re.sub(r"\bstatic(\s+)__shared__\b", lambda m: "\n" * m.group(1).count("\n") + "__shared__", text)
    return text, names


def _run(cmd: list[str], display: str) -> None:
    res = run_tool(cmd, TIMEOUT, compiler=os.path.basename(cmd[0]))
    if res.returncode != 0:
        log = (res.stderr or res.stdout).strip()
        err = first_error(log)
        where = f"{err[0]}:{err[1]}: {err[2]}" if err else log.splitlines()[-1] if log else "failed"
        raise KernelCompileError(f"CPU executor build of {display} failed: {where}", log=log, arch="cpu",
                                 compiler=os.path.basename(cmd[0]), file=err[0] if err else None,
                                 line=err[1] if err else None)


def shared_symbols(nm: Optional[str], so_path: str) -> list[tuple[str, int, int]]:
    """(name, offset in the shared section, size) of every ``__shared__`` variable (red zones left out)."""
    if nm is None:
        return []
    try:
        res = run_tool([nm, "-S", "-C", "--defined-only", so_path], 60.0)
    except KernelCompileError:  # nm missing or wedged: no names for shared variables in messages
        return []
    syms, start, stop = [], None, None
    for line in res.stdout.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 3 and parts[2].startswith("__st"):
            parts = [parts[0], "0", parts[1], parts[2]]
        if len(parts) < 4:
            continue
        addr, size, name = int(parts[0], 16), int(parts[1], 16), parts[3]
        if name == "__start_gpuenv_shared":
            start = addr
        elif name == "__stop_gpuenv_shared":
            stop = addr
        else:
            syms.append((name, addr, size))
    if start is None or stop is None:
        return []
    out = [(n.split("::")[-1], a - start, s) for n, a, s in syms
           if start <= a < stop and "__gpuenv_rz" not in n and s > 0]
    return sorted(out, key=lambda v: v[1])


def _kernel_flags(warp_size: int, check: bool) -> list[str]:
    flags = ["-std=c++17", "-O2", "-g1", "-gdwarf-4", "-fPIC", "-fno-math-errno", "-fno-exceptions",
             f"-DGPUENV_WARP_SIZE={warp_size}", f"-DGPUENV_CHECK={int(check)}"]
    return flags + (["-fsanitize=thread"] if check else [])


def _compile_flags(src: Source, warp_size: int, check: bool, options: Sequence[str], defines: Mapping[str, Any],
                   include_dirs: Sequence[str]) -> list[str]:
    """A kernel's compile flags (the executor's header first on the include path); the cache key lists its
    headers with them too."""
    incs = [f"-I{cpu_runtime.INCLUDE_DIR}"] + ([f"-I{src.dir}"] if src.dir else []) + [f"-I{i}" for i in include_dirs]
    defs = [f"-D{k}={v}" for k, v in defines.items()]
    return [*_kernel_flags(warp_size, check), *incs, *defs, *[o for o in options if _PASS_OPTION.match(o)]]


def build_kernel(cxx: str, src: Source, name: str, warp_size: int, check: bool, options: Sequence[str],
                 defines: Mapping[str, Any], include_dirs: Sequence[str]) -> tuple[dict[str, Any], bytes]:
    """(meta, shared library bytes) of kernel ``name``; KernelCompileError with the compiler's log."""
    check_supported(src)
    text, dyn_names = rewrite(src.text)
    display = (src.path or src.display).replace("\\", "/").replace('"', "")
    lines = text.count("\n") + 2
    code = f'#line 1 "{display}"\n{text}\n#line {lines} "<gpuenv>"\nGPUENV_ENTRY({name})\n'
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuenv-cpu-") as d:
        cpp, obj, so = (os.path.join(d, n) for n in ("kernel.cpp", "kernel.o", "kernel.so"))
        with open(cpp, "w", encoding="utf-8") as f:
            f.write(code)
        flags = _compile_flags(src, warp_size, check, options, defines, include_dirs)
        _run([cxx, *flags, "-c", cpp, "-o", obj], display)
        _run([cxx, "-shared", "-Wl,-Bsymbolic", "-o", so, obj], display)
        with open(so, "rb") as f:
            binary = f.read()
        shared = shared_symbols(binutil(cxx, "nm"), so)
    meta = {"name": name, "arch": "cpu", "compiler": os.path.basename(cxx), "warp_size": warp_size, "check": check,
            "compile_seconds": time.perf_counter() - t0, "shared_vars": shared, "dyn_names": dyn_names}
    return meta, binary


def build_executor(cxx: str) -> tuple[dict[str, Any], bytes]:
    """The executor library (one per compiler; ``GPUENV_CPU_UCONTEXT=1`` builds the ucontext fallback)."""
    t0 = time.perf_counter()
    srcs = [os.path.join(cpu_runtime.SRC_DIR, n) for n in cpu_runtime.EXECUTOR_SOURCES]
    extra = ["-DGPUENV_UCONTEXT"] if os.environ.get("GPUENV_CPU_UCONTEXT") == "1" else []
    with tempfile.TemporaryDirectory(prefix="gpuenv-cpu-") as d:
        so = os.path.join(d, "executor.so")
        _run([cxx, "-std=c++17", "-O2", "-g1", "-fPIC", "-shared", "-fno-exceptions", *extra, "-o", so, *srcs, "-lrt"],
             "the CPU executor")
        with open(so, "rb") as f:
            binary = f.read()
    return {"name": "executor", "arch": "cpu", "compile_seconds": time.perf_counter() - t0}, binary


def executor_key(cxx: str) -> str:
    parts = {"what": "gpuenv-cpu-executor", "compiler": compiler_identity(cxx),
             "ucontext": os.environ.get("GPUENV_CPU_UCONTEXT") == "1"}
    srcs = cpu_runtime.executor_sources()
    return make_key(parts, b"", srcs)


def kernel_key(cxx: str, src: Source, name: str, warp_size: int, check: bool, options: Sequence[str],
               defines: Mapping[str, Any], include_dirs: Sequence[str]) -> str:
    parts = {"name": name, "arch": "cpu", "warp_size": warp_size, "check": check, "options": list(options),
             "defines": {str(k): str(v) for k, v in defines.items()},
             "include_dirs": [os.path.abspath(i) for i in include_dirs], "compiler": compiler_identity(cxx)}
    dirs = list(include_dirs) + [cpu_runtime.INCLUDE_DIR]
    flags = _compile_flags(src, warp_size, check, options, defines, include_dirs)
    junk: list[str] = []  # a FIFO on the path would block the preprocessor: the scan alone keys it
    headers = find_headers(src, dirs, options=options, irregular=junk)
    headers = merge(headers, [] if junk else cpu_headers(cxx, flags, src))  # (see rtc/_deps)
    return make_key(parts, src.data, headers)


def runtime(cache: Any) -> cpu_runtime.CpuRuntime:
    """The process's CPU runtime; the executor is built (or taken from ``cache``) on first use."""
    def executor() -> bytes:
        cxx = require_cxx()
        return bytes(cache.get_or_compile(executor_key(cxx), lambda: build_executor(cxx))[1])

    return cpu_runtime.get(executor)


def emit_output(text: str, messages: Sequence[str]) -> None:
    """Device printf output to sys.stdout (pytest shows it with the test); warnings as KernelWarning."""
    from pytest_gpuenv.runtime._cpu_errors import KernelWarning

    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    for m in messages:
        warnings.warn(KernelWarning(m), stacklevel=3)


__all__ = ["KernelLaunchError", "build_kernel", "kernel_key", "runtime"]
