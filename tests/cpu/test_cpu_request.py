"""The executor's side of a launch request (src/server.cpp: gpuenv_server_launch) refuses a request that
is cut short or names memory outside the arena before anything runs; pytest builds them with
runtime/cpu.py's ``_launch_payload``. Well-formed requests are what every CPU launch test sends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_gpuenv.rtc import _cpu

# a subprocess: the executor is native code. Its workers' entry is 0: a request that reached the launch
# would crash the script, so every answer printed is the parse's own.
SCRIPT = r"""
import ctypes
from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime import cpu
from pytest_gpuenv.runtime.cpu import protocol as P, server as S
_, binary = _cpu.build_executor(_cpu.require_cxx())
exe = S.load_bytes(binary, "gpuenv-cpu-executor", global_symbols=True)
S.check_abi(exe)
S.bind(exe)
arena = ctypes.create_string_buffer(P.DATA_OFF + 4096)
base, size = ctypes.addressof(arena), len(arena)
report, workers = P.Report(), (P.Worker * 1)()

def run(payload, pos=P.LAUNCH.size):
    return exe.gpuenv_server_launch(payload, len(payload), pos, base, ctypes.addressof(report), base + P.OUT_OFF,
                                    P.PRINTF_CAPACITY, 0, 0, 0, 0, workers, 1)

VALUES = P.LAUNCH.size + P.SVAR.size + P.REGION.size  # where the first VALUE starts


def payload(where=0, value_off=None):
    pl = bytearray(cpu._launch_payload((1, 1, 1), (1, 1, 1), 0, size, 10.0, 32, 0, [(0, 16, 0)], [(1, 64, False, 0)],
                                       {0: where}, [ctypes.c_void_p(1), ctypes.c_int32(7)], []))
    if value_off is not None:  # the pointer's arena offset, rewritten
        pl[VALUES + P.VALUE.size:VALUES + P.VALUE.size + 8] = value_off.to_bytes(8, "little")
    return bytes(pl)

good = payload()
print("cut", sorted({run(good[:n]) for n in range(len(good))}))
print("region past the arena", run(payload(where=size)))
print("pointer past the arena", run(payload(value_off=size + 1)))
print("section past the end", run(good, pos=len(good) + 1))
"""


@pytest.mark.skipif(_cpu.find_cxx() is None, reason="needs a C++ compiler")
def test_malformed_launch_requests_are_refused_before_the_launch() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.rsplit(" ", 1) if not line.startswith("cut") else ("cut", line[4:])
                 for line in out.stdout.strip().splitlines())
    assert lines == {"cut": "[-1]", "region past the arena": "-1", "pointer past the arena": "-1",
                     "section past the end": "-1"}
