"""A launch request: pytest writes it (runtime/cpu/request.py's ``launch_payload``, from a ``LaunchRequest``
whose kernel layout was made once from the build's meta), and the executor's side (src/request.cpp:
gpuenv_server_launch) refuses one that is cut short or names memory outside the arena before anything runs.
Well-formed requests are what every CPU launch test sends."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys

import pytest

from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.rtc._cpu_kernel import CpuLayout
from pytest_gpuenv.runtime.cpu import protocol
from pytest_gpuenv.runtime.cpu.protocol import Mode
from pytest_gpuenv.runtime.cpu.request import (
    Arguments,
    Buffer,
    Geometry,
    KernelLayout,
    LaunchRequest,
    ModuleState,
    launch_payload,
)

# a subprocess: the executor is native code. Its workers' entry is 0: a request that reached the launch
# would crash the script, so every answer printed is the parse's own.
SCRIPT = r"""
import ctypes
from pytest_gpuenv.rtc import _cpu
from pytest_gpuenv.runtime.cpu import protocol as P, server as S
from pytest_gpuenv.runtime.cpu.request import Arguments, Buffer, Geometry, KernelLayout, LaunchRequest, launch_payload
_, binary = _cpu.build_executor(_cpu.require_cxx())
exe = S.load_bytes(binary, "gpuenv-cpu-executor", global_symbols=True)
S.bind(exe)
arena = ctypes.create_string_buffer(P.DATA_OFF + 4096)
base, size = ctypes.addressof(arena), len(arena)
report, workers = P.Report(), (P.Worker * 1)()

def run(payload, pos=P.LAUNCH.size):
    return exe.gpuenv_server_launch(payload, len(payload), pos, base, ctypes.addressof(report), base + P.OUT_OFF,
                                    P.PRINTF_CAPACITY, 0, 0, 0, 0, workers, 1)

VALUES = P.LAUNCH.size + P.SVAR.size + P.REGION.size  # where the first VALUE starts


def payload(where=0, value_off=None, grid=(1, 1, 1)):
    request = LaunchRequest(KernelLayout(32, shared=((0, 16, 0),)), Geometry(grid, (1, 1, 1)),
                            Arguments([ctypes.c_void_p(1), ctypes.c_int32(7)], [Buffer(1, 64, False, 0)]), 10.0)
    pl = bytearray(launch_payload(request, size, {0: where}))
    if value_off is not None:  # the pointer's arena offset, rewritten
        pl[VALUES + P.VALUE.size:VALUES + P.VALUE.size + 8] = value_off.to_bytes(8, "little")
    return bytes(pl)

