"""What pytest and the CPU executor's child process (``runtime.cpu.server``) share: the ABI structs of
``src/include/gpuenv_cpu.h``, the request/response framing and the layout of the shared memory.

Standard library only: the child imports this file by path, not the package.

This file is the one declaration of every struct pytest and the executor share: the C structs
(``src/include/gpuenv_cpu.h``, ``src/protocol.h``) are checked against it field by field when the executor is
built, through the header ``python protocol.py`` writes (``layout_header``: the C side's constants, and a
``static_assert`` of each field's offset and size).

A request is ``HEAD`` (op, module handle, payload bytes) and its payload on the request pipe; the reply is
``REPLY`` (status, a number, payload bytes) and its payload on the reply pipe. Argument buffers, the
report and the device printf buffer live in one shared memfd (``ARENA``), mapped by both processes:

    [0, NOTE_BYTES)                          the child's death note (``Note``, written by death_note.cpp)
    [REPORT_OFF, REPORT_OFF + sizeof Report) the launch report
    [OUT_OFF, OUT_OFF + PRINTF_CAPACITY)     device printf output
    [DATA_OFF, ...)                          copies of the argument buffers, one span per group of
                                             overlapping buffers (the arena grows with ftruncate)
"""

from __future__ import annotations

import ctypes
import enum
import struct
import sys
from typing import Union

c_u32x3 = ctypes.c_uint32 * 3
PRINTF_CAPACITY = 1 << 20
NOTE_BYTES = 4096
REPORT_OFF = NOTE_BYTES
OUT_OFF = 16384
DATA_OFF = OUT_OFF + PRINTF_CAPACITY
SPAN_ALIGN = 256  # a buffer's copy keeps its address modulo this (vector loads stay aligned)
SPAN_GAP = 256  # at least this many unregistered bytes before each copy

OP_INIT, OP_LOAD, OP_LAUNCH, OP_READ, OP_WRITE = 1, 2, 3, 4, 5
ST_OK, ST_ERROR, ST_FORK, ST_THREAD, ST_MISSING, ST_STATE = 0, 1, 2, 3, 4, 5  # ST_STATE: the payload says what

HEAD = struct.Struct("<IIQ")  # op, module handle, payload bytes
REPLY = struct.Struct("<iQQ")  # status, value, payload bytes


class Part(struct.Struct):
    """A part of a request's payload: little-endian, no padding, its fields named (``pad`` for padding) as in
    the packed C struct that reads it (src/protocol.h)."""

    def __init__(self, *fields: tuple[str, str]) -> None:
        super().__init__("<" + "".join(code for _, code in fields))
        self.fields = fields


# launch: LAUNCH; then nwrites SYM_WRITE with name and bytes (module globals set before the launch), nreads
# SYM_READ with name (read after it: the reply's payload is each one's bytes after a SYM_SIZE), which the
# child's Python handles; then nvars SVAR, nglobals VAR, nregions REGION, nvalues VALUE with their bytes,
# which src/request.cpp (gpuenv_server_launch) reads
LAUNCH = Part(("grid", "3I"), ("block", "3I"), ("shared_bytes", "Q"), ("arena_bytes", "Q"), ("watchdog_s", "d"),
              ("warp_size", "i"), ("check", "i"), ("nvars", "i"), ("nregions", "i"), ("nvalues", "i"),
              ("nglobals", "i"), ("nwrites", "i"), ("nreads", "i"))  # check: the mode word (Mode, the worker cap)
SYM_WRITE = struct.Struct("<HI")  # name bytes, data bytes
SYM_READ = struct.Struct("<H")
SYM_SIZE = struct.Struct("<I")
VAR = Part(("off", "Q"), ("size", "Q"))  # offset in the globals section, bytes
# a static __shared__ variable or red zone: offset from the module's load address, bytes, the variable's
# number (-1: a red zone)
SVAR = Part(("off", "Q"), ("size", "Q"), ("index", "i"), ("pad", "4x"))


class Mode(enum.IntFlag):
    """How a launch runs: the low byte of LAUNCH's mode word, which src/request.cpp copies to
    ``gpuenv_launch_t.check`` (the enum of src/include/gpuenv_cpu.h: GPUENV_CHECK_ACCESS, GPUENV_LOCKSTEP,
    GPUENV_PARALLEL, GPUENV_COOPERATIVE). The bits from WORKERS_SHIFT up are a PARALLEL launch's worker cap."""

    CHECK = 1  # loads and stores are checked (races, bounds, uninitialised shared memory)
    LOCKSTEP = 2  # each wavefront's lanes run in lockstep, as on AMD hardware
    PARALLEL = 4  # blocks run on several worker threads, each on its own copy of the module (src/launch.cpp)
    COOPERATIVE = 8  # every block resident at once, for grid.sync() (src/coop.cpp)


