"""An NVIDIA GPU's arch and memory on a default install (issue 40): NVML gives them (nvidia-ml-py is a base
dependency), else the runtime probe, else problem ``gpu-facts-unknown`` names the fix, in ``gpuenv doctor`` and
in the reason of each marker that skips for want of them. The same for an AMD GPU whose arch or memory the KFD
files leave out.

The machine is an H100 box whose files come from a tree (tests/_machines.py); what is asked of the live system
(NVML through pynvml, the probe's subprocess) is stood in at its boundary: a ``pynvml`` module with nvidia-ml-py's
names, and ``_probe.run_probe``. So these hold on any machine, with or without a GPU.
"""

from __future__ import annotations

import sys
import types

import pytest
from _machines import amd_machine, nvidia_machine

from pytest_gpuenv import cli
from pytest_gpuenv.base.model import Device, GpuEnv
from pytest_gpuenv.detect import _core, _nvidia, _probe, checks, detect
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.fs import Fs
from pytest_gpuenv.marks.markers import PluginMark
from pytest_gpuenv.marks.skipping import evaluate
from pytest_gpuenv.runtime import nvml

pytestmark = pytest.mark.usefixtures("no_outer_masks")

#: 81559 MiB, what NVML reports for an H100 80GB HBM3 (tests/data/gpu-roots/h100_linux/_meta/expected.json)
H100_BYTES = 81559 << 20
#: what the issue's H100 skipped
MARKS = [("requires_arch", ("sm_90",)), ("requires_memory", ("40GiB",)), ("requires_capability", ("bf16",))]
PROBE_ERROR = "cuda: ModuleNotFoundError: No module named 'cuda'; torch: ModuleNotFoundError: No module named 'torch'"


def fake_pynvml(uuids: list[str], init_error: str = "") -> types.SimpleNamespace:
    """nvidia-ml-py's functions, answering for H100s with these UUIDs (``init_error``: nvmlInit raises it)."""

    class NVMLError(Exception):
        pass

    def init() -> None:
        if init_error:
            raise NVMLError(init_error)

    return types.SimpleNamespace(
        nvmlInit=init, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "550.90.07", nvmlSystemGetCudaDriverVersion_v2=lambda: 12040,
        nvmlDeviceGetCount=lambda: len(uuids), nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3", nvmlDeviceGetUUID=lambda h: uuids[h],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=H100_BYTES, free=H100_BYTES, used=0),
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
    )


@pytest.fixture
def h100(tmp_path, monkeypatch):
    """This system seen as a 2x H100 machine: its /proc/driver/nvidia and /dev from a tree, NVML asked as on the
    machine. ``h100.probe``: what the runtime probe answers (default: it fails, no cuda-python and no torch);
    ``h100.calls``: the probe's runs."""
    tree = tmp_path / "machine"
    uuids = nvidia_machine(tree, 2)
    state = types.SimpleNamespace(uuids=uuids, calls=[],
                                  probe={"ok": False, "devices": [], "source": None, "error": PROBE_ERROR})

    def native_linux(ctx: Ctx) -> None:
        ctx.env.kind = "cuda"
        ctx.devices = _nvidia.proc_devices(Fs(str(tree)), ctx.ev, ctx.problems)
        _nvidia.ask_nvml(ctx, ctx.devices, None)

    def run_probe(order, environ, timeout):
        state.calls.append(order)
        return state.probe

    monkeypatch.setattr(_core, "_linux", native_linux)
    monkeypatch.setattr(_probe, "run_probe", run_probe)
    monkeypatch.delenv("GPUENV_ROOT", raising=False)
    return state


def _detect(**kwargs) -> GpuEnv:
    return detect(platform="linux", **kwargs)


def _skips(env: GpuEnv) -> list:
    return [evaluate([PluginMark(name, args, {})], env) for name, args in MARKS]


def test_nvml_gives_arch_and_memory(h100, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(h100.uuids))
    env = _detect()
    assert [(d.arch, d.memory_bytes) for d in env.devices] == [("sm_90", H100_BYTES)] * 2
    assert h100.calls == [] and env.probe["ran"] is False  # NVML answered: no probe
    assert "gpu-facts-unknown" not in env.problem_codes
    assert _skips(env) == [None, None, None]


