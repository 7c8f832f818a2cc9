"""NVML through nvidia-ml-py (``import pynvml``): device facts for detection, clocks and processes for perf.

NVML reads the driver's state and creates no CUDA context; nothing here changes clocks. nvidia-ml-py is a
dependency of the base install (a small pure-Python wheel: without it an NVIDIA GPU's arch and memory are
unknown and the markers that need them skip), imported lazily. Wherever it or the library is missing, or a
call fails, the answer is ``None`` (``[]`` for lists of foreign processes): nothing here raises.

- ``query(lib_path)``: driver version, newest CUDA the driver supports, and each device's name, UUID,
  memory and arch, between one ``nvmlInit``/``nvmlShutdown`` pair (detection, DETECTION.md T2);
  ``ask(lib_path)`` gives the same answer with why there is none.
- ``Monitor``: one device's SM clock, clock event reasons and compute processes, with NVML initialised
  once for the process and left so (perf), and which of those guards are off and why (``unavailable``,
  ``note``); ``driver_version()``; ``foreign_of``/``related_pids``/``foreign_pids`` (shared with ``runtime.amdsmi``).

pynvml keeps one library per process in the module global ``pynvml.nvmlLib`` and loads
``libnvidia-ml.so.1`` (``nvml.dll``) only while that is None. To read a given file (WSL 2's
``/usr/lib/wsl/lib/libnvidia-ml.so.1``, a test's stand-in), ``query`` swaps it in under pynvml's
``libLoadLock`` together with pynvml's cache of function pointers (they belong to the library) and
puts both back afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, Callable, NamedTuple, Optional

NVML_CLOCK_SM = 1  # pynvml.NVML_CLOCK_SM
#: the timer's guards a monitor supplies (NVML here, amdsmi in ``runtime.amdsmi``)
GUARDS = ("clocks", "throttling", "processes")
#: nvmlClocksEventReason* bits (nvml.h) that mean the clocks are held down; GpuIdle (0x1) and
#: ApplicationsClocksSetting (0x2) do not
_REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x10: "sync boost", 0x20: "SW thermal slowdown",
            0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown", 0x100: "display clock setting"}
_MAX_DEVICES = 64
#: how to get the binding back where it is missing (installed with ``--no-deps``, or uninstalled)
INSTALL_HINT = "pip install nvidia-ml-py (a dependency of pytest-gpuenv: an install with --no-deps leaves it out)"

_state: dict[str, Any] = {}  # "nvml": pynvml initialised for Monitor/driver_version (None: unavailable)


def _pynvml() -> Any:
    try:
        import pynvml
    except Exception:  # not installed (or broken): NVML unavailable
        return None
    return pynvml


def installed() -> bool:
    """Whether nvidia-ml-py can be imported."""
    return _pynvml() is not None


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None when it raises (NVMLError, a missing symbol, undecodable text)."""
    try:
        return fn(*args)
    except Exception:
        return None


@contextlib.contextmanager
def _library(nv: Any, lib_path: Optional[str]) -> Iterator[None]:
    """pynvml bound to ``lib_path`` for the duration (``None``: pynvml's own loading). OSError if unloadable."""
    if lib_path is None:
        yield
        return
    import ctypes

    lib = ctypes.CDLL(lib_path)
    pointers = getattr(nv, "_nvmlGetFunctionPointer_cache", {})
    with nv.libLoadLock:
        saved = nv.nvmlLib, dict(pointers)
        nv.nvmlLib = lib
        pointers.clear()
    try:
        yield
    finally:
        with nv.libLoadLock:
            nv.nvmlLib = saved[0]
            pointers.clear()
            pointers.update(saved[1])


class Answer(NamedTuple):
    """What ``ask`` got: NVML's facts (``query``'s dict), or None and ``why`` there are none."""

    data: Optional[dict[str, Any]]
    why: Optional[str]


def query(lib_path: Optional[str] = None) -> Optional[dict[str, Any]]:
    """``{"driver_version", "max_cuda", "devices": [{"nvml_index", "name", "uuid", "memory_bytes", "arch"}]}``.

    :param lib_path: the NVML library file to use; ``None``: the one pynvml loads (or has loaded).
    :returns: None when pynvml or the library is missing or ``nvmlInit`` fails.
    """
    return ask(lib_path).data


