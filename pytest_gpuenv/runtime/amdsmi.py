"""AMD SMI through AMD's Python binding (``import amdsmi``): the timer's three guards on an AMD GPU.

The same interface as ``runtime.nvml.Monitor`` (``available``, ``max_mhz``, ``sm_mhz()``,
``throttle_reasons()``, ``processes()``, ``foreign_processes()``, ``unavailable``, ``note``), so the
sampler discards batches run below the clock floor, and names other processes on the GPU, on AMD too.
It reads the driver's state through ``libamd_smi.so`` (ROCm 6 and newer), creates no HIP context and
changes nothing.

``amdsmi`` is optional (the ``amd`` extra) and imported lazily, once per process, followed by one
``amdsmi_init(AmdSmiInitFlags.INIT_AMD_GPUS)`` that is never shut down (handles stay valid). Nothing here
raises: where the binding is missing, cannot load ``libamd_smi.so`` (the binding prints why and raises
``KeyError`` at import; the print is kept as the reason), fails to initialise, or one call fails, that
guard is off and ``unavailable`` says which and why.

Calls, from amdsmi's ``amdsmi_interface.py`` (amdsmi 7.0.2 on PyPI): ``amdsmi_get_processor_handles``,
``amdsmi_get_gpu_device_bdf``, ``amdsmi_get_gpu_device_uuid``, ``amdsmi_get_clock_info(h, AmdSmiClkType.GFX)``
(``clk``, ``max_clk`` in MHz, "N/A" where unknown; ``cur_clk`` before ROCm 6.2),
``amdsmi_get_violation_status`` (``active_*`` flags, MI300 and newer), ``amdsmi_get_gpu_metrics_info``
(``throttle_status``/``indep_throttle_status``, as bools) and ``amdsmi_get_gpu_process_list``.

``vram_held`` gives ``--dist gpu`` (``dist.worker``, ``dist.use``) the VRAM that processes hold on a GPU,
from the same process list: ROCm 6.1 and newer return one dict per process with ``pid`` and
``memory_usage: {"vram_mem", "gtt_mem", "cpu_mem"}`` in bytes (7.x adds ``cu_occupancy`` and
``evicted_time``); ROCm 6.0 returns process handles, each read with ``amdsmi_get_gpu_process_info(handle,
process)`` into the same dict. ``vram_mem`` is what the amdgpu driver's fdinfo counts for the process's files
on that GPU, else KFD's count (amdsmi ``src/amd_smi/amd_smi_gpu_device.cc``
``get_compute_process_list_impl``). Its PIDs are the kernel's (KFD's ``/sys/class/kfd/kfd/proc``): in a
container with its own PID namespace this process is not found by its PID. ``amdsmi_get_gpu_vram_usage``
(``vram_used``, MiB) is not used: it counts every process, this run's workers included, and what the driver
reserves.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any, Callable, Optional

from pytest_gpuenv.runtime.nvml import GUARDS, MonitorBase, foreign_pids

INSTALL_HINT = "pip install 'pytest-gpuenv[amd]' (amdsmi; it needs ROCm 6 or newer for libamd_smi.so)"
#: amdsmi_get_violation_status's ``active_*`` flags and what each names
_VIOLATIONS = {
    "active_ppt_pwr": "power (PPT)",
    "active_socket_thrm": "socket thermal",
    "active_prochot_thrm": "PROCHOT thermal",
    "active_vr_thrm": "VR thermal",
    "active_hbm_thrm": "HBM thermal",
}

_state: dict[str, Any] = {}  # "smi": amdsmi initialised (None: unavailable), "why": the reason


def load(importer: Optional[Callable[[], Any]] = None) -> tuple[Any, Optional[str]]:
    """``(amdsmi, None)`` after one ``amdsmi_init`` for this process, or ``(None, why)``.

    :param importer: returns the module (tests); default ``import amdsmi``.
    """
    if "smi" not in _state:
        smi, why = _import(importer)
        if smi is not None:
            try:
                smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
            except Exception as exc:  # AmdSmiLibraryException: no driver, no permission, no GPU
                smi, why = None, f"amdsmi_init failed: {_short(exc)}"
        _state.update(smi=smi, why=why)
    return _state["smi"], _state["why"]


def _import(importer: Optional[Callable[[], Any]]) -> tuple[Any, Optional[str]]:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            if importer is not None:
                return importer(), None
            import amdsmi

            return amdsmi, None
    except ModuleNotFoundError as exc:
        if exc.name == "amdsmi":
            return None, f"amdsmi is not installed ({INSTALL_HINT})"
        return None, f"importing amdsmi failed: {_short(exc)}"
    except Exception as exc:  # the binding raises KeyError('libamd_smi.so') when the library is absent
        said = next((line for line in printed.getvalue().splitlines() if line.strip()), "")
        return None, f"amdsmi could not load libamd_smi.so: {said or _short(exc)} ({INSTALL_HINT})"


def _short(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


def _call(fn: Callable[..., Any], *args: Any) -> tuple[Any, Optional[str]]:
    try:
        return fn(*args), None
    except Exception as exc:
        return None, f"{getattr(fn, '__name__', 'call')} failed: {_short(exc)}"


def _bdf(text: Optional[str]) -> Optional[str]:
    """``dddd:bb:dd.f`` (domain cut to 4 digits: torch writes 8) from a PCI bus id, lower case."""
    m = re.match(r"^\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*$", text or "")
    if not m:
        return None
    dom, bus, dev, fn = m.groups()
    return f"{int(dom or '0', 16) & 0xFFFF:04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def amdsmi_uuid(serial: int, device_id: int) -> str:
    """The UUID amdsmi gives a GPU (ROCm/amdsmi ``src/amd_smi/amd_smi_uuid.cc`` ``amdsmi_uuid_gen``, called by
    ``amdsmi_get_gpu_device_uuid`` with the DRM ``unique_id`` read as hex, the PCI device id and fcn 0xff): a
    version-1 layout holding the device id, 0xff and the serial's bytes 7, 6, 5-4 and 3-0."""
    b7, b6, b54, b30 = (serial >> 56) & 0xFF, (serial >> 48) & 0xFF, (serial >> 32) & 0xFFFF, serial & 0xFFFFFFFF
    return f"{b7 << 24 | 0xFF << 16 | device_id & 0xFFFF:08x}-0000-1000-80{b6:02x}-{b54:04x}{b30:08x}"


