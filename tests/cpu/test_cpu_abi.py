"""The child process checks runtime/_cpu_proto.py's ctypes copies of the executor's ABI structs against the
sizes the C side exports (src/server.cpp: gpuenv_abi_sizes) when it loads the executor; and here, that
their field names follow the C structs' in order."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime.cpu import protocol
from pytest_gpuenv.runtime.cpu import server as S

SCRIPT = r"""
import ctypes, sys
from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime.cpu import server as S, protocol
_, binary = _cpu.build_executor(_cpu.require_cxx())
exe = S.load_bytes(binary, "gpuenv-cpu-executor", global_symbols=True)
S.check_abi(exe)
print("same")
class Short(ctypes.Structure):  # a copy of Region that lost its last two fields
    _fields_ = protocol.Region._fields_[:2]
Short.__name__ = "Region"
S.ABI_STRUCTS = (protocol.LaunchDesc, protocol.Report, Short, protocol.Note)
try:
    S.check_abi(exe)
except ValueError as e:
    print(e)
"""


@pytest.mark.skipif(_cpu.find_cxx() is None, reason="needs a C++ compiler")
def test_abi_sizes_checked_at_load() -> None:
    # a subprocess: the executor is native code, loaded here only to read its exported sizes
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=True).stdout
    same, mismatch = out.strip().splitlines()
    assert same == "same"
    assert "Region: ctypes 16 bytes, C 24" in mismatch
    assert "differ from runtime/cpu/protocol.py" in mismatch


def _c_fields(source: str, struct: str) -> list[str]:
    """The field names of ``struct NAME { ... };`` in C source, in order (comments dropped)."""
    body = re.search(r"struct " + struct + r" \{(.*?)\n\};", source, re.S)
    assert body, struct
    names: list[str] = []
    for decl in re.sub(r"//[^\n]*", "", body.group(1)).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        if "(*" in decl:  # a function pointer: void (*entry)(void**)
            names.append(re.search(r"\(\*(\w+)\)", decl).group(1))  # type: ignore[union-attr]
            continue
        _, _, rest = decl.removeprefix("const ").partition(" ")  # the type: one word, after any const
        names += [re.sub(r"[*\s]|\[.*\]", "", part) for part in rest.split(",")]
    return names


def test_abi_field_names_in_the_same_order() -> None:
    # the size check at load misses two fields of the same size swapped on one side: the names catch it
    src = os.path.join(os.path.dirname(protocol.__file__), "src")
    with open(os.path.join(src, "include", "gpuenv_cpu.h")) as f:
        header = f.read()
    with open(os.path.join(src, "server.cpp")) as f:
        server = f.read()
    pairs = [(protocol.Region, header, "gpuenv_region_t"), (protocol.Report, header, "gpuenv_report_t"),
             (protocol.LaunchDesc, header, "gpuenv_launch_t"), (protocol.Worker, header, "gpuenv_worker_t"),
             (protocol.Note, server, "gpuenv_note_t")]
    for cls, source, struct in pairs:
        assert [name for name, *_ in cls._fields_] == _c_fields(source, struct), cls.__name__
    assert {cls for cls, *_ in pairs} == set(S.ABI_STRUCTS)