def ask(lib_path: Optional[str] = None) -> Answer:
    """``query``'s answer, or None with why: the binding is missing, the library cannot be loaded, or
    ``nvmlInit`` fails (its error, as pynvml words it: "NVML Shared Library Not Found", "Driver Not Loaded")."""
    nv = _pynvml()
    if nv is None:
        return Answer(None, "nvidia-ml-py is not installed")
    try:
        with _library(nv, lib_path):
            try:
                nv.nvmlInit()
            except Exception as exc:
                return Answer(None, f"nvmlInit failed: {type(exc).__name__}: {exc}"[:200])
            try:
                return Answer(_read(nv), None)
            finally:
                _call(nv.nvmlShutdown)
    except OSError as exc:  # the given library could not be loaded
        return Answer(None, f"{lib_path} could not be loaded: {exc}"[:200])


def _read(nv: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": [], "driver_version": _call(nv.nvmlSystemGetDriverVersion), "max_cuda": None}
    ver = _call(nv.nvmlSystemGetCudaDriverVersion_v2) or _call(nv.nvmlSystemGetCudaDriverVersion)
    if isinstance(ver, int) and ver > 0:
        out["max_cuda"] = f"{ver // 1000}.{(ver % 1000) // 10}"
    count = _call(nv.nvmlDeviceGetCount)
    for i in range(min(count, _MAX_DEVICES) if isinstance(count, int) else 0):
        handle = _call(nv.nvmlDeviceGetHandleByIndex, i)
        if handle is None:
            continue
        dev: dict[str, Any] = {"nvml_index": i}
        for key, fn in (("name", nv.nvmlDeviceGetName), ("uuid", nv.nvmlDeviceGetUUID)):
            value = _call(fn, handle)
            if isinstance(value, str):
                dev[key] = value
        mem = _call(nv.nvmlDeviceGetMemoryInfo, handle)
        if mem is not None:
            dev["memory_bytes"] = int(mem.total)
        cc = _call(nv.nvmlDeviceGetCudaComputeCapability, handle)
        if cc is not None:
            dev["arch"] = f"sm_{cc[0]}{cc[1]}"
        out["devices"].append(dev)
    return out


# ------------------------------------------------------------------------------------------ perf
def _initialised() -> Any:
    """pynvml after one ``nvmlInit`` for this process (never shut down: handles stay valid), or None
    (``_state["why"]`` says why)."""
    if "nvml" not in _state:
        nv, why = _pynvml(), None
        try:
            if nv is not None:
                nv.nvmlInit()
            else:
                why = f"nvidia-ml-py is not installed ({INSTALL_HINT})"
        except Exception as exc:
            nv, why = None, f"nvmlInit failed: {type(exc).__name__}: {exc}"[:200]
        _state.update(nvml=nv, why=why)
    return _state["nvml"]


def memory_used(uuids: list[str], pid: Optional[int] = None) -> dict[str, int]:
    """UUID -> bytes in use on that GPU (``pid`` given: by that process only, as the driver counts its compute
    use), for the GPUs NVML can tell of; ``{}`` where it cannot."""
    nv = _initialised()
    out: dict[str, int] = {}
    for uuid in uuids if nv is not None else []:
        handle = _call(nv.nvmlDeviceGetHandleByUUID, uuid)
        if handle is None:
            continue
        if pid is None:
            used = getattr(_call(nv.nvmlDeviceGetMemoryInfo, handle), "used", None)
        else:
            procs = _call(nv.nvmlDeviceGetComputeRunningProcesses, handle) or []
            used = sum(int(getattr(p, "usedGpuMemory", 0) or 0) for p in procs if getattr(p, "pid", None) == pid)
        if isinstance(used, int):
            out[uuid] = used
    return out


def driver_version() -> Optional[str]:
    nv = _initialised()
    value = _call(nv.nvmlSystemGetDriverVersion) if nv is not None else None
    return value if isinstance(value, str) else None


class MonitorBase:
    """What NVML's and amdsmi's monitors share: ``unavailable`` (guard -> why it is off), its one-line
    ``note``, and the processes on the device that are not this run's."""

    #: the library's name in notes
    label = ""
    unavailable: dict[str, str]

    def processes(self) -> Optional[list[int]]:
        raise NotImplementedError

    @property
    def note(self) -> Optional[str]:
        """One line naming the guards that are off and why, or None."""
        by_why: dict[str, list[str]] = {}
        for guard, why in self.unavailable.items():
            by_why.setdefault(why, []).append(guard)
        return "; ".join(f"{self.label} guards off ({', '.join(g)}): {w}" for w, g in by_why.items()) or None

    def foreign_processes(self) -> list[dict[str, Any]]:
        pids = self.processes()
        if not pids:
            return []
        return foreign_of(pids, related_pids(), os.getpid(), _process_name, _ppid)


class Monitor(MonitorBase):
    """NVML view of one device, found by UUID (preferred) or PCI bus id.

    :param nvml: a pynvml-like module, already initialised (tests); default: pynvml, initialised once.
    ``unavailable`` maps each guard that is off ("clocks", "throttling", "processes") to why; ``note``
    says it in one line (``runtime.amdsmi.Monitor`` has the same interface).
    """

    source = "nvml"
    label = "NVML"

    def __init__(self, uuid: Optional[str] = None, pci_bus_id: Optional[str] = None, nvml: Any = None) -> None:
        self.nvml = nvml if nvml is not None else _initialised()
        self.handle: Any = None
        self.max_mhz: Optional[float] = None
        self.unavailable: dict[str, str] = {}
        if self.nvml is None:
            self.unavailable = dict.fromkeys(GUARDS, _state.get("why") or "NVML unavailable")
            return
        if uuid:
            u = uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid
            self.handle = _call(self.nvml.nvmlDeviceGetHandleByUUID, u)
        if self.handle is None and pci_bus_id:
            self.handle = _call(self.nvml.nvmlDeviceGetHandleByPciBusId, pci_bus_id)
        if self.handle is None:
            self.unavailable = dict.fromkeys(GUARDS, f"NVML finds no GPU with UUID {uuid} or PCI bus id {pci_bus_id}")
            return
        mhz = _call(self.nvml.nvmlDeviceGetMaxClockInfo, self.handle, NVML_CLOCK_SM)
        self.max_mhz = float(mhz) if mhz is not None else None
        for guard, ok in (("clocks", self.max_mhz), ("throttling", self.event_reasons() is not None),
                          ("processes", self.processes() is not None)):
            if not ok:
                self.unavailable[guard] = "the NVML call failed (not supported on this GPU or driver)"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def sm_mhz(self) -> Optional[float]:
        if self.handle is None:
            return None
        mhz = _call(self.nvml.nvmlDeviceGetClockInfo, self.handle, NVML_CLOCK_SM)
        return float(mhz) if mhz is not None else None

    def event_reasons(self) -> Optional[int]:
        """The clock event (throttle) reasons bit mask, or None."""
        if self.handle is None:
            return None
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(self.nvml, name, None)
            value = _call(fn, self.handle) if fn is not None else None
            if value is not None:
                return int(value)
        return None

    def throttle_reasons(self) -> Optional[list[str]]:
        """The active clock event reasons other than idle and application clocks ([] for none), or None."""
        mask = self.event_reasons()
        if mask is None:
            return None
        return [name for bit, name in _REASONS.items() if mask & bit]

    def processes(self) -> Optional[list[int]]:
        """PIDs of compute processes on the device, or None when NVML cannot say."""
        if self.handle is None:
            return None
        procs = _call(self.nvml.nvmlDeviceGetComputeRunningProcesses_v3, self.handle)
        return None if procs is None else [int(p.pid) for p in procs]

# ------------------------------------------------------------------------------------------ processes
def _process_name(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def related_pids() -> set[int]:
    """This process and its ancestors (up to 8 levels, below init): not "another process" on the GPU.

    Siblings (xdist workers of one run share a parent and queue on the same GPU lock) are recognised
    by ``foreign_of`` through their parent.
    """
    me = os.getpid()
    out = {me}
    p: Optional[int] = me
    for _ in range(8):
        p = _ppid(p) if p else None
        if not p or p <= 1:
            break
        out.add(p)
    return out


def foreign_of(pids: list[int], related: set[int], me: int, name_of: Any, ppid_of: Any,
               guess_namespace: bool = True) -> list[dict[str, Any]]:
    """Which of NVML's PIDs are another workload. Pure, for the tests.

    Not foreign: this process, its ancestors, and siblings (same parent: xdist workers). When this
    process is not in the list although the list is not empty, NVML reports PIDs of another PID
    namespace (a container): then one entry is taken to be this process and only the rest count
    (``guess_namespace``; off where this process need not be on the GPU at all).
    """
    parent = ppid_of(me)
    out = []
    for pid in pids:
        if pid in related:
            continue
        if parent and ppid_of(pid) == parent:
            continue
        out.append({"pid": pid, "name": name_of(pid)})
    if guess_namespace and me not in pids and out and len(out) == len(pids):
        out = out[1:]
    return out


def foreign_pids(pids: list[int], guess_namespace: bool = True) -> list[int]:
    """``foreign_of`` for this process: the PIDs that are not this process, its ancestors or its siblings."""
    return [p["pid"] for p in foreign_of(pids, related_pids(), os.getpid(), _process_name, _ppid, guess_namespace)]
