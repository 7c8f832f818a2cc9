"""AMD perf facts (issue 10 items 3, 7, 10): the last-level cache a cold timer flushes, the rate
``torch.cuda._sleep`` counts at, and AMD monitoring through amdsmi. Each test cites the source it follows.
Stand-ins only at the boundaries: torch's device properties, and amdsmi's functions (with their real names)."""

from __future__ import annotations

import contextlib
import os
import sys
import types
import warnings

import pytest
from _checkout import GPU_ROOTS

from pytest_gpuenv.base.model import Device, GpuEnv
from pytest_gpuenv.detect import caches, detect
from pytest_gpuenv.perf import bench as _bench
from pytest_gpuenv.perf._device import flush_bytes, last_level_cache_bytes
from pytest_gpuenv.perf._driver import DriverBackend
from pytest_gpuenv.perf._torch import WALL_CLOCK_HZ, sleep_counter, sleep_rate
from pytest_gpuenv.runtime import amdsmi as amd_smi
from pytest_gpuenv.runtime import nvml

MiB = 1 << 20


# ------------------------------------------------------------------------------------------ item 3
# ROCm docs, reference/gpu-arch-specs.rst (ROCm/ROCm docs; rocm.docs.amd.com "GPU hardware specifications"):
# Radeon table, "Infinity Cache (MiB)": RX 7900 XTX 96, RX 7900 XT 80, RX 6900 XT 128, RX 6700 XT 96,
# RX 9070 GRE 48; Instinct table, "L3 Cache (MiB)": MI300X 256, MI355X 256; MI210 none (L2 8), MI250X none
# (L2 "16 (8 per GCD)", one HIP device per GCD).
@pytest.mark.parametrize("vendor, arch, name, mib", [
    ("amd", "gfx1100", "AMD Radeon RX 7900 XTX", 96),
    ("amd", "gfx1100", "AMD Radeon RX 7900 XT", 80),  # word-bounded: not the XTX row
    ("amd", "gfx1100", "AMD Radeon RX 7900 XTX/XT", 96),  # KFD's name for device id 0x744C
    ("amd", "gfx1030", "AMD Radeon RX 6900 XT", 128),
    ("amd", "gfx1030", "AMD Radeon RX 6900/6800 XT", 128),  # names no row: the arch's largest
    ("amd", "gfx1031", "AMD Radeon RX 6700 XT", 96),
    ("amd", "gfx1201", "AMD Radeon RX 9070 GRE", 48),  # the longest matching name, not "RX 9070"
    ("amd", "gfx942", "AMD Instinct MI300X", 256),
    ("amd", "gfx950", "AMD Instinct MI355X", 256),
    ("amd", "gfx90a", "AMD Instinct MI210", 8),
    ("amd", "gfx90a", "AMD Instinct MI250X/MI250", 8),
    ("amd", "gfx1100", None, 96),  # name unknown: the largest of the arch (W7900, RX 7900 XTX)
    ("amd", "gfx942", "AMD GPU gfx942", 256),
])
def test_last_level_cache_follows_rocm_spec_table(vendor, arch, name, mib):
    assert caches.last_level_cache(vendor, arch, name) == mib * MiB


def test_last_level_cache_unknown_where_the_table_says_nothing():
    # gfx1153 is not in the table; NVIDIA: NVML has no L2 query (nvml.h has none) and /proc says nothing
    assert caches.last_level_cache("amd", "gfx1153", "AMD Radeon 820M") is None
    assert caches.last_level_cache("nvidia", "sm_75", "Tesla T4") is None  # an arch missing from the table
    # NVIDIA's L2 (whitepapers; cudaDevAttrL2CacheSize on the lent H200: 62914560)
    assert caches.last_level_cache("nvidia", "sm_90", "NVIDIA H200") == 60 * MiB
    assert caches.last_level_cache("nvidia", "sm_90", "NVIDIA H100 80GB HBM3") == 50 * MiB
    assert caches.last_level_cache("nvidia", "sm_80", "NVIDIA A100-SXM4-80GB") == 40 * MiB