def uuid_serial(uuid: Optional[str]) -> Optional[int]:
    """The ASIC serial (KFD ``unique_id``) a UUID carries: ROCr's ``GPU-<16 hex>``, hipDeviceGetUuid's 16 ASCII
    hex characters as torch prints them (32 hex digits), or amdsmi's ``amdsmi_uuid_gen`` form; else None."""
    text = (uuid or "").strip().lower()
    m = re.fullmatch(r"gpu-([0-9a-f]{16})", text)
    if m:
        return int(m.group(1), 16)
    flat = text.replace("-", "")
    if re.fullmatch(r"[0-9a-f]{32}", flat):
        chars = bytes.fromhex(flat)
        if re.fullmatch(rb"[0-9a-f]{16}", chars):
            return int(chars, 16)
    m = re.fullmatch(r"([0-9a-f]{2})ff[0-9a-f]{4}-0000-1000-80([0-9a-f]{2})-([0-9a-f]{4})([0-9a-f]{8})", text)
    if m:
        return int("".join(m.groups()), 16)
    return None


def find_handle(smi: Any, uuid: Optional[str], pci_bus_id: Optional[str]) -> tuple[Any, Optional[str]]:
    """``(handle, None)`` of the one amdsmi processor whose BDF is ``pci_bus_id``, or ``(None, why)``.

    Partitions of an MI300 whose kernel puts the partition in location_id bits 31:28 share one BDF (amdsmi.h
    ``amdsmi_get_gpu_bdf_id``: the function is location_id & 7): then no handle is chosen, rather than another
    partition's. ``uuid`` is only a fallback where no BDF is known: amdsmi's UUID is its own
    (``amdsmi_uuid_gen``), not ROCr's; it matches by the serial both carry (``uuid_serial``)."""
    handles, err = _call(smi.amdsmi_get_processor_handles)
    want_bdf, want_uuid, want_serial = _bdf(pci_bus_id), (uuid or "").lower().removeprefix("gpu-"), uuid_serial(uuid)
    hits = []
    for h in handles or []:
        bdf, _e = _call(smi.amdsmi_get_gpu_device_bdf, h)
        if want_bdf and _bdf(bdf) == want_bdf:
            hits.append(h)
        elif not want_bdf and want_uuid:
            u, _e = _call(smi.amdsmi_get_gpu_device_uuid, h)
            if isinstance(u, str) and (u.lower().removeprefix("gpu-") == want_uuid or (
                    want_serial is not None and uuid_serial(u) == want_serial)):
                hits.append(h)
    if len(hits) == 1:
        return hits[0], None
    if hits:
        return None, (f"{len(hits)} amdsmi processors share PCI bus id {pci_bus_id} (partitions of one GPU); "
                      "which one is this device cannot be told")
    return None, err or f"amdsmi lists no GPU with PCI bus id {pci_bus_id} or UUID {uuid}"