WORKERS_SHIFT = 8  # mode word >> WORKERS_SHIFT: at most this many workers for a PARALLEL launch (0: one per core)
MAX_WORKERS = 64  # kMaxWorkers in src/executor_int.h
# an argument buffer: offset in the arena, bytes, read-only, parameter index
REGION = Part(("off", "Q"), ("size", "Q"), ("readonly", "i"), ("index", "i"))
# kind (VALUE_BYTES / VALUE_ARENA), bytes, alignment; then the bytes
VALUE = Part(("kind", "B"), ("pad", "3x"), ("size", "I"), ("align", "I"))
VALUE_BYTES, VALUE_ARENA = 0, 1  # VALUE_ARENA: a pointer, given as an 8-byte offset in the arena

# report kinds beyond gpuenv_cpu.h's enum (which goes on at 13): found by the parent when the child process ended
KIND_EXIT, KIND_PROCESS = 11, 12


class Region(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64), ("readonly", ctypes.c_int32),
                ("index", ctypes.c_int32)]


class Report(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("is_write", ctypes.c_int32), ("size", ctypes.c_int32),
                ("region_kind", ctypes.c_int32), ("region_index", ctypes.c_int32), ("other_thread", ctypes.c_int32),
                ("other_is_write", ctypes.c_int32), ("pad", ctypes.c_int32), ("offset", ctypes.c_int64),
                ("addr", ctypes.c_uint64), ("pc", ctypes.c_uint64), ("other_pc", ctypes.c_uint64),
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
    """``gpuenv_note_t`` (src/protocol.h, written by src/death_note.cpp): what the child knew when it ended."""

    _fields_ = [("kind", ctypes.c_int32), ("value", ctypes.c_int32), ("in_launch", ctypes.c_int32),
                ("nframes", ctypes.c_int32), ("forks", ctypes.c_int32), ("kmask", ctypes.c_int32),
                ("block", c_u32x3), ("thread", c_u32x3), ("addr", ctypes.c_uint64),
                ("pcs", ctypes.c_uint64 * NOTE_FRAMES), ("bases", ctypes.c_uint64 * NOTE_FRAMES)]


#: the C struct (src/include/gpuenv_cpu.h, src/protocol.h) of each declaration above, by its name here
C_STRUCTS = {"LaunchDesc": "gpuenv_launch_t", "Report": "gpuenv_report_t", "Region": "gpuenv_region_t",
             "Worker": "gpuenv_worker_t", "Note": "gpuenv_note_t", "LAUNCH": "launch_head_t", "SVAR": "svar_t",
             "VAR": "var_t", "REGION": "region_in_t", "VALUE": "value_t"}
#: the constants the C side takes from here (as PROTOCOL_<name>)
C_CONSTANTS = ("NOTE_FRAMES", "NOTE_EXIT", "NOTE_QUICK_EXIT", "NOTE_SIGNAL", "NOTE_STUCK", "VALUE_BYTES", "VALUE_ARENA")


def fields(decl: Union[type[ctypes.Structure], Part]) -> list[tuple[str, int, int]]:
    """(name, offset, bytes) of each field of a struct declared here."""
    if isinstance(decl, Part):
        out, at = [], 0
        for name, code in decl.fields:
            size = struct.calcsize("<" + code)
            out.append((name, at, size))
            at += size
        return out
    return [(f[0], getattr(decl, f[0]).offset, getattr(decl, f[0]).size) for f in decl._fields_]


def layout_header() -> str:
    """The C header the executor's build includes (src/protocol.h): the constants, and GPUENV_CHECK_LAYOUT, a
    ``static_assert`` of each field's offset and size and of each struct's size."""
    lines = ["// Generated from pytest_gpuenv/runtime/cpu/protocol.py (python protocol.py): edit that file, not this.",
             "#pragma once", "#include <stddef.h>"]
    lines += [f"#define PROTOCOL_{name} {globals()[name]}" for name in C_CONSTANTS]
    lines.append("#define GPUENV_CHECK_FIELD(T, f, off, size, what) \\\n"
                 "    static_assert(offsetof(T, f) == off && sizeof(T::f) == size, what \" in protocol.py\")")
    checks = []
    for py, c_name in C_STRUCTS.items():
        decl = globals()[py]
        for name, off, size in fields(decl):
            checks.append(f"GPUENV_CHECK_FIELD({c_name}, {name}, {off}, {size}, "
                          f"\"{c_name}.{name}: offset {off}, {size} bytes, as {py}.{name}\")")
        total = decl.size if isinstance(decl, Part) else ctypes.sizeof(decl)
        checks.append(f"static_assert(sizeof({c_name}) == {total}, \"{c_name}: {total} bytes, as {py} in protocol.py\")")
    lines.append("#define GPUENV_CHECK_LAYOUT \\\n    " + "; \\\n    ".join(checks))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # the executor's standalone build (src/Makefile): the header, to stdout
    sys.stdout.write(layout_header())
