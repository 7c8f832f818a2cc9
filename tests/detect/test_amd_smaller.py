"""Smaller differences from ROCm's sources (issue 26 item 7).

Sources read:
- ROCm/clr f9f995c ``rocclr/device/pal/paldevice.cpp`` ``parseRequestedDeviceList`` (lines 1308-1370): on Windows
  a ``GPU-`` token is compared (``strcmp(pch + 4, uuid)``) with a 16-character string built by ``itoa`` of each
  byte of the PCI domain, bus, device and function, each write starting one character after the last.
- ROCm/amdsmi 0ceca28 ``src/amd_smi/amd_smi_uuid.cc`` (``uuid_t`` lines 29-49, ``print_uuid`` 51-65,
  ``insert_asic_serial`` 67-73, ``amdsmi_uuid_gen`` 91-106) and ``src/amd_smi/amd_smi.cc``
  ``amdsmi_get_gpu_device_uuid`` (lines 2396-2425: the DRM ``unique_id`` read as hex, the device id, fcn 0xff).
- ROCm/ROCT-Thunk-Interface tag rocm-6.1.0 ``src/topology.c`` lines 1211-1224: HSA_OVERRIDE_GFX_VERSION written
  into ``EngineId``; ROCm/ROCR-Runtime c7785a6 ``libhsakmt/src/topology.c`` lines 1218-1232: into
  ``OverrideEngineId``, which ``GpuAgent::GpuAgent`` (amd_gpu_agent.cpp) uses only when non-zero.
- ROCm/clr f9f995c ``rocclr/device/rocm/rocdevice.cpp`` lines 552-562: after the HIP mask, a device whose
  ``create()`` fails is skipped (``continue``), so HIP has fewer devices than the mask chose.
"""

from __future__ import annotations

import pytest
from _machines import amd_machine

from pytest_gpuenv.base.model import Device
from pytest_gpuenv.detect import _core, detect
from pytest_gpuenv.detect._hipmask import pal_uuid, parse_hip
from pytest_gpuenv.runtime import amdsmi as amd_smi

TOPO = "sys/devices/virtual/kfd/kfd/topology"


pytestmark = pytest.mark.usefixtures("no_outer_masks")


# ------------------------------------------------------------------------------ Windows (PAL) UUID tokens
@pytest.mark.parametrize("pci, text", [
    ("0000:0c:00.0", "0000100000000000"),  # bus 12 -> "12" then overwritten: "1"
    ("0000:83:00.0", "0000-00000000000"),  # bus 0x83 as a signed char is -125: "-"
    ("0001:2d:1f.7", "1000400030007000"),
])
def test_pal_uuid_string(pci, text):
    assert pal_uuid(pci) == text and len(text) == 16


def test_windows_hip_mask_uuid_token_names_the_pci_device():
    devs = [Device(0, "amd", pci="0000:03:00.0"), Device(1, "amd", pci="0000:0c:00.0")]
    assert parse_hip("GPU-0000100000000000", devs, windows=True) == [1]
    # ROCr's GPU-<unique_id> form means nothing to PAL: the token is no index, the list ends
    assert parse_hip("GPU-3cbe002bd3b6313d,0", devs, windows=True) == []


# ----------------------------------------------------------------------------------------- amdsmi's UUID
def test_amdsmi_uuid_and_its_serial():
    u = amd_smi.amdsmi_uuid(0x3CBE002BD3B6313D, 0x74A1)
    assert u == "3cff74a1-0000-1000-80be-002bd3b6313d"
    assert amd_smi.uuid_serial(u) == amd_smi.uuid_serial("GPU-3cbe002bd3b6313d") == 0x3CBE002BD3B6313D
    # hipDeviceGetUuid's bytes are the 16 ASCII hex characters; torch prints them as a UUID
    ascii_form = "33636265-3030-3262-6433-623633313364"
    assert amd_smi.uuid_serial(ascii_form) == 0x3CBE002BD3B6313D


class UuidSmi:
    class AmdSmiClkType:
        GFX = 1

    def amdsmi_get_processor_handles(self):
        return ["a", "b"]

    def amdsmi_get_gpu_device_bdf(self, h):
        raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")

    def amdsmi_get_gpu_device_uuid(self, h):
        return amd_smi.amdsmi_uuid({"a": 0x1111, "b": 0x3CBE002BD3B6313D}[h], 0x74A1)

    def amdsmi_get_clock_info(self, h, kind):
        return {"clk": 1000, "max_clk": 2100}

    def amdsmi_get_violation_status(self, h):
        return {"active_ppt_pwr": False}

    def amdsmi_get_gpu_process_list(self, h):
        return []


def test_monitor_matches_rocr_uuid_through_the_serial():
    mon = amd_smi.Monitor(uuid="GPU-3cbe002bd3b6313d", smi=UuidSmi())
    assert mon.available and mon.handle == "b"


# ----------------------------------------------------------------- HSA_OVERRIDE_GFX_VERSION=0.0.0, per release
@pytest.mark.parametrize("rocm, dropped", [("6.2.4", True), ("6.4.1", False)])
def test_zero_override(tmp_path, rocm, dropped):
    root = tmp_path / "m"
    amd_machine(root, 2, rocm=rocm)
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION": "0.0.0"}, probe="never")
    if dropped:  # ROCT wrote 0.0.0 into EngineId: ROCr's registry has no such ISA
        assert env.devices == [] and env.problem("rocr-isa-unsupported").severity == "error"
        assert "writes HSA_OVERRIDE_GFX_VERSION=0.0.0 into EngineId" in env.hidden_devices[0].unusable_reason
    else:  # OverrideEngineId 0 is ignored: the physical gfx942
        assert [d.arch for d in env.devices] == ["gfx942", "gfx942"]


# ------------------------------------------------------------------- clr drops devices whose create() fails
def test_hip_counting_fewer_than_the_model_is_named(tmp_path, monkeypatch):
    root = tmp_path / "m"
    amd_machine(root, 4)
    monkeypatch.setattr(_core, "_maybe_probe", lambda ctx: 3)  # the probe's hipGetDeviceCount, in its subprocess
    env = detect(root=str(root), environ={"HIP_VISIBLE_DEVICES": "0,1,2,3"}, probe="never")
    p = env.problem("hip-sees-fewer-devices")
    assert p.severity == "warning" and "HIP counts 3 GPU(s) where the files and masks give 4" in p.message


def test_probed_devices_carry_the_pci_bus_id_pal_tokens_need():
    # the HIP probe reads hipDeviceGetPCIBusId (clr hip_device_runtime.cpp lines 529-553); on Windows that is
    # what a GPU- token of HIP_VISIBLE_DEVICES is compared through (pal_uuid)
    d = _core._probe_device(0, {"vendor": "amd", "arch": "gfx1100", "pci": "0000:0c:00.0"}, "rocm")
    assert d.pci == "0000:0c:00.0"
    assert parse_hip("GPU-" + pal_uuid(d.pci), [Device(0, "amd", pci="0000:03:00.0"), d], windows=True) == [1]
