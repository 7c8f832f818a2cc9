"""detect() on the machine the tests run on, and the runtime probe's failure modes."""

from __future__ import annotations

import importlib.util
import json
import os
import time

import pytest

from pytest_gpuenv.base.model import GpuEnv, Usability
from pytest_gpuenv.detect import _probe, detect
from pytest_gpuenv.detect.visible import parse_visible

debian_rocm = pytest.mark.skipif(
    not os.path.exists("/usr/bin/hipcc") or os.path.exists("/opt/rocm") or os.path.exists("/sys/module/amdgpu"),
    reason="needs the CPU-only Debian machine with Debian's ROCm 5.2.3 packages (/usr/bin/hipcc, no /opt/rocm)",
)


@debian_rocm
def test_cpu_only_debian_machine():
    env = detect()
    assert env.backend == "cpu" and env.kind == "cpu" and env.devices == []
    assert env.rocm["version"] == "5.2.3" and env.rocm["path"] == "/usr"
    p = env.problem("rocm-installed-no-driver")
    assert p is not None and p.severity == "info"
    assert env.compilers["hipcc"] == "/usr/bin/hipcc"
    assert env.compilers["nvcc"] and env.compilers["nvcc"].endswith("/nvcc")
    assert env.compilers["hiprtc"] is True and env.compilers["nvrtc"] is True
    if importlib.util.find_spec("torch") is None:
        assert env.torch is None
    else:
        assert env.torch["build"] == "cpu" and env.torch["version"].endswith("+cpu")
    assert "torch-cpu-build" not in env.problem_codes
    assert [q.code for q in env.problems if q.severity != "info"] == []
    assert env.probe["ran"] is False


def test_real_system_never_raises_and_round_trips():
    env = detect(probe="never")
    d = env.to_dict()
    assert GpuEnv.from_dict(json.loads(json.dumps(d))).to_dict() == d
    assert env.backend in ("cpu", "rocm", "cuda")
    assert env.detect_seconds is not None and env.detect_seconds < 5


def test_usability_keeps_its_json_values():
    """``GpuEnv.usable`` is a Usability; ``gpuenv info --json`` prints true, false or the word, as before."""
    for u in Usability:
        data = json.loads(json.dumps(GpuEnv(usable=u).to_dict()))
        assert data["usable"] == u.value and GpuEnv.from_dict(data).usable is u
    assert [bool(u) for u in Usability] == [True, False, True, True]
    with pytest.raises(ValueError, match="'maybe' is not a valid Usability"):
        GpuEnv.from_dict({"usable": "maybe"})


