"""The CPU executor's sources and how they are built, as ``src/build.mk`` declares them for both builds: the
Python one (``rtc._cpu.build_executor``) and the standalone ``src/Makefile``. Also the header both generate
from ``protocol.py`` (``LAYOUT_HEADER``), which checks the C structs against it field by field.
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple

from pytest_gpuenv.runtime.cpu import protocol

SRC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src")
INCLUDE_DIR = os.path.join(SRC_DIR, "include")
BUILD_MK = os.path.join(SRC_DIR, "build.mk")
LAYOUT_HEADER = "gpuenv_layout.h"  # generated into the build's output folder, which is on the include path
_ASSIGN = re.compile(r"^([A-Z_]+)\s*=(.*)$", re.M)


class ExecutorBuild(NamedTuple):
    """``build.mk``'s variables: file names relative to ``SRC_DIR``, compiler arguments."""

    sources: list[str]
    headers: list[str]
    flags: list[str]
    libs: list[str]
    ucontext_flags: list[str]  # added with GPUENV_CPU_UCONTEXT=1


def parse_build_mk(text: str) -> dict[str, list[str]]:
    """``NAME = words`` assignments (comments dropped, ``\\`` continuing a line): each name's words."""
    text = re.sub(r"[ \t]*#[^\n]*", "", text).replace("\\\n", " ")
    return {m.group(1): m.group(2).split() for m in _ASSIGN.finditer(text)}


@functools.cache
def executor_build() -> ExecutorBuild:
    with open(BUILD_MK, encoding="utf-8") as f:
        names = parse_build_mk(f.read())
    return ExecutorBuild(names["EXECUTOR_SOURCES"], names["EXECUTOR_HEADERS"], names["EXECUTOR_FLAGS"],
                         names["EXECUTOR_LIBS"], names["EXECUTOR_UCONTEXT_FLAGS"])


def executor_files() -> list[tuple[str, bytes]]:
    """(name, bytes) of everything the executor library is built from (its cache key): the sources, their
    headers, build.mk and the generated layout header."""
    build = executor_build()
    out = []
    for name in [*build.sources, *build.headers, "build.mk"]:
        with open(os.path.join(SRC_DIR, name), "rb") as f:
            out.append((name, f.read()))
    return out + [(LAYOUT_HEADER, protocol.layout_header().encode())]