good = payload()
print("cut", sorted({run(good[:n]) for n in range(len(good))}))
print("region past the arena", run(payload(where=size)))
print("pointer past the arena", run(payload(value_off=size + 1)))
print("section past the end", run(good, pos=len(good) + 1))
run(payload(grid=(2**30, 2**30, 16)))
print("grid of 2**64 blocks", report.kind, report.text.decode().replace(" ", "_"))
"""


@pytest.mark.skipif(_cpu.find_cxx() is None, reason="needs a C++ compiler")
def test_malformed_launch_requests_are_refused_before_the_launch() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.rsplit(" ", 1) if not line.startswith("cut") else ("cut", line[4:])
                 for line in out.stdout.strip().splitlines() if not line.startswith("grid"))
    assert lines == {"cut": "[-1]", "region past the arena": "-1", "pointer past the arena": "-1",
                     "section past the end": "-1"}
    # a grid whose block count wraps (pytest refuses it first: tests/test_cpu_exec.py) is refused, not run as 0 blocks
    grid = next(line for line in out.stdout.splitlines() if line.startswith("grid"))
    assert grid.split()[-2] == "10" and "does_not_fit_a_63-bit_count" in grid, grid  # 10: GPUENV_USAGE


def test_the_mode_flags_are_the_executor_header_s() -> None:
    header = os.path.join(os.path.dirname(protocol.__file__), "src", "include", "gpuenv_cpu.h")
    with open(header) as f:
        enum = dict(re.findall(r"GPUENV_(CHECK_ACCESS|LOCKSTEP|PARALLEL|COOPERATIVE) = (\d+)", f.read()))
    assert {name: int(v) for name, v in enum.items()} == {"CHECK_ACCESS": Mode.CHECK, "LOCKSTEP": Mode.LOCKSTEP,
                                                        "PARALLEL": Mode.PARALLEL, "COOPERATIVE": Mode.COOPERATIVE}


def test_a_request_packs_its_mode_word_and_sections() -> None:
    layout = KernelLayout(64, shared=((16, 8, -1), (32, 64, 0)), device_globals=((0, 4),), aligns=(0, 32))
    request = LaunchRequest(layout, Geometry((2, 1, 1), (64, 1, 1), 128),
                            Arguments([ctypes.c_void_p(4096), ctypes.c_int32(7)], [Buffer(4096, 8, True, 0)]), 2.5,
                            Mode.PARALLEL, 3, ModuleState([("g", b"\1\2")], ["g"]))
    data = launch_payload(request, 1 << 20, {0: 256})
    head = protocol.LAUNCH.unpack_from(data)
    assert head == (2, 1, 1, 64, 1, 1, 128, 1 << 20, 2.5, 64, 4 | 3 << 8, 2, 1, 2, 1, 1, 1)
    assert head[10] & 0xFF == Mode.PARALLEL and head[10] >> protocol.WORKERS_SHIFT == 3
    pos = protocol.LAUNCH.size + protocol.SYM_WRITE.size + 3 + protocol.SYM_READ.size + 1
    assert protocol.SVAR.unpack_from(data, pos) == (16, 8, -1)
    value = pos + 2 * protocol.SVAR.size + protocol.VAR.size + protocol.REGION.size + protocol.VALUE.size + 8
    assert protocol.VALUE.unpack_from(data, value) == (protocol.VALUE_BYTES, 4, 32)  # the parameter's alignment
    plain = launch_payload(request._replace(mode=Mode.CHECK | Mode.COOPERATIVE, workers=0), 1 << 20, {0: 256})
    assert protocol.LAUNCH.unpack_from(plain)[10] == 9


def test_the_layout_is_the_same_from_a_fresh_build_and_from_the_cache_s_json() -> None:
    meta = {"shared_vars": [("tile", 64, 256), ("flag", 16, 4)], "red_zones": [(0, 16), (320, 64)],
            "globals": [("counter", 0, 4)], "dyn_names": ["dyn"], "parallel": False, "compiler": "g++"}
    layout = CpuLayout.from_meta(meta)
    assert layout == CpuLayout.from_meta(json.loads(json.dumps(meta)))
    assert layout.shared_checks == ((0, 16, -1), (16, 4, 1), (64, 256, 0), (320, 64, -1))
    assert (layout.static_shared, layout.device_globals, layout.dyn_names) == (260, (("counter", 0, 4),), ("dyn",))
    assert CpuLayout.from_meta({}) == CpuLayout((), (), (), (), False)


def test_a_malformed_launch_request_fails_that_launch_and_the_next_works(tmp_path) -> None:
    """A launch request naming an arena larger than the shared one closed the child's arena before the new
    mapping failed: the child stayed alive and every later launch failed with "mmap closed or invalid". Now the
    bad request is answered with an error and the arena is kept."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel
    from pytest_gpuenv.runtime.cpu import protocol

    src = '#include <hip/hip_runtime.h>\nextern "C" __global__ void k(int* o) { o[0] += 1; }\n'
    k = compile_kernel(src, "k", arch="cpu", cache_dir=str(tmp_path))
    out = np.zeros(1, np.int32)
    k(1, 1, out)
    runtime, module = k._loaded  # the process's CPU runtime and this kernel's module in it
    child = runtime._child
    assert child is not None and module.handle in child.loaded
    # grid, block, no shared memory, an arena of 1 TiB, a 1 s watchdog; every count 0
    bad = protocol.LAUNCH.pack(1, 1, 1, 1, 1, 1, 0, 1 << 40, 1.0, *[0] * 8)
    status, _value, text = child.request(protocol.OP_LAUNCH, module.handle, bad, 30)
    assert status == protocol.ST_ERROR, (status, text)
    k(1, 1, out)  # the same child serves the next launch
    assert out[0] == 2 and runtime._child is child
    assert b"arena of 1099511627776 bytes; the shared arena has" in text, text


ENOMEM = r"""
import sys
import numpy as np
from pytest_gpuenv.rtc import compile_kernel
k = compile_kernel('#include <hip/hip_runtime.h>\nextern "C" __global__ void w(float* a) { a[threadIdx.x] += 1; }',
                   "w", arch="cpu", cache_dir=sys.argv[1])
small = np.zeros(4, np.float32)
k(1, 4, small)
big = np.zeros(1400 << 18, np.float32)  # 1400 MiB: the arena cannot grow to hold it under the limit
try:
    k(1, 4, big)
except MemoryError as exc:
    print("refused:", exc)
k(1, 4, small)
print("after:", small.tolist())
"""


@pytest.mark.skipif(_cpu.find_cxx() is None or sys.platform != "linux", reason="needs a C++ compiler and Linux")
def test_an_arena_that_cannot_grow_fails_that_launch_only(tmp_path) -> None:
    """The arena's old mapping was closed before the larger one failed (ENOMEM): the launch raised a raw OSError
    and the next launch of any kernel killed pytest with SIGSEGV."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2500 << 20, 2500 << 20))

    out = subprocess.run([sys.executable, "-c", ENOMEM, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         preexec_fn=limit)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "refused: the CPU executor's arena cannot grow to" in out.stdout and "after: [2.0, 2.0, 2.0, 2.0]" in out.stdout


DELETED_FOLDER = r"""
import os, shutil, sys, tempfile
import numpy as np
from pytest_gpuenv.rtc import compile_kernel
k = compile_kernel('#include <hip/hip_runtime.h>\nextern "C" __global__ void w(float* a) { a[threadIdx.x] += 1; }',
                   "w", arch="cpu", cache_dir=sys.argv[1])
here = tempfile.mkdtemp()
os.chdir(here)
a = np.zeros(4, np.float32)
k(1, 4, a)  # the executor's child starts in `here`
os.chdir("/")
shutil.rmtree(here)
k(1, 4, a)
k(1, 4, a)
print("after:", a.tolist())
"""


@pytest.mark.skipif(_cpu.find_cxx() is None, reason="needs a C++ compiler")
def test_a_working_folder_deleted_under_the_executor_is_no_change_of_state(tmp_path) -> None:
    """The child read its working folder with getcwd() after each launch; once the folder was deleted that
    failed, and every later launch raised a KeyError. Its identity (device, inode) is compared instead."""
    out = subprocess.run([sys.executable, "-c", DELETED_FOLDER, str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "after: [3.0, 3.0, 3.0, 3.0]" in out.stdout
