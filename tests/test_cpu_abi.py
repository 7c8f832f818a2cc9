"""The child process checks runtime/_cpu_proto.py's ctypes copies of the executor's ABI structs against the
sizes the C side exports (cpu_src/server.cpp: gpuenv_abi_sizes) when it loads the executor."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_gpuenv.rtc import _cpu

SCRIPT = r"""
import ctypes, sys
from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime import _cpu_server as S, _cpu_proto as P
_, binary = _cpu.build_executor(_cpu.require_cxx())
exe = S.load_bytes(binary, "gpuenv-cpu-executor", global_symbols=True)
S.check_abi(exe)
print("same")
class Short(ctypes.Structure):  # a copy of Region that lost its last two fields
    _fields_ = P.Region._fields_[:2]
Short.__name__ = "Region"
S.ABI_STRUCTS = (P.LaunchDesc, P.Report, Short, P.Note)
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
    assert "differ from runtime/_cpu_proto.py" in mismatch
