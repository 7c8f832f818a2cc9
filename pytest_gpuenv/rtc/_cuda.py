"""CUDA-dialect kernel sources (``.cu``/``.cuh``, or ``dialect="cuda"``) on every backend.

- NVIDIA (nvcc where installed, as a ``.cu`` file is built; else NVRTC, which has no ``<stdio.h>`` and
  the like): the source compiles as CUDA, unchanged: the HIP-on-CUDA header the plugin pre-includes for
  HIP sources steps aside (``GPUENV_CUDA_DIALECT`` is defined) and the source's own ``#include
  <cuda_runtime.h>`` is the CUDA toolkit's.
- AMD (hiprtc, hipcc) and the CPU executor: the source is compiled after ``#include <cuda_runtime.h>``
  (as nvcc includes it implicitly) from ``include_cuda/``, the shipped CUDA-to-HIP headers
  (``cuda_runtime.h``, ``cuda.h``, ``cuda_fp16.h``, ``device_launch_parameters.h``,
  ``cooperative_groups.h``, ...): CUDA's device names mapped onto HIP's, the inverse of the HIP-on-CUDA
  header shipped for NVRTC. Line numbers and the file name in compiler messages stay the source's.

What has no HIP counterpart is a KernelCompileError naming it and its line before any compiler runs
(``check_mappable``): inline PTX (``asm``), ``__nv_*`` intrinsics, textures and surfaces. Code in a branch
that is false on AMD (``#ifdef __CUDA_ARCH__``, ``#if __CUDA_ARCH__ >= 800``, ``#ifndef
__HIP_PLATFORM_AMD__``) is not checked: that is how such code is kept for NVIDIA.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Optional, Sequence

from pytest_gpuenv.rtc import compilers
from pytest_gpuenv.rtc.errors import KernelCompileError
from pytest_gpuenv.rtc.source import Source, find_headers, strip_comments

#: the shipped CUDA-to-HIP headers (cuda_runtime.h & co.) for hiprtc, hipcc and the CPU executor
CUDA_INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include_cuda")
#: defined for a CUDA-dialect compile on NVIDIA: the pre-included HIP-on-CUDA header then defines nothing
NVIDIA_DEFINE = "GPUENV_CUDA_DIALECT"

_UNMAPPABLE = (
    (re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s*(?:volatile|__volatile__)\b)?(?=\s*[({])"), "inline PTX assembly ({0})"),
    (re.compile(r"\b__nv_\w+"), "the NVIDIA-only name {0}"),
    (re.compile(r"\b(?:tex[123]D\w*|tex[123]DLayered\w*|texCubemap\w*|tex2Dgather|texture\s*<|cudaTextureObject_t|"
                r"surf[123]D\w*|surf2DLayered\w*|cudaSurfaceObject_t)"), "a texture or surface ({0})"),
)
#: a directive whose branch is false on AMD and on the CPU executor (both compile for the AMD platform)
_FALSE_ON_AMD = re.compile(
    r"^\s*#\s*(?:ifdef\s+(?:__CUDA_ARCH__|__NVCC__|__HIP_PLATFORM_NVIDIA__|__HIP_PLATFORM_NVCC__)\b"
    r"|ifndef\s+(?:__HIP_PLATFORM_AMD__|__HIP_PLATFORM_HCC__|__HIP__)\b"
    r"|if\s+(?:defined\s*\(?\s*(?:__CUDA_ARCH__|__NVCC__)\b|__CUDA_ARCH__\b)"
    r"|if\s+!\s*defined\s*\(?\s*(?:__HIP_PLATFORM_AMD__|__HIP_PLATFORM_HCC__|__HIP__)\s*\)?\s*$)")
_IF = re.compile(r"^\s*#\s*if")
_ELSE = re.compile(r"^\s*#\s*(?:else|elif)\b")
_ENDIF = re.compile(r"^\s*#\s*endif\b")
_ELIF = re.compile(r"^(\s*#\s*)elif\b")


def compiler_for(src: Source, arch: str, compiler: Optional[str]) -> Optional[str]:
    """The compiler to ask for: ``compiler`` when given; for a CUDA source on NVIDIA, nvcc where it is installed
    and knows ``arch`` (the samples' host includes, ``<stdio.h>``, are no error there); else None (the
    usual order: hiprtc then hipcc, NVRTC then nvcc)."""
    if compiler is not None or src.dialect != "cuda" or not arch.startswith("sm_"):
        return compiler
    nvcc = compilers.get("nvcc")
    return "nvcc" if nvcc.available() and nvcc.supports(arch) else None


def _opens_false(line: str) -> bool:
    """A directive that opens a branch false on AMD: ``#if``-like, or an ``#elif`` of such a condition (not
    with another alternative, ``||``, nor a condition that goes on to the next line: those may hold on AMD)."""
    line = _ELIF.sub(r"\1if", line, count=1)
    return bool(_FALSE_ON_AMD.match(line)) and "||" not in line and not line.rstrip().endswith("\\")


def _false_on_amd_lines(lines: Sequence[str]) -> list[bool]:
    """Per line: inside a preprocessor branch that is false on AMD (nested #if counted; #else ends it)."""
    out: list[bool] = []
    depth = 0  # > 0: inside a false branch, counting the #if levels opened within it
    for line in lines:
        if depth:
            if _IF.match(line):
                depth += 1
            elif _ENDIF.match(line) or (depth == 1 and _ELSE.match(line) and not _opens_false(line)):
                depth -= 1
            out.append(True)
            continue
        if _opens_false(line):
            depth = 1
        out.append(False)
    return out


def _check_text(clean: str, where: str, path: Optional[str], target: str) -> None:
    """``check_mappable`` of one text whose comments are blanked out."""
    lines = clean.split("\n")
    skip = _false_on_amd_lines(lines)
    for i, line in enumerate(lines):
        if skip[i]:
            continue
        for rx, what in _UNMAPPABLE:
            m = rx.search(line)
            if m:
                raise KernelCompileError(
                    f"{where}:{i + 1}: {what.format(m.group(0).strip())} has no HIP counterpart: this CUDA source "
                    f"cannot be built for {target} (AMD or the CPU executor). Keep it for NVIDIA inside "
                    "#ifdef __CUDA_ARCH__ ... #else <portable code> #endif, or build for an sm_ arch",
                    file=path, line=i + 1, arch=target)


def check_mappable(src: Source, target: str, include_dirs: Sequence[str] = ()) -> None:
    """KernelCompileError naming the first construct of a CUDA source, or of a header of its own that it
    includes (found in its folder or ``include_dirs``), that has no HIP counterpart, with its file and line
    (``target``: the arch it was to be built for)."""
    _check_text(src.clean, src.path or src.display, src.path, target)
    for path, data in find_headers(src, include_dirs):
        if not path.startswith(CUDA_INCLUDE + os.sep):
            _check_text(strip_comments(data.decode("utf-8", "replace")), path, path, target)


def for_amd(src: Source, include_dirs: Sequence[str], keep_path: bool) -> tuple[Source, list[str]]:
    """For hiprtc, hipcc (``keep_path=False``: the text is what they compile) and the CPU executor
    (``keep_path=True``: it compiles the text too, and names the file): the source after ``#include
    <cuda_runtime.h>``, its line numbers and file name kept by ``#line``, and the include path with the
    source's folder and the shipped CUDA-to-HIP headers. Lines in a branch that is false on AMD are blank.
    A HIP source is returned as it is."""
    if src.dialect != "cuda":
        return src, list(include_dirs)
    display = (src.path or src.display).replace("\\", "/").replace('"', "")
    clean = src.clean
    dead = _false_on_amd_lines(clean.split("\n"))
    body = src.text
    if any(dead):  # left out, directives kept (and comments dropped, so none is cut in half): the CPU executor's
        # own textual checks then pass over the PTX that the source keeps for NVIDIA
        body = "\n".join("" if d and not line.lstrip().startswith("#") else line
                         for line, d in zip(clean.split("\n"), dead))
    text = f'#include <cuda_runtime.h>\n#line 1 "{display}"\n{body}'
    dirs = ([src.dir] if src.dir and not keep_path else []) + list(include_dirs) + [CUDA_INCLUDE]
    return replace(src, text=text, path=src.path if keep_path else None), dirs