def test_detect_imports_no_gpu_framework():
    """The detector itself never imports torch/hip/cuda/numpy (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys; from pytest_gpuenv.detect import detect; detect(probe='never');"
        "bad = [m for m in ('torch', 'hip', 'cuda', 'cupy', 'triton', 'numpy') if m in sys.modules];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.skipif(not os.path.exists("/proc/driver/nvidia/version"), reason="needs an NVIDIA driver")
def test_nvidia_machine_via_nvml():
    env = detect()
    assert env.backend == "cuda" and env.devices
    assert all(d.arch and d.arch.startswith("sm_") and d.memory_bytes for d in env.devices)


# ---------------------------------------------------------------------------- probe
def _fake(monkeypatch, script: str) -> None:
    monkeypatch.setattr(_probe, "SCRIPT", script)


def test_hung_probe_times_out(monkeypatch):
    _fake(monkeypatch, "import time; time.sleep(60)")
    t0 = time.perf_counter()
    env = detect(probe="always", probe_timeout=1)
    assert time.perf_counter() - t0 < 10
    p = env.problem("probe-timeout")
    assert p is not None and "1 s" in p.message
    assert env.probe["ran"] is True and env.probe["ok"] is False


def test_hung_probe_with_children_is_killed(monkeypatch):
    _fake(monkeypatch, "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                       "'import time; time.sleep(60)']); time.sleep(60)")
    t0 = time.perf_counter()
    env = detect(probe="always", probe_timeout=1)
    assert time.perf_counter() - t0 < 10
    assert "probe-timeout" in env.problem_codes


@pytest.mark.parametrize("script", ["import os; os.abort()", "raise SystemExit(3)", "print('not json')",
                                    "print('[1, 2]')", "print('{\"devices\": 5}')"])
def test_crashing_or_garbled_probe(monkeypatch, script):
    _fake(monkeypatch, script)
    env = detect(probe="always", probe_timeout=20)
    p = env.problem("probe-failed")
    assert p is not None and p.fix
    assert env.backend in ("cpu", "rocm", "cuda")


FAKE_AMD = (
    "import json; print(json.dumps({'source': 'hip-python', 'devices': ["
    "{'vendor': 'amd', 'name': 'AMD Radeon RX 7900 XTX', 'arch': 'gfx1100', 'memory_bytes': 25753026560,"
    " 'warp_size': 32}, {'vendor': 'amd', 'name': 'AMD Radeon RX 7900 XTX', 'arch': 'gfx1100',"
    " 'memory_bytes': 25753026560, 'warp_size': 32}]}))"
)


@pytest.mark.skipif(os.path.exists("/sys/class/kfd") or os.path.exists("/proc/driver/nvidia"),
                    reason="merging a fake probe needs a machine without GPUs")
def test_probe_devices_become_the_list_and_masks_apply(monkeypatch):
    _fake(monkeypatch, FAKE_AMD)
    env = detect(probe="always", environ={**os.environ, "HIP_VISIBLE_DEVICES": "1"})
    assert env.kind == "rocm" and env.backend == "rocm" and env.usable is Usability.USABLE
    assert [(d.index, d.physical_index, d.arch, d.source) for d in env.devices] == [(0, 1, "gfx1100", "probe")]
    assert len(env.hidden_devices) == 1
    # an index past the end hides all (an empty HIP_VISIBLE_DEVICES counts as unset: clr rocdevice.cpp Device::init)
    env = detect(probe="always", environ={**os.environ, "HIP_VISIBLE_DEVICES": "5"})
    assert env.backend == "cpu" and "visible-devices-hide-all" in env.problem_codes


def test_probe_reports_no_device(monkeypatch):
    _fake(monkeypatch, "import json; print(json.dumps({'source': 'hip-python', 'devices': []}))")
    env = detect(probe="always")
    assert env.probe["ok"] is True and env.probe["source"] == "hip-python"


def test_probe_cache(monkeypatch):
    cache: dict = {}
    _fake(monkeypatch, FAKE_AMD)
    env1 = detect(probe="always", probe_cache=cache)
    probe_keys = [k for k in cache if k.startswith("gpuenv/probe/")]  # NVML answers may be cached too
    assert env1.probe["cached"] is False and len(probe_keys) == 1
    (key,) = probe_keys
    assert key.startswith("gpuenv/probe/")
    _fake(monkeypatch, "raise SystemExit(1)")  # would fail if it ran again
    env2 = detect(probe="always", probe_cache=cache)
    assert env2.probe["cached"] is True and env2.probe["ok"] is True
    env3 = detect(probe="always", probe_cache=cache, environ={**os.environ, "ROCR_VISIBLE_DEVICES": "0"})
    assert env3.probe["cached"] is False  # the visibility variables are part of the key


def test_probe_never_and_auto_do_not_spawn(monkeypatch):
    """``never`` runs no probe; ``auto`` runs none where the files answer (not WSL 2 or Windows). The stand-in
    records its calls rather than raising: ``detect()`` would turn an exception into a problem entry."""
    calls = []

    def stand_in(*args, **kwargs):
        calls.append(args)
        return {"ok": False, "error": "the test's stand-in"}

    monkeypatch.setattr(_probe, "run_probe", stand_in)
    env = detect(probe="never")
    assert calls == [] and env.probe["ran"] is False
    env = detect(probe="auto")
    if env.probe["reason"] is None:  # neither a count nor an arch or memory the files and NVML left unknown
        assert calls == [] and env.probe["ran"] is False
    calls.clear()
    env = detect(probe="always")  # the stand-in is where detect() calls it
    assert len(calls) == 1 and env.probe["ran"] is True and env.probe["error"] == "the test's stand-in"
    assert "detect-internal-error" not in env.problem_codes


# ---------------------------------------------------------------------------- parse_visible
@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        ("", []),
        ("0", [0]),
        ("1,0", [1, 0]),
        ("0,2,-1,1", [0, 2]),
        ("0,abc,1", [0]),
        ("1a,0", [1, 0]),
        ("0,0", []),
        ("4", []),
        ("2,9,1", [2]),
        ("+1", [1]),
        ("GPU-aa", [0]),
        ("GPU-a", []),  # ambiguous prefix
        ("GPU-bb,1", [2]),  # a UUID list ends at the first index
        ("1,GPU-bb", [1]),
        ("GPU-cc", []),
    ],
)
def test_parse_visible(value, expected):
    devices = ["GPU-aaaa", "GPU-abcd", "GPU-bbbb"]
    assert parse_visible(value, devices) == expected


def test_parse_visible_mixed_for_rocr():
    assert parse_visible("GPU-bb,1", ["GPU-aaaa", "GPU-abcd", "GPU-bbbb"], mixed=True) == [2, 1]


def test_parse_visible_with_count():
    assert parse_visible("3,1", 4) == [3, 1]
    assert parse_visible("3,1", 2) == []


FAKE_NVML = r"""
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;
int nvmlInitWithFlags(unsigned flags) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *b, unsigned n) { strncpy(b, "580.159.04", n); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)0x1234; return i == 0 ? 0 : 2; }
int nvmlDeviceGetName(void *h, char *b, unsigned n) { strncpy(b, "NVIDIA H200", n); return 0; }
int nvmlDeviceGetUUID(void *h, char *b, unsigned n) {
    strncpy(b, "GPU-8d2e4b7c-1f3a-4e9d-b6c5-7a0e2d4f8b91", n); return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) { m->total = 150754820096ULL; m->free = 0; m->used = 0; return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *a, int *b) { *a = 9; *b = 0; return 0; }
