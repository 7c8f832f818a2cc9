"""GPUs ROCr drops after libhsakmt kept them, and the doorbell check that fails hsa_init (issue 26 item 4).

Sources read:
- ROCm/ROCR-Runtime tags rocm-5.2.0, 5.5.0, 5.6.0, 5.7.0, 6.0.0, 6.1.0, 6.2.0, 6.2.4, ``src/core/runtime/isa.cpp``
  ``IsaRegistry::GetSupportedIsas`` (6.2.4: lines 221-356, e.g. ``ISAREG_ENTRY_GEN("gfx941", 9, 4, 1, ...)`` at
  line 309); ROCm/rocm-systems branch release/rocm-rel-7.0 (64cf36d) ``projects/rocr-runtime/runtime/hsa-runtime/
  core/runtime/isa.cpp`` lines 338-441 (gfx942 at 392, gfx950 at 401, no gfx940/gfx941: removed by 13c591d,
  2025-02-19, "rocr: Remove gfx940 and gfx941 support").
- the same branch, ``amd_gpu_agent.cpp`` ``GpuAgent::GpuAgent`` lines 125-149: ``DoorbellType != 2`` throws
  ``HSA_STATUS_ERROR`` (added by 0d70045, 2025-05-28, "rocr: Remove deprecated doorbell type 1 support"); the ISA
  is looked up by ``OverrideEngineId`` when set (HSA_OVERRIDE_GFX_VERSION), else ``EngineId``, and a miss throws
  ``HSA_STATUS_ERROR_INVALID_ISA``; ``amd_topology.cpp`` ``DiscoverGpu`` lines 119-173 returns nullptr on
  INVALID_ISA and rethrows anything else; ``BuildTopology`` lines 320-376 ranks ROCR_VISIBLE_DEVICES over every
  GPU node (``kfdIdx``) before ``SurfaceGpuList`` creates the agents, the hidden ones included (``gpu_disabled``).
- libhsakmt ``hsakmttypes.h`` ``HSA_CAPABILITY``: DoorbellType is bits 12-13; Linux ``amdkfd/kfd_topology.c``
  ``kfd_topology_add_device``: Kaveri/Hawaii/Tonga get doorbell type 0, Carrizo/Fiji/Polaris/VegaM 1, the rest 2.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from _machines import AMD4 as U
from _machines import amd_machine

from pytest_gpuenv.detect import detect
from pytest_gpuenv.detect._rocr import registry_lacks

TOPO = "sys/devices/virtual/kfd/kfd/topology"
pytestmark = pytest.mark.usefixtures("no_outer_masks")


def set_prop(root, node, key, value):
    path = root / TOPO / f"nodes/{node}/properties"
    os.chmod(path, 0o644)
    text = path.read_text()
    text = re.sub(rf"^{key} .*$", f"{key} {value}", text, flags=re.M) if re.search(rf"^{key} ", text, re.M) \
        else text + f"{key} {value}\n"
    path.write_text(text)
    os.chmod(path, 0o444)


def machine(tmp_path, rocm, gfx=90402, odd=None):
    """4 GPUs of ``gfx``; ``odd``: (KFD node, gfx_target_version) of one different GPU."""
    root = tmp_path / "m"
    amd_machine(root, 4, gfx_target_version=gfx, rocm=rocm)
    if odd:
        set_prop(root, odd[0], "gfx_target_version", odd[1])
    return root


def seen(env):
    return [U.index(d.uuid) for d in env.devices]


@pytest.mark.parametrize("rocm, isa, lacks", [
    ("7.0.2", "gfx941", True), ("7.2.0", "gfx940", True), ("6.2.4", "gfx941", False),  # removed in 7.0
    ("6.2.4", "gfx950", True), ("6.4.1", "gfx950", None), ("7.0.0", "gfx950", False),  # 6.3/6.4 not read: unknown
    ("5.6.1", "gfx942", True), ("5.7.1", "gfx942", False), ("5.4.3", "gfx942", True),  # 5.4: 5.5 lacks it too
    ("5.4.3", "gfx1100", None), ("5.1.3", "gfx942", None),  # between/before the releases read: nothing said
    ("6.0.2", "gfx1151", True), ("6.1.0", "gfx1151", False), ("6.1.3", "gfx1200", True),
    ("6.3.0", "gfx1250", True), ("7.1.0", "gfx1250", None),  # after the last release read: nothing said
])
def test_registry_per_rocm_release(rocm, isa, lacks):
    why = registry_lacks(rocm, isa)
    assert (why is not None) == bool(lacks), why


def test_unsupported_node_is_dropped_and_shifts_hip_ordinals(tmp_path):
    root = machine(tmp_path, "7.0.2", odd=(2, 90401))  # physical GPU 1 is a gfx941
    env = detect(root=str(root), environ={}, probe="never")
    assert seen(env) == [0, 2, 3] and [d.index for d in env.devices] == [0, 1, 2]
    (gone,) = env.hidden_devices
    assert gone.uuid == U[1] and not gone.usable
    assert gone.unusable_reason.startswith("ROCr of ROCm 7.0.2 has no gfx941 in its ISA registry (removed in ROCm 7.0): it drops this GPU")
    p = env.problem("rocr-isa-unsupported")
    assert p.severity == "warning" and "drops GPU(s) 1 (gfx941)" in p.message and "indices after" in p.message
    assert env.rocm["rocr_dropped"] == [1]


def test_rocr_ranks_are_taken_before_the_drop(tmp_path):
    # ROCR_VISIBLE_DEVICES=1,2 names the dropped gfx941 (rank 0) and GPU 2: HIP sees only GPU 2, as device 0
    root = machine(tmp_path, "7.0.2", odd=(2, 90401))
    env = detect(root=str(root), environ={"ROCR_VISIBLE_DEVICES": "1,2"}, probe="never")
    assert seen(env) == [2]
    # ... and HIP_VISIBLE_DEVICES=1 indexes past the drop: nothing
    env = detect(root=str(root), environ={"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "1"}, probe="never")
    assert seen(env) == []
    assert env.problem("visible-devices-hide-all").message.startswith("0 GPUs visible: HIP_VISIBLE_DEVICES='1'")


def test_override_to_an_isa_rocr_lacks_leaves_no_gpu(tmp_path):
    root = machine(tmp_path, "7.0.2")
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION": "9.4.1"}, probe="never")
    assert env.devices == [] and env.backend == "cpu"
    p = env.problem("rocr-isa-unsupported")
    assert p.severity == "error" and "no AMD GPU is left" in p.message and "unset HSA_OVERRIDE_GFX_VERSION" in p.fix
    assert all("HSA_OVERRIDE_GFX_VERSION makes it gfx941" in d.unusable_reason for d in env.hidden_devices)
    # the same override on ROCm 6.2.4, whose registry has gfx941: every GPU runs as gfx941
    root6 = machine(tmp_path / "six", "6.2.4")
    env6 = detect(root=str(root6), environ={"HSA_OVERRIDE_GFX_VERSION": "9.4.1"}, probe="never")
    assert [d.arch for d in env6.devices] == ["gfx941"] * 4 and "rocr-isa-unsupported" not in env6.problem_codes


def test_old_doorbell_fails_hsa_init_for_the_whole_machine(tmp_path):
    root = machine(tmp_path, "7.0.2")
    set_prop(root, 3, "capability", 1 << 12)  # doorbell type 1 (a Polaris-era node)
    env = detect(root=str(root), environ={"ROCR_VISIBLE_DEVICES": "0"}, probe="never")
    assert env.devices == [] or not any(d.usable for d in env.devices)
    assert env.backend == "cpu"
    p = env.problem("rocr-doorbell-unsupported")
    assert p.severity == "error" and "KFD node(s) 3" in p.message and "doorbell type 1" in p.message
    # ROCm 6.x has no such check
    root6 = machine(tmp_path / "six", "6.4.1")
    set_prop(root6, 3, "capability", 1 << 12)
    assert len(detect(root=str(root6), environ={}, probe="never").devices) == 4


def test_info_and_skip_reason_say_why(pytester, tmp_path, monkeypatch):
    root = machine(tmp_path, "7.0.2")
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "9.4.1")
    info = subprocess.run([sys.executable, "-m", "pytest_gpuenv", "info", f"--root={root}", "--probe=never"],
                          capture_output=True, text=True, timeout=120)
    assert "ROCr of ROCm 7.0.2 has no gfx941 in its ISA registry (removed in ROCm 7.0): it drops this GPU" in info.stdout
    assert "rocr-isa-unsupported" in info.stdout
    pytester.makepyfile("def test_gpu(gpu_device): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--gpuenv-root={root}", "-rs", "--gpuenv-probe=never")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*no visible GPU, 4 hidden (ROCr of ROCm 7.0.2 has no gfx941*"])
