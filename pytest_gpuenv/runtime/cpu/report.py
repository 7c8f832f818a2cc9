"""Turn the CPU executor's report into an exception (or warnings) whose message names everything.

The executor gives module-relative code addresses (``@pc:1a2b@`` in its text); they become
``file:line`` through ``addr2line`` on the kernel module's bytes (written to a private temporary file,
only when there is something to report). Arguments and shared variables are named from the kernel's
parameter list and the module's symbol table.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from pytest_gpuenv.runtime.cpu import INCLUDE_DIR, NO_THREAD, Report, errors, protocol

_KINDS = {1: (errors.KernelRaceError, "data race on shared memory"), 2: (errors.KernelBarrierError, "divergent barrier"),
          3: (errors.KernelBoundsError, "out-of-bounds access"), 4: (errors.KernelUninitializedError, "uninitialised read"),
          5: (errors.KernelAssertError, "device assertion"), 6: (errors.KernelStackOverflowError, "stack overflow"),
          7: (errors.KernelWatchdogError, "watchdog"), 8: (errors.KernelWarpError, "inactive lane read"),
          9: (errors.KernelFaultError, "fault"), 10: (errors.KernelFaultError, "launch refused"),
          protocol.KIND_EXIT: (errors.KernelExitError, "process exit"), protocol.KIND_PROCESS: (errors.KernelProcessError, "fork or thread"),
          13: (errors.KernelWarpSyncError, "reliance on wavefront lockstep"), 14: (errors.KernelBarrierError, "grid barrier"),
          15: (errors.KernelWarpError, "warp sync mask")}
_PC = re.compile(r"@pc:([0-9a-f]+)(?::L(\d+))?@")


@dataclass
class Context:
    """What the message needs beyond the report: the kernel, its module and its launch."""

    kernel: str
    binary: bytes
    params: Sequence[Any]
    shared_vars: Sequence[tuple[str, int, int]]  # (name, offset, size)
    dyn_names: Sequence[str]
    shared_mem: int
    regions: dict[int, int] = field(default_factory=dict)  # param index -> bytes
    device_globals: Sequence[tuple[str, int, int]] = ()  # (name, offset, size), parameter index -1 - i
    addr2line: Optional[str] = None
    source: Optional[str] = None
    warp_size: int = 64
    block_dims: tuple[int, int, int] = (1, 1, 1)


def symbolize(ctx: Context, pcs: Sequence[int], inlined: bool = False) -> dict[int, str]:
    """pc -> 'file:line' (the first frame outside the executor's headers), or '' when unknown; ``inlined``: an
    access's, with the lines of the calls that inlined its function ('k.hip:6 (inlined into k.hip:30)')."""
    pcs = [p for p in dict.fromkeys(pcs) if p]
    if not pcs or not ctx.addr2line:
        return {}
    with tempfile.TemporaryDirectory(prefix="gpuenv-sym-") as d:
        path = os.path.join(d, "kernel.so")
        with open(path, "wb") as f:
            f.write(ctx.binary)
        out: dict[int, str] = {}
        for pc in pcs:
            try:
                res = subprocess.run([ctx.addr2line, "-i", "-e", path, hex(max(pc - 1, 0))], capture_output=True,
                                     text=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                return out
            frames = [ln.strip() for ln in res.stdout.splitlines() if ln.strip() and not ln.startswith("??")]
            frames = [re.sub(r" \(discriminator \d+\)$", "", f) for f in frames]
            frames = [re.sub(r"^.*/(<source>\.hip:)", r"\1", f) for f in frames]  # inline source
            mine = [f for f in frames if not f.startswith(INCLUDE_DIR) and not f.startswith("<gpuenv>")]
            # g++ gives the store of an inlined helper's result the line of the helper's return: the line of
            # its call is the access's
            calls = [f for f in mine[1:] if "<gpuenv>" not in f] if inlined else []
            out[pc] = (mine or frames or [""])[0] + (f" (inlined into {', '.join(calls)})" if calls else "")
    return out


def _subst(text: str, names: dict[int, str]) -> str:
    """Replace the ``@pc:HEX[:Lline]@`` tokens; the line the executor knows wins over an unknown one."""

    def one(m: re.Match[str]) -> str:
        loc = names.get(int(m.group(1), 16)) or ""
        if m.group(2) and (not loc or loc.endswith((":?", ":0"))):
            return f"{loc.rsplit(':', 1)[0] if loc else '<kernel>'}:{m.group(2)}"
        return loc or f"<pc 0x{m.group(1)}>"

    return _PC.sub(one, text)


def _in_elements(off: int, es: int, n: Optional[int]) -> str:
    """'element 1000 (byte 4 of it); the buffer has 1000 elements of 16 bytes' for an offset in a buffer of n
    bytes, in elements of es bytes; in bytes when es is 0 (a type whose size is unknown here)."""
    if not es:
        return f"byte {off}" + (f"; the buffer has {n} bytes" if n is not None else "")
    part = f" (byte {off % es} of it)" if off % es else ""
    has = f"; the buffer has {n // es} elements of {es} bytes" if n is not None else ""
    return f"element {off // es}{part}{has}"


def _where(ctx: Context, r: Report) -> str:
    """'argument 'out' (float* out) element 1000 (the buffer has 1000 elements)' and the like."""
    rk, i, off, size = r.region_kind, r.region_index, r.offset, r.size
    if rk == 1 and i < 0 and -1 - i < len(ctx.device_globals):
        name, _, vsize = ctx.device_globals[-1 - i]
        es = max(size, 1)
        return (f"__device__ variable {name!r} element {off // es} (byte {off}; it has {vsize} bytes, and the access "
                "lands in the red zone between it and its neighbouring globals)")
    if rk == 1 and 0 <= i < len(ctx.params):
        p = ctx.params[i]  # counted in the declared type's elements, whatever the width of the access
        return f"argument {p.name!r} ({p.decl}) {_in_elements(off, p.element_bytes, ctx.regions.get(i))}"
    if rk == 2 and 0 <= i < len(ctx.shared_vars):
        name, _, vsize = ctx.shared_vars[i]
        return (f"__shared__ variable {name!r} element {off // max(size, 1)} (byte {off}; it has {vsize} bytes, "
                f"{vsize // max(size, 1)} elements of {size} bytes)")
    if rk == 2:
        return f"__shared__ memory at byte {off} of the static shared section"
    if rk == 3:
        names = ", ".join(repr(n) for n in ctx.dyn_names) or "HIP_DYNAMIC_SHARED"
        return (f"dynamic shared memory ({names}) element {off // max(size, 1)} (byte {off}; the launch passed "
                f"shared_mem={ctx.shared_mem} bytes)")
    return f"address 0x{r.addr:x}, which is in no argument buffer, shared variable or the thread's stack"


def _other(ctx: Context, r: Report) -> str:
    """A race's other access: 'the write of thread (3,0,0) (linear id 3) at k.hip:12' and the like."""
    at = f" at @pc:{r.other_pc:x}@" if r.other_pc else ""
    if r.other_thread < 0:  # several readers: the site is the last one's
        return f"reads by several other threads (the last{at})" if at else "several other threads"
    bx, by, _ = ctx.block_dims
    t = r.other_thread
    coords = f"({t % bx},{t // bx % by},{t // (bx * by)})"
    return f"the {'write' if r.other_is_write else 'read'} of thread {coords} (linear id {t}){at}"


def _detail(ctx: Context, r: Report) -> str:
    rw = "write" if r.is_write else "read"
    if r.kind == 3 and r.other_thread == -3:
        return f"write through a const argument: {_where(ctx, r)}"
    if r.kind == 3:
        return (f"{rw} of {r.size} bytes out of bounds: {_where(ctx, r)} (the launch stopped before the access; "
                "memory is intact)")
    if r.kind == 1:
        return (f"{rw} of {_where(ctx, r)} conflicts with {_other(ctx, r)} in the same barrier interval "
                "(no __syncthreads() between the two accesses)")
    if r.kind == 13:
        bx, by, _ = ctx.block_dims
        me = r.thread[0] + bx * (r.thread[1] + by * r.thread[2])
        wave = f" (wave {me // ctx.warp_size} of the block)"
        return (f"{rw} of {_where(ctx, r)} conflicts with {_other(ctx, r)} of the same wavefront{wave} with no "
                "barrier or warp operation between: the code relies on the wavefront's lanes running in lockstep, "
                "which AMD GPUs give and NVIDIA GPUs since Volta do not (independent thread scheduling). Add "
                "__syncthreads() or __syncwarp() between the accesses, or pass lockstep=True to run it as AMD "
                "hardware does")
    if r.kind == 4:
        return (f"read of {_where(ctx, r)}, which no thread of this block has written (shared memory is "
                "uninitialised at the start of every block)")
    return str(r.text.decode("utf-8", "replace"))


def to_error(ctx: Context, r: Report) -> Exception:
    """The exception for a failed launch."""
    cls, title = _KINDS.get(r.kind, (errors.KernelFaultError, "launch failed"))
    text = _detail(ctx, r) if r.kind in (1, 3, 4, 13) else r.text.decode("utf-8", "replace")
    exact = r.kind in (6, 7, 9) and r.pc  # a fault's own pc, not a return address: symbolize() takes pc - 1
    main_pc = r.pc + 1 if exact else r.pc
    pcs = [int(m.group(1), 16) for m in _PC.finditer(text)] + [main_pc]
    names = symbolize(ctx, pcs, inlined=r.kind in (1, 3, 4, 13))
    text = _subst(text, names)
    first = _PC.search(r.text.decode("utf-8", "replace")) if r.kind == 2 else None
    loc = _subst(first.group(0), names) if first else names.get(main_pc, "")
    loc = loc or (f"<pc 0x{r.pc:x}>" if r.pc else ctx.source or "<unknown>")
    block, thread = tuple(r.block), tuple(r.thread)
    who = "" if r.other_thread == NO_THREAD else (f", block ({block[0]},{block[1]},{block[2]}), thread "
                                                  f"({thread[0]},{thread[1]},{thread[2]})")
    msg = f"{title} in kernel {ctx.kernel!r} at {loc}{who}: {text}"
    site = loc.split(" (inlined into ", 1)[0]
    file, line = (site.rsplit(":", 1) + [""])[:2] if ":" in site else (None, "")
    return cls(msg, code=title, file=file, line=int(line) if line.isdigit() else None, block=block, thread=thread)


#: the tag of a warning line that is a barrier which threads that returned never reached (executor_int.h)
BARRIER_TAG = "[barrier] "


def warnings_of(ctx: Context, r: Report) -> list[errors.KernelWarning]:
    """The launch's warnings, each as the KernelWarning subclass it is."""
    text = r.warnings.decode("utf-8", "replace")
    if not text.strip():
        return []
    text = _subst(text, symbolize(ctx, [int(m.group(1), 16) for m in _PC.finditer(text)]))
    out: list[errors.KernelWarning] = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        cls = errors.KernelBarrierWarning if ln.startswith(BARRIER_TAG) else errors.KernelWarning
        out.append(cls(f"kernel {ctx.kernel!r}: {ln.removeprefix(BARRIER_TAG)}"))
    return out