/* what Monitor asks */
int nvmlDeviceGetHandleByUUID(const char *u, void **h) {
    *h = (void *)0x1234; return strcmp(u, "GPU-8d2e4b7c-1f3a-4e9d-b6c5-7a0e2d4f8b91") == 0 ? 0 : 6; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *b, void **h) { return 6; }
int nvmlDeviceGetMaxClockInfo(void *h, int type, unsigned *c) { *c = type == 1 ? 1980 : 0; return 0; }
int nvmlDeviceGetClockInfo(void *h, int type, unsigned *c) { *c = type == 1 ? 1755 : 0; return 0; }
int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *r) { *r = 4; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *n, proc_t *p) {
    if (*n < 2) { *n = 2; return 7; }
    p[0].pid = 4242; p[1].pid = 4343; *n = 2; return 0; }
"""


@pytest.fixture
def fake_nvml(tmp_path):
    """A stand-in libnvidia-ml exporting what pynvml calls (no GPU needed)."""
    import subprocess

    pytest.importorskip("pynvml")
    if not any(os.path.exists(p) for p in ("/usr/bin/cc", "/usr/bin/gcc")):
        pytest.skip("requires a C compiler")
    src = tmp_path / "nvml.c"
    src.write_text(FAKE_NVML)
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    return lib


def test_nvml_through_pynvml_with_a_fake_library(fake_nvml, tmp_path):
    """pynvml's calls from a given library file, and the merge by UUID."""
    import pynvml

    from pytest_gpuenv.base.model import Device
    from pytest_gpuenv.detect import _nvidia
    from pytest_gpuenv.runtime import nvml

    before = pynvml.nvmlLib
    data = nvml.query(str(fake_nvml))
    assert pynvml.nvmlLib is before  # pynvml's own library is put back
    assert data["driver_version"] == "580.159.04" and data["max_cuda"] == "13.0"
    (dev,) = data["devices"]
    assert dev["arch"] == "sm_90" and dev["memory_bytes"] == 150754820096 and dev["name"] == "NVIDIA H200"
    devices = [Device(index=0, vendor="nvidia", name="NVIDIA H200", uuid="GPU-aaaa", source="/proc/driver/nvidia"),
               Device(index=1, vendor="nvidia", name="NVIDIA H200", uuid=dev["uuid"], source="/proc/driver/nvidia")]
    ev: list = []
    _nvidia.merge_nvml(devices, data, ev)
    assert devices[0].arch is None and devices[1].arch == "sm_90" and devices[1].memory_gib > 140
    only_nvml: list = []
    _nvidia.merge_nvml(only_nvml, data, ev)
    assert [(d.arch, d.source, d.uuid) for d in only_nvml] == [("sm_90", "nvml", dev["uuid"])]
    assert nvml.query(str(tmp_path / "missing.so")) is None
    answer = nvml.ask(str(tmp_path / "missing.so"))
    assert answer.data is None and answer.why.startswith(f"{tmp_path / 'missing.so'} could not be loaded: ")


def test_nvml_monitor_with_a_fake_library(fake_nvml):
    """Monitor's clocks, event reasons and processes through pynvml, against the stand-in library."""
    import pynvml

    from pytest_gpuenv.runtime import nvml

    with nvml._library(pynvml, str(fake_nvml)):
        pynvml.nvmlInit()
        try:
            mon = nvml.Monitor("8d2e4b7c-1f3a-4e9d-b6c5-7a0e2d4f8b91", nvml=pynvml)
            assert mon.available and mon.max_mhz == 1980.0 and mon.sm_mhz() == 1755.0
            assert mon.event_reasons() == 4 and mon.processes() == [4242, 4343]
            assert not nvml.Monitor(pci_bus_id="0000:01:00.0", nvml=pynvml).available
        finally:
            pynvml.nvmlShutdown()


def test_no_pynvml_means_nvml_unavailable(monkeypatch):
    import sys

    from pytest_gpuenv.runtime import nvml

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    monkeypatch.setattr(nvml, "_state", {})
    assert nvml.query() is None and nvml.query("/no/such/libnvidia-ml.so.1") is None
    assert nvml.ask() == (None, "nvidia-ml-py is not installed") and not nvml.installed()
    assert nvml.driver_version() is None
    mon = nvml.Monitor("GPU-1234")
    assert not mon.available and mon.sm_mhz() is None and mon.processes() is None and mon.foreign_processes() == []
