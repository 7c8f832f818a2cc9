"""A host's GPUs and its xdist workers: which host a process runs on, how a host's GPUs are split among
its workers (``plan_assignment``, ``visible_value``, ``narrow``), and the seats they claim there.

**What "the same host" means.** A host is a set of GPUs seen the same way: the same machine (host
name and, on Linux, the kernel's boot id), the same root the detection reads (``--gpuenv-root`` or
``GPUENV_ROOT``; ``/`` by default) and the same visible-devices masks (``CUDA_VISIBLE_DEVICES``,
``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL``). Two processes with the
same ``Host.key`` number the same GPUs the same way, so a position in one's device list is the same GPU
in the other's. Two popen gateways with different ``GPUENV_ROOT`` are two hosts (simulated machines);
so are two gateways on one machine with different masks (``--tx 2*popen --tx
2*popen//env:CUDA_VISIBLE_DEVICES=1``): each hands out its own list, and the per-GPU perf lock (keyed
by UUID) still keeps measurements on a GPU that both lists name apart.

``Host.inputs`` goes further: the key plus the interpreter, the gpuenv options that change detection
and every environment variable detection or a GPU runtime reads (the ``_INPUT_PREFIXES`` and
``_INPUT_NAMES``). An xdist worker whose inputs equal its controller's would detect exactly what the
controller detected, so it takes the controller's model and GPU assignment; any other worker detects
on its own host.

**Seats.** A worker that chooses its own GPUs claims a seat on each: an OS file lock (filelock, so a
killed worker's seats are free again) named ``gpu<position>.<seat>.lock`` in a directory per host key
under the GPU lock directory (``base.lock.lock_dir``: ``$GPUENV_LOCK_DIR`` or a per-user temp dir).
It takes its preferred positions while they hold fewer workers than its plan puts there, else the
least-loaded positions; workers the controller assigned hold seats on their positions too, so that
other gateways on the same host see them.

**Assignment** indexes into the visible set the user already chose: with ``CUDA_VISIBLE_DEVICES=2,3``
a worker gets ``2`` or ``3``, never a GPU outside the list. On AMD the worker keeps
``ROCR_VISIBLE_DEVICES`` and sets ``HIP_VISIBLE_DEVICES`` (which HIP reads before
``CUDA_VISIBLE_DEVICES``) to its GPUs' indices in what ROCr surfaces (``detect.visible.amd_worker_masks``), so
``CUDA_VISIBLE_DEVICES=2,3 pytest -n 2`` on a 4-GPU AMD machine gives its workers physical GPUs 2 and 3.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from typing import TYPE_CHECKING, NamedTuple, Optional

import pytest

from pytest_gpuenv.session.state import host_name
from pytest_gpuenv.detect.visible import MASK_VARS, amd_worker_masks
from pytest_gpuenv.base.model import Device, GpuEnv

if TYPE_CHECKING:  # pragma: no cover
    import filelock  # imported where a seat is claimed: every run names its host, few claim seats

#: variables that can change what detection (or a GPU runtime it probes) sees: these prefixes ...
_INPUT_PREFIXES = ("AMD_", "CUDA_", "GPU_", "GPUENV_", "HIP_", "HSA_", "NVIDIA_", "PYTORCH_", "ROCM_", "ROCR_",
                   "TORCH_", "WSL_")
#: ... and these names
_INPUT_NAMES = ("PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "SystemRoot", "SYSTEMROOT")
#: a seat level no worker should ever reach (a bound on the search, not a limit on sharing)
_MAX_SEATS = 64


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8", errors="replace") as f:
            return f.read(64).strip()
    except OSError:
        return ""


class Host(NamedTuple):
    """This process's host: ``name`` for people, ``key`` for "the same GPUs", ``inputs`` for "the same
    detection" (digests, see the module docstring)."""

    name: str
    key: str
    inputs: str

    def __repr__(self) -> str:  # the digests say nothing to a person
        return f"Host(name={self.name!r})"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key, "inputs": self.inputs}