def process_infos(smi: Any, handle: Any) -> tuple[Optional[list[dict[str, Any]]], Optional[str]]:
    """amdsmi's processes on the GPU as dicts (``pid``, ``name``, ``memory_usage``, ...), or ``(None, why)``.

    ROCm 6.1 and newer: ``amdsmi_get_gpu_process_list`` gives the dicts. ROCm 6.0 gives process handles; each
    is read with ``amdsmi_get_gpu_process_info(handle, process)`` (one whose process ended meanwhile is left
    out); an amdsmi that lists handles but cannot read them is no answer, not an empty GPU."""
    procs, err = _call(smi.amdsmi_get_gpu_process_list, handle)
    if not isinstance(procs, list):
        return None, err or "amdsmi_get_gpu_process_list gave no list"
    read_info = getattr(smi, "amdsmi_get_gpu_process_info", None)
    if read_info is None and not all(isinstance(p, dict) for p in procs):
        return None, "this amdsmi lists process handles but has no amdsmi_get_gpu_process_info"
    out = []
    for p in procs:
        info = p
        if not isinstance(info, dict) and read_info is not None:  # a ROCm 6.0 handle
            info, _why = _call(read_info, handle, p)
        if isinstance(info, dict):
            out.append(info)
    return out, None


def _pid(info: dict[str, Any]) -> Optional[int]:
    pid = info.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _vram(info: dict[str, Any]) -> int:
    """A process's ``memory_usage["vram_mem"]`` in bytes; 0 where amdsmi gives none ("N/A")."""
    usage = info.get("memory_usage")
    vram = usage.get("vram_mem") if isinstance(usage, dict) else None
    return vram if isinstance(vram, int) and not isinstance(vram, bool) and vram > 0 else 0


#: (UUID, PCI bus id) -> amdsmi handle, found once per process (handles stay valid: amdsmi is never shut down)
_handles: dict[tuple[Optional[str], Optional[str]], Any] = {}


def vram_held(devices: list[tuple[Optional[str], Optional[str]]], pid: Optional[int] = None,
              smi: Any = None) -> list[Optional[int]]:
    """Per device, given as (UUID, PCI bus id) as detection gives them, the bytes of VRAM that amdsmi's
    processes on it hold: ``pid`` given, that process's; else every process's but this process's, its
    ancestors' and its siblings' (xdist workers of this run: ``nvml.foreign_pids``, without its guess at
    another PID namespace, as this process need not be on the GPU). None for a device amdsmi cannot tell of:
    amdsmi missing or failing, the device not found (``find_handle``), its process list failing.

    :param smi: an amdsmi-like module, already initialised (tests); default: ``load()``.
    """
    cache: dict[tuple[Optional[str], Optional[str]], Any] = {} if smi is not None else _handles
    if smi is None:
        smi, _why = load()
    out: list[Optional[int]] = []
    for key in devices:
        handle = cache.get(key)
        if handle is None and smi is not None:
            handle, _why = find_handle(smi, *key)
            if handle is not None:
                cache[key] = handle
        infos, _why = process_infos(smi, handle) if handle is not None else (None, None)
        if infos is None:
            out.append(None)
            continue
        vram: dict[int, int] = {}
        for info in infos:
            p = _pid(info)
            if p is not None:
                vram[p] = vram.get(p, 0) + _vram(info)
        wanted = [pid] if pid is not None else foreign_pids(list(vram), guess_namespace=False)
        out.append(sum(vram.get(p, 0) for p in wanted))
    return out


