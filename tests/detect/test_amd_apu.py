"""APUs: the memory KFD reports for an MI300A and a Strix Halo (gfx1151) (issue 26 item 10).

Sources (amdgpu, as in ROCm/amdgpu 0069a17 and the amd-gfx list):
- ``amdgpu_ttm.c`` ``amdgpu_ttm_init``: on an APU, ``if (adev->gmc.real_vram_size < gtt_size) adev->apu_prefer_gtt =
  true`` (a carve-out smaller than GTT: the Strix Halo default; no carve-out at all: the MI300A, ``is_app_apu``).
- ``amdgpu_amdkfd.c`` ``amdgpu_amdkfd_get_local_mem_info``: with a partition (``xcp``, the MI300A) the private size
  is ``KFD_XCP_MEMORY_SIZE``; else with ``apu_prefer_gtt`` ``local_mem_size_public = ttm_tt_pages_limit() <<
  PAGE_SHIFT`` and private 0; else the carve-out (visible/real VRAM). ``amdgpu_amdkfd_xcp_memory_size``: on an app
  APU in NPS1, the GTT limit too (``ttm_tt_pages_limit() << PAGE_SHIFT``), divided per partition.
- ``kfd_crat.c``: one memory bank of that size, FB_PRIVATE where a private size exists, else FB_PUBLIC;
  ``kfd_topology.c`` ``node_show`` prints ``local_mem_size 0`` always.
- ``ttm_tt_pages_limit()`` defaults to half the system memory (ttm ``pages_limit``), changed with
  ``ttm.pages_limit=``/``amdgpu.gttsize=``.
So HIP sees, and pytest-gpuenv reports, the GTT limit on these APUs, not the BIOS carve-out, unless the carve-out
is at least as large as GTT.
"""

from __future__ import annotations

import pytest
from _machines import apu_machine

from pytest_gpuenv.detect import detect

GiB = 1 << 30


pytestmark = pytest.mark.usefixtures("no_outer_masks")


@pytest.mark.parametrize("kind, bank, arch, wave, name", [
    # 128 GiB of HBM is system memory; GTT limit by default half of it, one FB_PRIVATE bank (the xcp path)
    ("mi300a", 64 * GiB, "gfx942", 64, "AMD Instinct MI300A"),
    # 128 GiB LPDDR5X, 512 MiB carve-out < GTT: apu_prefer_gtt, the GTT limit (half the system memory by default)
    ("strix-halo", 64 * GiB, "gfx1151", 32, "AMD GPU gfx1151"),
    # a BIOS carve-out of 96 GiB with GTT below it: not apu_prefer_gtt, KFD reports the carve-out
    ("strix-halo", 96 * GiB, "gfx1151", 32, "AMD GPU gfx1151"),
])
def test_apu_memory_is_what_kfd_reports(tmp_path, kind, bank, arch, wave, name):
    apu_machine(tmp_path / "m", kind, bank)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    (d,) = env.devices
    assert (d.arch, d.warp_size, d.memory_bytes, d.name) == (arch, wave, bank, name)
    assert env.backend == "rocm"


def test_memory_requirement_counts_kfds_number(tmp_path):
    # requires_memory compares with what KFD (and so HIP's totalGlobalMem) reports: the GTT limit
    from pytest_gpuenv.marks.markers import PluginMark
    from pytest_gpuenv.marks.skipping import evaluate

    apu_machine(tmp_path / "m", "strix-halo", 64 * GiB)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    assert evaluate([PluginMark("requires_memory", ("48GiB",), {})], env) is None
    skip = evaluate([PluginMark("requires_memory", ("80GiB",), {})], env)
    assert skip is not None and "64.0 GiB" in skip.reason


@pytest.mark.parametrize("gfx, mib", [(110501, 32), (110500, 2), (110003, 2), (110502, 1)])
def test_ryzen_apus_have_their_cache_row(tmp_path, gfx, mib):
    # ROCm's GPU specification table, "AMD Ryzen APUs" tab (ROCm/legacy-rocm-build e88a729
    # docs/reference/gpu-specs.rst): Radeon 8060S (gfx1151) 32 MiB Infinity Cache; Radeon 890M (gfx1150) and 780M
    # (gfx1103) 2 MiB of L2; Radeon 860M (gfx1152) 1 MiB. KFD names none of them, so the arch decides
    apu_machine(tmp_path / "m", "strix-halo", 64 * GiB)
    props = tmp_path / "m/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties"
    props.chmod(0o644)
    props.write_text(props.read_text().replace("gfx_target_version 110501", f"gfx_target_version {gfx}"))
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    assert env.devices[0].last_level_cache_bytes == mib << 20