def test_detection_fills_the_model_json_and_gpuenv_info():
    # the MI300X and RX 6700 XT trees (tests/data/gpu-roots) against the table above; the model's JSON
    # (GpuEnv.to_dict, what `gpuenv info --json` prints) carries the field and from_dict keeps it
    from pytest_gpuenv.session import report

    env = detect(root=os.path.join(GPU_ROOTS, "mi300x_linux"), environ={}, probe="never")
    assert [d.last_level_cache_bytes for d in env.devices] == [256 * MiB] * len(env.devices) and env.devices
    again = GpuEnv.from_dict(env.to_dict())
    assert again.devices[0].last_level_cache_bytes == 256 * MiB
    assert "last-level cache 256.0 MiB" in "\n".join(report.header_lines(env, verbose=1))
    rx = detect(root=os.path.join(GPU_ROOTS, "rx6700xt_unsupported_linux"), environ={}, probe="never")
    assert [d.last_level_cache_bytes for d in rx.devices] == [96 * MiB]


def test_fill_uses_the_physical_arch_and_keeps_known_sizes():
    # HSA_OVERRIDE_GFX_VERSION changes the code object (arch), not the chip: gfx1031 run as gfx1030
    d = Device(index=0, vendor="amd", name="AMD GPU", arch="gfx1030", physical_arch="gfx1031")
    known = Device(index=1, vendor="amd", name="AMD Instinct MI300X", arch="gfx942", last_level_cache_bytes=1)
    caches.fill([d, known])
    assert d.last_level_cache_bytes == 96 * MiB and known.last_level_cache_bytes == 1


def test_flush_covers_the_infinity_cache():
    # twice the largest cache (README "Performance assertions"); the runtime's L2 (hipDeviceProp_t.l2CacheSize,
    # 6 MiB on gfx1100) is far below the 96 MiB Infinity Cache, which the flush must cover too
    assert flush_bytes(6 * MiB, "gfx1100", "AMD Radeon RX 7900 XTX") == 192 * MiB
    assert flush_bytes(4 * MiB, "gfx1030", "AMD Radeon RX 6900 XT") == 256 * MiB
    assert flush_bytes(8 * MiB, "gfx90a", "AMD Instinct MI210") == 16 * MiB  # no Infinity Cache: 2x L2
    assert flush_bytes(2 * MiB, "gfx1153", None) == 256 * MiB  # unknown arch: at least Triton's 256 MiB
    assert flush_bytes(2 * MiB, "gfx1151", None) == 64 * MiB  # Radeon 8060S: 32 MiB Infinity Cache (APU tab)
    assert flush_bytes(60 * MiB, "sm_90", "NVIDIA H200") == 75 * MiB  # NVIDIA: 1.25x the L2 (runtime, table agree)
    assert flush_bytes(50 * MiB, "sm_90", "NVIDIA H200") == 75 * MiB  # the larger of the two
    assert last_level_cache_bytes(None, "gfx1100", "AMD Radeon RX 7900 XT") == 80 * MiB


class _AmdRuntime:
    """Stands in for runtime.get("rocm", 0): what DriverBackend asks of HipRuntime (hip.py describe())."""

    vendor, device = "amd", 0

    def describe(self):
        return {"name": "AMD Radeon RX 7900 XTX", "arch": "gfx1100", "l2_bytes": 6 * MiB, "sm_count": 48,
                "uuid": None, "pci_bus_id": "0000:03:00.0", "runtime": "hip 6.4"}

    def timer_hz(self):
        return 100e6

    allocated: list = []

    def malloc(self, n):
        self.allocated = [*self.allocated, n]
        return 1 << 40

    def memset(self, p, n, stream):
        pass

    def synchronize(self, stream):
        pass


