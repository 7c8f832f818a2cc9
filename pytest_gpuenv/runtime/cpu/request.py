"""A launch request: what ``CpuRuntime.launch`` is asked to run, and the bytes it becomes on the request pipe
(``protocol.LAUNCH`` and its sections, which the child's server.py and src/server.cpp's
``gpuenv_server_launch`` read).

The parts that never change between launches of one kernel (``KernelLayout``) are computed once, when
the kernel is loaded; each launch adds its geometry, its arguments, its mode and the module globals it
carries (``ModuleState``).
"""

from __future__ import annotations

import ctypes
from typing import Any, Mapping, NamedTuple, Sequence

from pytest_gpuenv.runtime.cpu import protocol
from pytest_gpuenv.runtime.cpu.protocol import Mode

__all__ = ["Arguments", "Buffer", "Geometry", "KernelLayout", "LaunchRequest", "ModuleState", "launch_payload"]


class KernelLayout(NamedTuple):
    """What every launch of one kernel sends alike."""

    warp_size: int
    #: each static ``__shared__`` variable and red zone: (offset from the module's load address, bytes, the
    #: variable's number; -1: a red zone), by offset
    shared: tuple[tuple[int, int, int], ...] = ()
    #: (offset in the globals section, bytes) of each red-zoned ``__device__`` variable (parameter index -1 - i
    #: in a report)
    device_globals: tuple[tuple[int, int], ...] = ()
    #: each parameter's alignment, where it may exceed its ctypes type's (a double4 or __align__(32) struct: 32)
    aligns: tuple[int, ...] = ()


class Geometry(NamedTuple):
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0  # bytes of dynamic shared memory


class Buffer(NamedTuple):
    """An argument's host buffer: its bytes are copied into the arena before the launch (and back after it
    unless read-only), and the checks bound its accesses."""

    address: int
    size: int
    readonly: bool
    param: int  # the parameter's index


class Arguments(NamedTuple):
    values: Sequence[Any]  # ctypes instances in parameter order (pointers as ``c_void_p``)
    buffers: Sequence[Buffer] = ()


class ModuleState(NamedTuple):
    """The module globals a launch carries: no round trips of their own."""

    writes: Sequence[tuple[str, bytes]] = ()  # (symbol, bytes) set just before the launch
    reads: Sequence[str] = ()  # symbols whose bytes come back in ``LaunchResult.symbols``


NO_STATE = ModuleState()


class LaunchRequest(NamedTuple):
    layout: KernelLayout
    geometry: Geometry
    arguments: Arguments
    watchdog_s: float  # the seconds the launch may run
    mode: Mode = Mode(0)
    workers: int = 0  # a PARALLEL launch's worker threads at most (0: one per core)
    state: ModuleState = NO_STATE


def launch_payload(request: LaunchRequest, arena_bytes: int, where: Mapping[int, int]) -> bytes:
    """The request's bytes; ``where``: each buffer's offset (by position) in the arena's data, of ``arena_bytes``."""
    layout, (grid, block, shared_mem), (values, buffers), state = (request.layout, request.geometry,
                                                                   request.arguments, request.state)
    word = int(request.mode) | request.workers << protocol.WORKERS_SHIFT  # the mode word: the only place it is packed
    parts = [protocol.LAUNCH.pack(*grid, *block, shared_mem, arena_bytes, request.watchdog_s, layout.warp_size, word,
                           len(layout.shared), len(buffers), len(values), len(layout.device_globals),
                           len(state.writes), len(state.reads))]
    for name, data in state.writes:
        raw = name.encode()
        parts += (protocol.SYM_WRITE.pack(len(raw), len(data)), raw, bytes(data))
    for name in state.reads:
        raw = name.encode()
        parts += (protocol.SYM_READ.pack(len(raw)), raw)
    for o, s, i in layout.shared:
        parts.append(protocol.SVAR.pack(o, s, i))
    for o, s in layout.device_globals:
        parts.append(protocol.VAR.pack(o, s))
    by_param: dict[int, int] = {}
    for i, (_, size, readonly, param) in enumerate(buffers):
        by_param[param] = at = protocol.DATA_OFF + where[i]
        parts.append(protocol.REGION.pack(at, size, readonly, param))
    aligns = layout.aligns
    for i, v in enumerate(values):
        arena = by_param.get(i)
        if arena is not None and isinstance(v, ctypes.c_void_p):
            parts += (_ARENA_VALUE, arena.to_bytes(8, "little"))
        else:
            raw = bytes(v)
            align = max(ctypes.alignment(v), aligns[i] if i < len(aligns) else 0)
            parts += (protocol.VALUE.pack(protocol.VALUE_BYTES, len(raw), align), raw)
    return b"".join(parts)


_ARENA_VALUE = protocol.VALUE.pack(protocol.VALUE_ARENA, 8, 8)  # a pointer argument: its 8-byte offset in the arena follows