def here(root: Optional[str], backend: str = "auto", probe: str = "auto") -> Host:
    """The host of this process as its environment stands now (call it before pinning GPUs)."""
    hostname = socket.gethostname() or "localhost"
    root = root or "/"
    masks = {k: os.environ[k] for k in MASK_VARS if k in os.environ}
    key_of = json.dumps([hostname, _boot_id(), root, masks], sort_keys=True)
    env = {k: v for k, v in os.environ.items() if k.startswith(_INPUT_PREFIXES) or k in _INPUT_NAMES}
    inputs_of = json.dumps([sys.executable, backend, probe, env], sort_keys=True)
    key = _digest(key_of)
    return Host(host_name(root), key, _digest(key + inputs_of))


class Seats:
    """The GPU positions a worker holds, with the seat locks it keeps until ``release``."""

    def __init__(self, positions: list[int], shared: int = 1, locks: Optional[list[filelock.BaseFileLock]] = None,
                 error: Optional[str] = None) -> None:
        self.positions = positions
        #: how many workers use the most shared of them, as far as known at claim time
        self.shared = shared
        self.locks: list[filelock.BaseFileLock] = locks if locks is not None else []
        #: why no seat could be recorded (the lock directory is unusable); the positions stand anyway
        self.error = error

    def release(self) -> None:
        for lock in self.locks:
            lock.release(force=True)
        self.locks.clear()


def _seat_dir(host_key: str) -> str:
    from pytest_gpuenv.base.lock import lock_dir

    path = os.path.join(lock_dir(), "hosts", host_key)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _take(directory: str, position: int, seat: int) -> Optional[filelock.BaseFileLock]:
    import filelock

    lock = filelock.FileLock(os.path.join(directory, f"gpu{position}.{seat}.lock"), thread_local=False, mode=0o600)
    try:
        lock.acquire(timeout=0)
    except (filelock.Timeout, OSError):
        return None
    return lock


def _first_free(directory: str, position: int, seats: range) -> Optional[tuple[int, filelock.BaseFileLock]]:
    for seat in seats:
        lock = _take(directory, position, seat)
        if lock is not None:
            return seat, lock
    return None


def claim(host_key: str, n_positions: int, preferred: list[int], load: dict[int, int], forced: bool = False) -> Seats:
    """Seats on ``len(preferred)`` of the host's ``n_positions`` GPUs.

    ``load[p]``: how many workers the plan puts on position ``p``. Each preferred position is taken
    while fewer than that many hold it; the rest come from the least-loaded positions (lowest first).
    ``forced``: the positions are given (the controller assigned them); seats only record them.
    """
    planned = max([load.get(p, 1) for p in preferred] or [1])
    try:
        directory = _seat_dir(host_key)
    except (OSError, RuntimeError) as exc:
        return Seats(list(preferred), planned, error=str(exc))
    held: dict[int, tuple[int, filelock.BaseFileLock]] = {}
    for p in preferred:
        got = _first_free(directory, p, range(_MAX_SEATS if forced else max(1, load.get(p, 1))))
        if got is not None:
            held[p] = got
    if forced:
        return Seats(list(preferred), planned, [lk for _s, lk in held.values()])
    mine = [p for p in preferred if p in held]
    extra = _least_loaded(directory, n_positions, held, len(preferred))
    positions = mine + extra
    positions += [p for p in preferred if p not in positions][: len(preferred) - len(positions)]
    shared = max([load.get(p, 1) for p in mine] + [held[p][0] + 1 for p in extra] or [1])
    return Seats(positions, shared, [lk for _s, lk in held.values()])


