"""The files a compile reads, as the preprocessor lists them (``-MM``), for the cache key.

``rtc.source.find_headers`` scans the text for ``#include "x"`` and ``<x>``; a spelling only the
preprocessor resolves escapes it: a directive continued over lines (``#include \\`` newline
``"x.h"``), the digraph ``%:include``, a computed ``#include MACRO``, a comment across lines inside a
directive. The key hashes both lists (``merge``), each for what the other misses:

- the preprocessor's list covers every spelling, in the branches of ``#if`` it takes;
- the scan covers the branches it does not take (the host preprocessor that stands in for hiprtc and
  NVRTC predefines other macros than they do), every file of a name along the search path (a header
  added earlier on the path shadows the one used) and, alone, a compile no preprocessor can list (none
  installed, or it fails on the source: the compile then says why).

The preprocessor: the CPU executor's compiler with its own flags (``cpu_headers``); hipcc's and nvcc's
own ``-MM``; for hiprtc and NVRTC, which have none, the host's C++ compiler with the same include path
and defines, the device compiler's predefined macros and ``-MG`` (a header only the device compiler
provides is no error). ``-MM`` leaves out the headers of the system's and the compiler's own folders,
which the compiler's identity stands for, as in the scan (hashing them cost every warm hit about 1 ms).
Each list is kept for the process and used again while none of its files changed (stat signature, and
settled for 2 s as in ``rtc.source``).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Mapping, Optional, Sequence

from pytest_gpuenv.rtc._run import run_tool
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.source import FileVersion, Source, include_path_env, read_headers, unchanged, versions

#: seconds a dependency listing may take (it reads headers only; a FIFO reached through a macro include
#: would block it: the key is then the scan's alone)
TIMEOUT = 20.0
#: (command, source path, source bytes) -> (the files listed, their versions)
_MEMO: dict[tuple[Any, ...], tuple[list[str], list[Optional[FileVersion]]]] = {}
#: the macros hiprtc / NVRTC predefine that headers branch on (the host preprocessor stands in for them)
_RTC_MACROS = {"amd": ["-D__HIPCC__", "-D__HIP__", "-D__HIPCC_RTC__", "-D__HIP_PLATFORM_AMD__",
                       "-D__HIP_DEVICE_COMPILE__"],
               "nvidia": ["-D__CUDACC__", "-D__CUDACC_RTC__", "-D__NVCC__"]}
#: options that change what the preprocessor reads, with NVRTC's long forms as the host one spells them
_PP_JOINED = {"--include-path=": "-I", "--define-macro=": "-D", "--undefine-macro=": "-U", "-I": "-I", "-D": "-D",
              "-U": "-U", "-std=": "-std=", "-isystem": "-isystem", "-iquote": "-iquote", "-idirafter": "-idirafter"}
_PP_SEPARATE = {"--pre-include=": "-include", "-include": "-include", "-isystem": "-isystem", "-iquote": "-iquote",
                "-idirafter": "-idirafter"}
_TOKEN = re.compile(r"(?:\\.|[^\s\\])+")


def parse_make_rule(text: str) -> list[str]:
    """The prerequisites of the make rules ``-M`` writes (``target: a.h b\\ c.h \\``), unescaped."""
    out: list[str] = []
    for rule in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        tokens = [t.replace("$$", "$") for t in _TOKEN.findall(rule)]
        colon = next((i for i, t in enumerate(tokens) if t.endswith(":")), None)
        if colon is not None:
            out.extend(re.sub(r"\\(.)", r"\1", t) for t in tokens[colon + 1:])
    return out


def _listed(cmd: list[str], src: Source, env: Optional[dict[str, Any]]) -> Optional[list[str]]:
    """Absolute paths ``cmd <source>`` lists, the source left out; None when it fails."""
    with tempfile.TemporaryDirectory(prefix="gpuenv-deps-") as tmp:
        path = src.path
        if not path:
            path = os.path.join(tmp, "source.hip")
            with open(path, "w", encoding="utf-8") as f:
                f.write(src.text)
        try:
            p = run_tool([*cmd, path], TIMEOUT, env=env, compiler=os.path.basename(cmd[0]))
        except KernelCompileError:  # could not start, or timed out
            return None
        if p.returncode != 0:
            return None
        source = os.path.abspath(path)
        return [a for a in (os.path.abspath(d) for d in parse_make_rule(p.stdout)) if a != source]


def preprocessed(cmd: list[str], src: Source, env: Optional[dict[str, Any]] = None) -> list[tuple[str, bytes]]:
    """(path, bytes) of every regular file the preprocessor run ``cmd <source>`` reads besides the source
    ([] when it fails, then for the rest of the process); listed once per process while none of those files
    changed."""
    key = (tuple(cmd), src.path, src.data, tuple(include_path_env().items()))
    known = _MEMO.get(key)
    if known is None or not unchanged(*known):
        paths = _listed(cmd, src, env) or []  # (a failure is kept too, as an empty list: it is not run again)
        known = _MEMO[key] = (paths, versions(paths))
    return read_headers(known[0])


def merge(scanned: list[tuple[str, bytes]], listed: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The scan's headers, then the preprocessor's that the scan did not find."""
    seen = {os.path.abspath(p) for p, _ in scanned}
    return scanned + [(p, d) for p, d in listed if p not in seen]