def test_driver_timer_combines_the_runtime_l2_with_the_table():
    rt = _AmdRuntime()
    be = DriverBackend(rt, compile_helpers=False)
    assert (be.info.l2_bytes, be.info.last_level_cache_bytes) == (6 * MiB, 96 * MiB)
    assert be.info.flush_bytes == rt.allocated[0] == 192 * MiB  # the flush buffer


# ------------------------------------------------------------------------------------------ item 7
# pytorch aten/src/ATen/cuda/Sleep.cu: spin_kernel counts wall_clock64() under __GFX11__ (USE_ROCM) and
# clock64() elsewhere; clr amd_device_functions.h: clock64() is the "GPU core cycle count" (peak in
# hipDeviceAttributeClockRate, hipDeviceProp_t.clockRate in kHz, torch's props.clock_rate), wall_clock64()
# runs at hipDeviceAttributeWallClockRate, which ROCr reads from amdgpu's GPU counter: the 100 MHz reference
# clock (amdgpu soc21.c soc21_get_xclk).
def test_sleep_counts_wall_clock_on_gfx11_and_core_cycles_elsewhere():
    fast = types.SimpleNamespace(clock_rate=2_500_000)  # kHz
    assert sleep_counter(True, "gfx1100") == sleep_counter(True, "gfx1151") == "wall clock"
    assert sleep_counter(True, "gfx942") == sleep_counter(True, "gfx1201") == sleep_counter(False, "sm_90") == "core clock"
    assert sleep_rate(True, "gfx1100", fast, max_mhz=2500) == WALL_CLOCK_HZ == 100e6
    assert sleep_rate(True, "gfx942", types.SimpleNamespace(clock_rate=2_100_000)) == 2.1e9
    assert sleep_rate(True, "gfx942", types.SimpleNamespace(clock_rate=2_100_000), max_mhz=2200) == 2.2e9
    assert sleep_rate(False, "sm_90", types.SimpleNamespace(clock_rate=1_980_000)) == 1.98e9
    assert sleep_rate(True, "gfx90a", types.SimpleNamespace(), max_mhz=None) == 2.0e9  # nothing known
    assert sleep_rate(True, "gfx90a", types.SimpleNamespace(clock_rate="junk"), max_mhz=1700) == 1.7e9


def _fake_torch(arch: str, name: str, clock_khz: int, slept: list) -> types.ModuleType:
    """torch with ROCm's device properties (torch/_C/__init__.pyi _CudaDeviceProperties: gcnArchName,
    L2_cache_size, clock_rate) and a _sleep that records its argument."""
    props = types.SimpleNamespace(gcnArchName=arch + ":sramecc+:xnack-", L2_cache_size=6 * MiB, clock_rate=clock_khz,
                                  uuid=None, major=11, minor=0)
    t = types.ModuleType("torch")
    t.__version__ = "2.9.0+rocm6.4"
    t.version = types.SimpleNamespace(hip="6.4.43484", cuda=None)
    t.device = lambda kind, idx: (kind, idx)
    t.float32 = "float32"
    t.zeros = lambda *a, **k: types.SimpleNamespace(shape=a)
    t.cuda = types.SimpleNamespace(
        current_device=lambda: 0, get_device_properties=lambda i: props, get_device_name=lambda i: name,
        device=lambda i: contextlib.nullcontext(), _sleep=slept.append)
    return t


@pytest.mark.parametrize("arch, name, ticks, ticks_at_2400", [
    ("gfx1100", "AMD Radeon RX 7900 XTX", 10_000, 10_000),  # 100 us at 100 MHz, whatever the engine clock
    ("gfx942", "AMD Instinct MI300X", 210_000, 240_000),  # 100 us at 2.1 GHz, then at amdsmi's 2.4 GHz max
])
def test_torch_delay_ticks(monkeypatch, arch, name, ticks, ticks_at_2400):
    from pytest_gpuenv.perf._torch import TorchBackend

    slept: list = []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(arch, name, 2_100_000, slept))
    be = TorchBackend(0)
    be.delay(100e-6)
    be.use_max_clock(2400)  # what select_backend does with the monitor's maximum clock
    be.delay(100e-6)
    assert slept == [ticks, ticks_at_2400]
    assert be.info.arch == arch and be.info.flush_bytes == 2 * be.info.last_level_cache_bytes