def _least_loaded(directory: str, n_positions: int, held: dict[int, tuple[int, filelock.BaseFileLock]],
                  need: int) -> list[int]:
    """Add seats to ``held`` until it has ``need`` positions: the lowest free seat level first, then the
    lowest position. Returns the positions added, in order."""
    added: list[int] = []
    for level in range(_MAX_SEATS):
        for p in range(n_positions):
            if len(held) >= need:
                return added
            if p not in held:
                lock = _take(directory, p, level)
                if lock is not None:
                    held[p] = (level, lock)
                    added.append(p)
    return added


def _split(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def plan_assignment(env: GpuEnv, n_workers: int, worker_gpus: str, share: bool = False) -> list[list[int]]:
    """For each worker, the positions (in ``env.devices``) of the GPUs it gets.

    ``auto``: with at least as many GPUs as workers each worker gets ``len // n`` of its own;
    with fewer, workers share them round-robin (8 workers on 2 GPUs: four on each).
    ``N``: each worker gets N consecutive GPUs, wrapping round. ``off``: no assignment.
    ``share`` (``--dist gpu``, whose scheduler counts each test's claims per GPU) with ``auto``: every worker
    sees every GPU, starting from its own and wrapping round (worker 1 of 2 on 2 GPUs: ``[1, 0]``); the first
    GPUs are spread as ``auto`` spreads them (8 workers on 2 GPUs: four start at each; 2 workers on 8 GPUs: at
    0 and 4). A one-GPU test runs on the worker's first GPU, a test of k GPUs on its first k.
    Raises ``pytest.UsageError`` when the request cannot be satisfied.
    """
    devs = env.usable_devices
    if worker_gpus == "off" or n_workers <= 0 or not devs:
        return []
    n = len(devs)
    if share and worker_gpus == "auto":
        starts = [w * n // n_workers if n_workers < n else w % n for w in range(n_workers)]
        return [[(start + j) % n for j in range(n)] for start in starts]
    if worker_gpus == "auto":
        per = max(1, n // n_workers)
    else:
        per = int(worker_gpus)
        if per > n:
            raise pytest.UsageError(
                f"gpuenv: --gpuenv-worker-gpus={per} cannot be satisfied: only {n} GPU(s) visible "
                f"({env.describe_devices(devs)}); use a number <= {n}, 'auto', or 'off'"
            )
    out = []
    for w in range(n_workers):
        start = (w * per) % n
        out.append([(start + j) % n for j in range(per)])
    return out


def visible_value(env: GpuEnv, positions: list[int]) -> dict[str, str]:
    """The variables a worker sets so that its runtime sees exactly the GPUs at ``positions``."""
    devs = [env.usable_devices[p] for p in positions]
    if not devs:
        return {}
    vendor = devs[0].vendor
    vis = env.visible
    if vendor == "nvidia":
        user = vis.get("CUDA_VISIBLE_DEVICES")
        if user is not None and user.strip():
            tokens = _split(user)
            picked = [tokens[d.index] if d.index < len(tokens) else str(d.physical_index) for d in devs]
        else:
            picked = [str(d.physical_index if d.physical_index is not None else d.index) for d in devs]
        return {"CUDA_VISIBLE_DEVICES": ",".join(picked)}
    # AMD: composed with the masks in force, as ROCr and HIP read them
    return amd_worker_masks([*env.devices, *env.hidden_devices], vis, env.platform, devs,
                            env.rocm.get("rocr_dropped") or ())


def narrow(env: GpuEnv, positions: list[int]) -> GpuEnv:
    """The worker's model: its GPUs, renumbered from 0 as its runtime will number them."""
    data = env.to_dict()
    usable = env.usable_devices
    mine = [usable[p] for p in positions]
    others = [d for d in env.devices if d not in mine]
    new = GpuEnv.from_dict(data)
    new.devices = [Device(**{**d.to_dict(), "index": i}) for i, d in enumerate(mine)]
    new.hidden_devices = list(env.hidden_devices) + [Device(**d.to_dict()) for d in others]
    return new