def _pp_options(options: Sequence[str]) -> list[str]:
    """The options that change what the preprocessor reads, as g++/clang++ spell them (``-I dir`` and
    ``-Idir``; NVRTC's ``--include-path=dir``, ``--pre-include=f``, ``--define-macro=M``); others dropped."""
    out: list[str] = []
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
        if opt in ("-I", "-D", "-U") + tuple(_PP_SEPARATE) and i < len(opts):
            out += [_PP_SEPARATE.get(opt, opt), opts[i]]
            i += 1
            continue
        pre = next((f for f in _PP_SEPARATE if f.endswith("=") and opt.startswith(f)), None)
        joined = next((f for f in _PP_JOINED if opt.startswith(f) and len(opt) > len(f)), None)
        if pre is not None:
            out += [_PP_SEPARATE[pre], opt[len(pre):]]
        elif joined is not None:
            out.append(_PP_JOINED[joined] + opt[len(joined):])
    return out


def _defines(defines: Mapping[str, Any]) -> list[str]:
    return [f"-D{k}" if v is None or v is True else f"-D{k}={v}" for k, v in defines.items()]


def cpu_headers(cxx: str, flags: Sequence[str], src: Source) -> list[tuple[str, bytes]]:
    """What ``cxx`` lists for a CPU executor compile with ``flags`` (its -std, -I, -D and options)."""
    return preprocessed([cxx, "-x", "c++", *flags, "-E", "-MM", "-MT", "gpuenv"], src)


def device_headers(comp: Any, src: Source, arch: str, options: Sequence[str], defines: Mapping[str, Any],
                   include_dirs: Sequence[str]) -> list[tuple[str, bytes]]:
    """What the preprocessor lists for a device compile (``comp``: a ``detect.compilers.Compiler``)."""
    flags = [f"-I{d}" for d in comp.include_path(src, include_dirs)] + _defines(defines)
    pre = [x for p in comp.pre_includes for x in ("-include", p)]
    env = None
    if comp.name == "hipcc" and comp.path():
        cmd = [comp.path(), "-MM", "-MT", "gpuenv", "-x", "hip", f"--offload-arch={arch}", "-std=c++17", *pre,
               *flags, *options]
        env = comp._env()
    elif comp.name == "nvcc" and comp.path():
        cmd = [comp.path(), "-MM", "-x", "cu", f"-arch={arch}", "-std=c++17", *pre, *flags, *options]
    else:  # hiprtc, NVRTC: no -M of their own
        from pytest_gpuenv.detect.compilers import cxx_compiler
        from pytest_gpuenv.detect.fs import Fs

        cxx = cxx_compiler(Fs(None), os.environ)
        if cxx is None:
            return []
        macros = list(_RTC_MACROS.get(comp.vendor, []))
        m = re.match(r"^sm_(\d+)", arch)
        if m:
            macros.append(f"-D__CUDA_ARCH__={int(m.group(1)) * 10}")
        quote = [] if src.path else ["-iquote", os.getcwd()]  # an inline source's quoted includes: as NVRTC
        opts = _pp_options(options)
        cmd = [cxx, "-x", "c++", "-std=c++17", "-E", "-MM", "-MG", "-MT", "gpuenv", *macros, *quote, *pre, *flags,
               *opts]
    return preprocessed(cmd, src, env)