# ------------------------------------------------------------------------------------------ item 10
class FakeSmi:
    """amdsmi at its call boundary, with the names and return shapes of amdsmi 7.0.2's amdsmi_interface.py:
    amdsmi_get_clock_info -> {"clk", "max_clk", ...} in MHz ("N/A" where unknown), amdsmi_get_violation_status
    -> {"active_ppt_pwr": bool or "N/A", ...}, amdsmi_get_gpu_metrics_info -> {"throttle_status": bool or
    "N/A", ...}, amdsmi_get_gpu_process_list -> [{"name", "pid", ...}]."""

    AmdSmiClkType = types.SimpleNamespace(GFX=1)
    AmdSmiInitFlags = types.SimpleNamespace(INIT_AMD_GPUS=2)

    def __init__(self, clk=1200, max_clk=2100, violation=None, metrics=None, procs=(), fail=()):
        self.clk, self.max_clk, self.violation, self.metrics = clk, max_clk, violation, metrics
        self.procs, self.fail, self.calls = list(procs), set(fail), []

    def __getattribute__(self, name):
        if name.startswith("amdsmi_") and name in object.__getattribute__(self, "fail"):
            def boom(*a):
                raise RuntimeError(f"{name}: AMDSMI_STATUS_NOT_SUPPORTED")
            boom.__name__ = name
            return boom
        return object.__getattribute__(self, name)

    def amdsmi_init(self, flag):
        self.calls.append(("init", flag))

    def amdsmi_get_processor_handles(self):
        return ["h0", "h1"]

    def amdsmi_get_gpu_device_bdf(self, h):
        return {"h0": "0000:0c:00.0", "h1": "0000:20:00.0"}[h]

    def amdsmi_get_gpu_device_uuid(self, h):
        return {"h0": "a1ff74a1-0000-1000-80c4-3cbe002bd3b6", "h1": "feff74a1-0000-1000-80fa-648def29d340"}[h]

    def amdsmi_get_clock_info(self, h, kind):
        assert kind == 1 and h == "h1"
        return {"clk": self.clk, "min_clk": 500, "max_clk": self.max_clk, "clk_locked": False, "clk_deep_sleep": 0}

    def amdsmi_get_violation_status(self, h):
        if self.violation is None:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return dict(self.violation)

    def amdsmi_get_gpu_metrics_info(self, h):
        return dict(self.metrics or {"throttle_status": "N/A", "indep_throttle_status": "N/A"})

    def amdsmi_get_gpu_process_list(self, h):
        return [{"name": n, "pid": p, "mem": 0} for p, n in self.procs]


def test_monitor_reads_the_three_guards():
    # torch.cuda._get_amdsmi_clock_rate reads amdsmi_get_clock_info(handle, AmdSmiClkType.GFX)["clk"];
    # the device is found by PCI bus id, torch's 8-digit domain cut to amdsmi's 4 (_parse_bdf)
    smi = FakeSmi(violation={"active_ppt_pwr": True, "active_socket_thrm": False, "active_hbm_thrm": "N/A"},
                  procs=[(os.getpid(), "python"), (4242, "rogue")])
    mon = amd_smi.Monitor(pci_bus_id="00000000:20:00.0", smi=smi)
    assert mon.available and mon.max_mhz == 2100.0 and mon.sm_mhz() == 1200.0
    assert mon.throttle_reasons() == ["power (PPT)"]
    assert mon.processes() == [os.getpid(), 4242]
    assert [p["pid"] for p in mon.foreign_processes()] == [4242]
    assert mon.unavailable == {} and mon.note is None and mon.source == "amdsmi"