def _mhz(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


class Monitor(MonitorBase):
    """amdsmi's view of one AMD GPU, found by PCI bus id (preferred) or UUID.

    :param smi: an amdsmi-like module, already initialised (tests); default: ``load()``.
    """

    source = "amdsmi"
    label = "amdsmi"

    def __init__(self, uuid: Optional[str] = None, pci_bus_id: Optional[str] = None, smi: Any = None) -> None:
        why: Optional[str] = None
        self.smi = smi
        if smi is None:
            self.smi, why = load()
        self.handle: Any = None
        self.max_mhz: Optional[float] = None
        #: guard -> why it is off ("clocks", "throttling", "processes")
        self.unavailable: dict[str, str] = {}
        if self.smi is not None:
            self.handle, why = find_handle(self.smi, uuid, pci_bus_id)
        if self.handle is None:
            self.unavailable = {g: why or "amdsmi unavailable" for g in GUARDS}
            return
        info, err = _call(self.smi.amdsmi_get_clock_info, self.handle, self.smi.AmdSmiClkType.GFX)
        self.max_mhz = _mhz(info.get("max_clk") if isinstance(info, dict) else None)
        if self.max_mhz is None:
            self.unavailable["clocks"] = err or "amdsmi_get_clock_info gave no maximum graphics clock"
        if self.throttle_reasons() is None:
            self.unavailable["throttling"] = "neither amdsmi_get_violation_status nor gpu metrics give it"
        if self.processes() is None:
            self.unavailable["processes"] = self._proc_err or "amdsmi_get_gpu_process_list failed"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def sm_mhz(self) -> Optional[float]:
        """The current graphics clock, MHz (``clk``; ``cur_clk`` before ROCm 6.2)."""
        if self.handle is None:
            return None
        info, _e = _call(self.smi.amdsmi_get_clock_info, self.handle, self.smi.AmdSmiClkType.GFX)
        info = info if isinstance(info, dict) else {}
        return _mhz(info.get("clk", info.get("cur_clk")))

    def throttle_reasons(self) -> Optional[list[str]]:
        """What holds the clocks down now ([] for nothing), or None when amdsmi cannot say."""
        if self.handle is None:
            return None
        viol, _e = _call(getattr(self.smi, "amdsmi_get_violation_status", None) or _missing, self.handle)
        if isinstance(viol, dict) and any(isinstance(viol.get(k), bool) for k in _VIOLATIONS):
            return [name for key, name in _VIOLATIONS.items() if viol.get(key) is True]
        metrics, _e = _call(self.smi.amdsmi_get_gpu_metrics_info, self.handle)
        for key in ("indep_throttle_status", "throttle_status"):
            value = (metrics or {}).get(key) if isinstance(metrics, dict) else None
            if isinstance(value, bool):
                return [key] if value else []
        return None

    _proc_err: Optional[str] = None

    def processes(self) -> Optional[list[int]]:
        """PIDs of processes using the device, or None when amdsmi cannot say."""
        if self.handle is None:
            return None
        infos, self._proc_err = process_infos(self.smi, self.handle)
        return None if infos is None else [p for p in map(_pid, infos) if p is not None]


def _missing(_handle: Any) -> Any:
    raise AttributeError("this amdsmi has no amdsmi_get_violation_status")
