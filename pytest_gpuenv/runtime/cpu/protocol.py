"""What pytest and the CPU executor's child process (``runtime.cpu.server``) share: the ABI structs of
``src/include/gpuenv_cpu.h``, the request/response framing and the layout of the shared memory.

Standard library only: the child imports this file by path, not the package.

A request is ``HEAD`` (op, module handle, payload bytes) and its payload on the request pipe; the reply is
``REPLY`` (status, a number, payload bytes) and its payload on the reply pipe. Argument buffers, the
report and the device printf buffer live in one shared memfd (``ARENA``), mapped by both processes:

    [0, NOTE_BYTES)                          the child's death note (``Note``, written by server.cpp)
    [REPORT_OFF, REPORT_OFF + sizeof Report) the launch report
    [OUT_OFF, OUT_OFF + PRINTF_CAPACITY)     device printf output
    [DATA_OFF, ...)                          copies of the argument buffers, one span per group of
                                             overlapping buffers (the arena grows with ftruncate)
"""

from __future__ import annotations

import ctypes
import enum
import struct

c_u32x3 = ctypes.c_uint32 * 3
PRINTF_CAPACITY = 1 << 20
NOTE_BYTES = 4096
REPORT_OFF = NOTE_BYTES
OUT_OFF = 16384
DATA_OFF = OUT_OFF + PRINTF_CAPACITY
SPAN_ALIGN = 256  # a buffer's copy keeps its address modulo this (vector loads stay aligned)
SPAN_GAP = 256  # at least this many unregistered bytes before each copy

OP_INIT, OP_LOAD, OP_LAUNCH, OP_READ, OP_WRITE = 1, 2, 3, 4, 5
ST_OK, ST_ERROR, ST_FORK, ST_THREAD, ST_MISSING = 0, 1, 2, 3, 4

HEAD = struct.Struct("<IIQ")  # op, module handle, payload bytes
REPLY = struct.Struct("<iQQ")  # status, value, payload bytes
# launch: grid[3], block[3], shared bytes, arena bytes, watchdog s, warp, mode word, nvars, nregions, nvalues,
# nglobals, nwrites, nreads; then nwrites SYM_WRITE with name and bytes (module globals set before the
# launch), nreads SYM_READ with name (read after it: the reply's payload is each one's bytes after a
# SYM_SIZE), which the child's Python handles; then nvars SVAR, nglobals VAR, nregions REGION, nvalues VALUE
# with their bytes, which src/server.cpp (gpuenv_server_launch) reads: keep its structs in step
LAUNCH = struct.Struct("<6IQQdiiiiiiii")
SYM_WRITE = struct.Struct("<HI")  # name bytes, data bytes
SYM_READ = struct.Struct("<H")
SYM_SIZE = struct.Struct("<I")
VAR = struct.Struct("<QQ")  # offset in the globals section, bytes
# a static __shared__ variable or red zone: offset from the module's load address, bytes, the variable's
# number (-1: a red zone)
SVAR = struct.Struct("<QQi4x")


class Mode(enum.IntFlag):
    """How a launch runs: the low byte of LAUNCH's mode word, which src/server.cpp copies to
    ``gpuenv_launch_t.check`` (the enum of src/include/gpuenv_cpu.h: GPUENV_CHECK_ACCESS, GPUENV_LOCKSTEP,
    GPUENV_PARALLEL, GPUENV_COOPERATIVE). The bits from WORKERS_SHIFT up are a PARALLEL launch's worker cap."""

    CHECK = 1  # loads and stores are checked (races, bounds, uninitialised shared memory)
    LOCKSTEP = 2  # each wavefront's lanes run in lockstep, as on AMD hardware
    PARALLEL = 4  # blocks run on several worker threads, each on its own copy of the module (src/launch.cpp)
    COOPERATIVE = 8  # every block resident at once, for grid.sync() (src/coop.cpp)


WORKERS_SHIFT = 8  # mode word >> WORKERS_SHIFT: at most this many workers for a PARALLEL launch (0: one per core)
MAX_WORKERS = 64  # kMaxWorkers in src/executor_int.h
REGION = struct.Struct("<QQii")  # offset in the arena, bytes, read-only, parameter index
VALUE = struct.Struct("<BxxxII")  # kind (VALUE_BYTES / VALUE_ARENA), bytes, alignment; then the bytes
VALUE_BYTES, VALUE_ARENA = 0, 1  # VALUE_ARENA: a pointer, given as an 8-byte offset in the arena

# report kinds beyond gpuenv_cpu.h's enum (which goes on at 13): found by the parent when the child process ended
KIND_EXIT, KIND_PROCESS = 11, 12


class Region(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64), ("readonly", ctypes.c_int32),
                ("index", ctypes.c_int32)]


class Report(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("is_write", ctypes.c_int32), ("size", ctypes.c_int32),
                ("region_kind", ctypes.c_int32), ("region_index", ctypes.c_int32), ("other_thread", ctypes.c_int32),
                ("offset", ctypes.c_int64), ("addr", ctypes.c_uint64), ("pc", ctypes.c_uint64),
                ("block", c_u32x3), ("thread", c_u32x3), ("text", ctypes.c_char * 2048),
                ("warnings", ctypes.c_char * 2048)]


class Worker(ctypes.Structure):
    """A worker thread's copy of the kernel module: its entry and its ``gpuenv_state``."""

    _fields_ = [("entry", ctypes.c_void_p), ("state", ctypes.c_void_p)]


class LaunchDesc(ctypes.Structure):
    _fields_ = [("entry", ctypes.c_void_p), ("args", ctypes.c_void_p), ("grid", c_u32x3), ("block", c_u32x3),
                ("shared_bytes", ctypes.c_uint64), ("warp_size", ctypes.c_int32), ("check", ctypes.c_int32),
                ("shared_lo", ctypes.c_void_p), ("shared_hi", ctypes.c_void_p),
                ("regions", ctypes.POINTER(Region)), ("nregions", ctypes.c_int32), ("nvars", ctypes.c_int32),
                ("vars", ctypes.POINTER(Region)), ("watchdog_s", ctypes.c_double), ("out", ctypes.c_void_p),
                ("out_cap", ctypes.c_uint64), ("out_len", ctypes.c_uint64), ("nworkers", ctypes.c_int32),
                ("pad", ctypes.c_int32), ("workers", ctypes.POINTER(Worker))]


NOTE_EXIT, NOTE_QUICK_EXIT, NOTE_SIGNAL, NOTE_STUCK = 1, 2, 3, 4  # NOTE_STUCK: where SIGUSR2 found it
STUCK_SIGNAL = 12  # SIGUSR2: pytest asks a child past its watchdog where it is, then kills it
NOTE_FRAMES = 24


class Note(ctypes.Structure):
    """Mirrors ``gpuenv_note_t`` in src/server.cpp: what the child knew when it ended."""

    _fields_ = [("kind", ctypes.c_int32), ("value", ctypes.c_int32), ("in_launch", ctypes.c_int32),
                ("nframes", ctypes.c_int32), ("forks", ctypes.c_int32), ("kmask", ctypes.c_int32),
                ("block", c_u32x3), ("thread", c_u32x3), ("addr", ctypes.c_uint64),
                ("pcs", ctypes.c_uint64 * NOTE_FRAMES), ("bases", ctypes.c_uint64 * NOTE_FRAMES)]