def test_monitor_older_amdsmi_and_metrics_throttle():
    # before ROCm 6.2 the current clock was "cur_clk" (torch's _get_amdsmi_clock_rate handles both); without
    # amdsmi_get_violation_status (pre-MI300), gpu metrics' throttle_status (a bool after _validate_if_max_uint)
    smi = FakeSmi(metrics={"throttle_status": False, "indep_throttle_status": "N/A"})
    smi.amdsmi_get_clock_info = lambda h, k: {"cur_clk": 900, "max_clk": 1700}
    mon = amd_smi.Monitor(uuid="feff74a1-0000-1000-80fa-648def29d340", smi=smi)
    assert mon.sm_mhz() == 900.0 and mon.max_mhz == 1700.0 and mon.throttle_reasons() == []


def test_monitor_names_each_guard_that_is_off():
    smi = FakeSmi(max_clk="N/A", fail={"amdsmi_get_gpu_process_list"})
    mon = amd_smi.Monitor(pci_bus_id="0000:20:00.0", smi=smi)
    assert mon.available and mon.max_mhz is None and mon.processes() is None and mon.foreign_processes() == []
    assert set(mon.unavailable) == {"clocks", "throttling", "processes"}
    assert "amdsmi_get_gpu_process_list failed" in mon.unavailable["processes"] and "(clocks)" in mon.note
    lost = amd_smi.Monitor(pci_bus_id="0000:99:00.0", smi=FakeSmi())
    assert not lost.available and "no GPU with PCI bus id 0000:99:00.0" in lost.note


def test_init_failure_turns_every_guard_off(monkeypatch):
    # amdsmi_init raises AmdSmiLibraryException without the amdgpu driver (amdsmi_interface.py _check_res)
    monkeypatch.setattr(amd_smi, "_state", {})
    smi = FakeSmi(fail={"amdsmi_init"})
    assert amd_smi.load(lambda: smi) == (None, "amdsmi_init failed: RuntimeError: amdsmi_init: AMDSMI_STATUS_NOT_SUPPORTED")
    mon = amd_smi.Monitor(pci_bus_id="0000:20:00.0")
    assert not mon.available and mon.note.startswith("amdsmi guards off (clocks, throttling, processes): amdsmi_init failed")


def test_amdsmi_not_installed(monkeypatch):
    monkeypatch.setattr(amd_smi, "_state", {})
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi -> ModuleNotFoundError(name="amdsmi")
    smi, why = amd_smi.load()
    assert smi is None and why.startswith("amdsmi is not installed") and "pytest-gpuenv[amd]" in why


def test_real_amdsmi_import_failure_is_a_reason_not_a_crash(monkeypatch, capfd):
    # amdsmi's amdsmi_wrapper.py (PyPI amdsmi 7.0.2) prints "Unable to find libamd_smi.so ..." and then raises
    # KeyError('libamd_smi.so') at import when ROCm 6+'s library is absent (as on this machine): imported for
    # real where the binding is installed, skipped where it is not
    try:
        import importlib.util

        installed = importlib.util.find_spec("amdsmi") is not None
    except ValueError:
        installed = False
    if not installed:
        pytest.skip("amdsmi is not installed here (pip install amdsmi)")
    monkeypatch.setattr(amd_smi, "_state", {})
    for name in [m for m in sys.modules if m == "amdsmi" or m.startswith("amdsmi.")]:
        monkeypatch.delitem(sys.modules, name)
    smi, why = amd_smi.load()
    if smi is not None:
        pytest.skip("libamd_smi.so loaded and initialised here")
    assert "libamd_smi.so" in why or "amdsmi_init failed" in why
    assert capfd.readouterr().out == ""  # the binding's print went into the reason, not onto stdout