def test_without_nvml_the_probe_fills_them_matched_by_uuid(h100, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    # cuda-python answers in CUDA's order (fastest first): matched by UUID, not position
    h100.probe = {"ok": True, "source": "cuda-python", "error": None, "devices": [
        {"vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "memory_bytes": H100_BYTES - i,
         "warp_size": 32, "uuid": u} for i, u in enumerate(reversed(h100.uuids))]}
    env = _detect()
    assert h100.calls == [["cuda", "torch"]] and env.probe["reason"] == "facts"
    assert [(d.arch, d.memory_bytes) for d in env.devices] == [("sm_90", H100_BYTES - 1), ("sm_90", H100_BYTES)]
    assert "gpu-facts-unknown" not in env.problem_codes and "probe-failed" not in env.problem_codes
    assert _skips(env) == [None, None, None]


def test_without_nvml_or_probe_doctor_and_skips_name_the_fix(h100, monkeypatch, capsys):
    """The issue's H100: found, arch and memory unknown; doctor said "no problems found" and the markers
    skipped without saying what to install."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    env = _detect()
    p = env.problem("gpu-facts-unknown")
    assert p is not None and p.severity == "warning"
    assert p.message.startswith("the arch and memory of 2x NVIDIA H100 80GB HBM3 are unknown")
    assert "NVML: nvidia-ml-py is not installed" in p.message and PROBE_ERROR in p.message
    assert p.fix.startswith(nvml.INSTALL_HINT) and "cuda-python" in p.fix
    assert "probe-failed" not in env.problem_codes  # one problem for one cause
    for skip in _skips(env):
        assert skip is not None and skip.reason.endswith(f"[gpu-facts-unknown]; fix: {p.fix}"), skip
    assert "the memory of 2x NVIDIA H100 80GB HBM3 is unknown" in _skips(env)[1].reason
    assert "the arch of NVIDIA H100 80GB HBM3 is unknown" in _skips(env)[2].reason
    # gpuenv doctor: the problem with its fix, and exit 1
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "[warning] gpu-facts-unknown: the arch and memory of 2x NVIDIA H100" in out
    assert f"    fix: {nvml.INSTALL_HINT}" in out and "no problems found" not in out


def test_nvml_that_fails_is_named_with_its_fix(h100, monkeypatch):
    # the binding is there, libnvidia-ml.so.1 is not (a container started without the driver's utility libraries)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(h100.uuids, "NVML Shared Library Not Found"))
    env = _detect()
    p = env.problem("gpu-facts-unknown")
    assert "NVML: nvmlInit failed: NVMLError: NVML Shared Library Not Found" in p.message
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in p.fix and nvml.INSTALL_HINT not in p.fix


def test_probe_never_asks_neither_and_says_so(h100, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(h100.uuids))
    env = _detect(probe="never")
    assert h100.calls == [] and all(d.arch is None for d in env.devices)
    p = env.problem("gpu-facts-unknown")
    assert p.severity == "warning" and "--gpuenv-probe=auto" in p.fix and "probe 'never'" in p.message


def test_nvml_for_one_gpu_the_probe_for_the_other(h100, monkeypatch):
    # NVML answers for the second GPU only (the first is not in its list): the probe completes the first
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(h100.uuids[1:]))
    h100.probe = {"ok": True, "source": "cuda-python", "error": None, "devices": [
        {"vendor": "nvidia", "arch": "sm_90", "memory_bytes": 1 << 30, "warp_size": 32, "uuid": h100.uuids[0]}]}
    env = _detect()
    assert [(d.arch, d.memory_bytes) for d in env.devices] == [("sm_90", 1 << 30), ("sm_90", H100_BYTES)]
    assert "gpu-facts-unknown" not in env.problem_codes


def _dev(name: str, uuid=None, pci=None, arch=None) -> Device:
    return Device(index=0, vendor="nvidia", name=name, uuid=uuid, pci=pci, arch=arch, memory_bytes=None)


def test_probe_devices_pair_by_uuid_pci_or_an_order_both_share():
    files = [_dev("NVIDIA A100", pci="0000:18:00.0"), _dev("NVIDIA H100", pci="0000:28:00.0")]
    fastest_first = [_dev("NVIDIA H100", arch="sm_90"), _dev("NVIDIA A100", arch="sm_80")]
    # different models, CUDA's default order: positions would swap the archs, so nothing is paired
    assert _core._pairs(files, fastest_first, {}) == []
    pci_order = fastest_first[::-1]
    assert [(f.name, p.arch) for f, p in _core._pairs(files, pci_order, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})] == \
        [("NVIDIA A100", "sm_80"), ("NVIDIA H100", "sm_90")]
    by_pci = [_dev("NVIDIA H100", pci="0000:28:00.0", arch="sm_90"), _dev("NVIDIA A100", pci="0000:18:00.0",
                                                                          arch="sm_80")]
    assert [(f.name, p.arch) for f, p in _core._pairs(files, by_pci, {})] == \
        [("NVIDIA A100", "sm_80"), ("NVIDIA H100", "sm_90")]


def test_under_a_root_it_is_a_note(tmp_path):
    nvidia_machine(tmp_path / "m", 1)
    env = detect(root=str(tmp_path / "m"), environ={})
    p = env.problem("gpu-facts-unknown")
    assert p.severity == "info" and "run `gpuenv info` on that machine" in p.fix
    skip = evaluate([PluginMark("requires_arch", ("sm_90",), {})], env)
    assert "found unknown arch" in skip.reason and skip.reason.endswith(f"; fix: {p.fix}")


def test_amd_memory_kfd_leaves_out(tmp_path):
    # no VRAM bank in the KFD files: memory unknown, arch known
    amd_machine(tmp_path / "m", 1, vram=0)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    (d,) = env.devices
    assert d.arch == "gfx942" and d.memory_bytes is None
    p = env.problem("gpu-facts-unknown")
    assert p.message.startswith("the memory of 1x AMD Instinct MI300X (gfx942) is unknown") and p.severity == "info"
    skip = evaluate([PluginMark("requires_memory", ("40GiB",), {})], env)
    assert "[gpu-facts-unknown]" in skip.reason
    # an arch known needs no fix: requires_arch runs or skips on it
    assert evaluate([PluginMark("requires_arch", ("gfx942",), {})], env) is None
    skip = evaluate([PluginMark("requires_arch", ("gfx90a",), {})], env)
    assert "gpu-facts-unknown" not in skip.reason


def test_amd_fix_on_the_machine_names_hip_python():
    """On the live system the AMD fix is the probe's package for the installed ROCm (amdsmi is not asked for
    facts: the KFD files give arch and memory, the probe what they leave out)."""
    env = GpuEnv(kind="rocm", backend="rocm")
    env.rocm["version"] = "6.4.1"
    env.devices = [Device(index=0, vendor="amd", name="AMD GPU", arch=None, memory_bytes=None, warp_size=64)]
    env.probe = {"required": False, "ran": True, "ok": False, "source": None, "error": "hip: ModuleNotFoundError"}
    ctx = Ctx(env, Fs(None), {}, "auto", 1.0, None)
    checks.unknown_facts(ctx)
    p = env.problem("gpu-facts-unknown")
    assert p.severity == "warning" and "the runtime probe failed: hip: ModuleNotFoundError" in p.message
    assert 'pip install "hip-python==6.4.1.*"' in p.fix
    # only the memory unknown: only requires_memory skips for it
    env.problems.clear()
    env.devices[0].arch = "gfx942"
    checks.unknown_facts(ctx)
    assert env.problem("gpu-facts-unknown").message.startswith(
        "the memory of 1x AMD GPU (gfx942) is unknown: requires_memory skips on them (")


def test_a_count_only_the_probe_could_give_names_its_fix():
    """ROCm on WSL 2: only the probe (hip-python or torch) counts the GPUs; where it failed, the skip says how
    to mend it, as for an arch or memory."""
    from pytest_gpuenv.base.model import Problem, Usability

    env = GpuEnv(kind="rocm-wsl", backend="rocm", wsl=2, usable=Usability.PROBE_REQUIRED)
    env.probe = {"required": True, "ran": True, "ok": False, "source": None, "error": "hip: ModuleNotFoundError"}
    fix = "install hip-python or cuda-python (pip install pytest-gpuenv[amd] / [nvidia])"
    env.problems.append(Problem("probe-failed", "the runtime probe failed: hip: ModuleNotFoundError", fix=fix,
                                severity="warning", category="probe"))
    skip = evaluate([PluginMark("requires_rocm", (), {})], env)
    assert skip.reason == ("requires ROCm: found ROCm on WSL 2 found, device count unknown (runtime probe failed) "
                           f"[probe-failed]; fix: {fix}")