def test_default_monitor_picks_amdsmi_and_says_which_guards_are_off(monkeypatch):
    # _bench.default_monitor: NVML on NVIDIA, amdsmi on AMD; unavailable guards become the backend's note,
    # which GpuBench emits as a GpuPerfWarning
    from _perf_fake import FakeBackend

    from pytest_gpuenv.perf import GpuBench, GpuPerfWarning, PerfContext

    monkeypatch.setattr(_bench, "_MONITORS", {})
    monkeypatch.setattr(amd_smi, "_state", {"smi": None, "why": "amdsmi is not installed (pip install ...)"})
    fb = FakeBackend([1e-4])
    fb.info.vendor = "amd"
    bench = GpuBench(PerfContext(backend_factory=lambda: fb, monitor_factory=_bench.default_monitor, max_time=0.2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        bench(lambda: None)
    texts = [str(w.message) for w in seen if issubclass(w.category, GpuPerfWarning)]
    assert any("amdsmi guards off (clocks, throttling, processes): amdsmi is not installed" in t for t in texts)
    monkeypatch.setattr(amd_smi, "_state", {"smi": FakeSmi(), "why": None})
    monkeypatch.setattr(_bench, "_MONITORS", {})
    fb2 = FakeBackend([1e-4])
    fb2.info.vendor, fb2.info.pci_bus_id, fb2.info.uuid = "amd", "0000:20:00.0", None
    mon = _bench.default_monitor(fb2)
    assert isinstance(mon, amd_smi.Monitor) and mon.max_mhz == 2100.0


def test_nvml_monitor_says_why_its_guards_are_off(monkeypatch):
    # runtime/nvml.py: without nvidia-ml-py every guard is off; the note names the reason
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml, "_state", {})
    mon = nvml.Monitor("GPU-1234")
    assert not mon.available and mon.throttle_reasons() is None
    assert mon.note == f"NVML guards off (clocks, throttling, processes): nvidia-ml-py is not installed ({nvml.INSTALL_HINT})"
    assert nvml.INSTALL_HINT.startswith("pip install nvidia-ml-py")


def test_nvml_monitor_throttle_reasons_and_partial_guards():
    # nvml.h nvmlClocksEventReason*: 0x1 GpuIdle and 0x2 ApplicationsClocksSetting hold nothing down, 0x4
    # SwPowerCap does; pynvml names as in nvidia-ml-py (nvmlDeviceGetCurrentClocksEventReasons,
    # nvmlDeviceGetComputeRunningProcesses_v3)
    def no_procs(h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    fake = types.SimpleNamespace(
        nvmlDeviceGetHandleByUUID=lambda u: "h", nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetClockInfo=lambda h, kind: 1755, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1 | 0x4,
        nvmlDeviceGetComputeRunningProcesses_v3=no_procs)
    mon = nvml.Monitor("GPU-1234", nvml=fake)
    assert mon.available and mon.max_mhz == 1980.0 and mon.throttle_reasons() == ["SW power cap"]
    assert list(mon.unavailable) == ["processes"] and mon.note.startswith("NVML guards off (processes)")


def test_perf_table_says_which_guards_were_off():
    # issue 10 item 10: "say in the perf table when a guard is unavailable" (default_monitor sets the
    # backend's monitor_note from runtime.amdsmi / runtime.nvml Monitor.note)
    from _perf_fake import make, noop

    from pytest_gpuenv.perf.report import summary_lines

    bench, fb, ctx = make([100e-6], name="AMD Instinct MI300X")
    fb.monitor_note = "amdsmi not installed (pip install 'pytest-gpuenv[amd]'): clock, throttle and process guards off"
    bench(noop, name="k")
    rec = ctx.session.entries[-1]
    assert rec.monitor_note == fb.monitor_note and rec.to_dict()["monitor_note"] == fb.monitor_note
    text = "\n".join(summary_lines(ctx.session.entries))
    assert "guards off on AMD Instinct MI300X: amdsmi not installed" in text
    assert text.count("guards off on") == 1
