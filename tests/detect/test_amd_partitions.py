"""MI300 compute partitions (CPX) and memory partitions (NPS4): one KFD node per partition (issue 26 item 8).

Sources read:
- ROCm/amdgpu 0069a17 ``drivers/gpu/drm/amd/amdkfd/kfd_topology.c`` ``kfd_topology_add_device``:
  ``location_id = pci_dev_id(pdev); if (gpu->kfd->num_nodes > 1) location_id |= node_id`` (a patch on the amd-gfx
  list moved it to ``node_id << 28``, "On multi-partition nodes, node id = location_id[31:28]"); ``node_show``
  prints ``location_id`` as 32 bits, ``unique_id`` of the ASIC and ``num_xcc`` of the partition.
- ROCm/amdsmi 0ceca28 ``include/amd_smi/amdsmi.h`` lines 2417-2429 (``amdsmi_get_gpu_bdf_id``): partition id in
  location_id [31:28], function in [2:0]; ``py-interface/amdsmi_interface.py`` ``_format_bdf`` (lines 521-537):
  the BDF string carries the function only.
- amd-gfx ``amdgpu_amdkfd_xcp_memory_size``: ``mem_partitions[mem_id].size / num_xcp_per_mem_partition``,
  ``ALIGN_DOWN(.., PAGE_SIZE)``: the size each partition's mem_bank reports.
- ROCm/clr f9f995c ``hipamd/src/hip_device_runtime.cpp`` ``hipDeviceGetPCIBusId`` (lines 529-553): the function
  digit is ``pcie.function`` = ROCr's BDFID & 7 (``rocclr/device/rocm/rocdevice.cpp`` lines 778-780);
  ``hipDeviceProp_t`` has no function.
"""

from __future__ import annotations

import pytest
from _machines import CPX_NPS4_BYTES, mi300x_cpx_nps4

from pytest_gpuenv.detect import detect
from pytest_gpuenv.runtime import amdsmi as amd_smi

pytestmark = pytest.mark.usefixtures("no_outer_masks")


@pytest.mark.parametrize("bits", ["function", "high"])
def test_cpx_nps4_is_eight_devices_with_their_memory(tmp_path, bits):
    pcis = mi300x_cpx_nps4(tmp_path / "m", gpus=2, partition_bits=bits)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    assert len(env.devices) == 16 and env.backend == "rocm"
    assert {d.memory_bytes for d in env.devices} == {CPX_NPS4_BYTES} == {25727860736}
    assert [d.pci for d in env.devices] == pcis
    if bits == "function":
        assert pcis[:8] == [f"0000:0c:00.{k}" for k in range(8)]
    else:  # every partition of a GPU at function 0; the partition only in bits 31:28
        assert set(pcis[:8]) == {"0000:0c:00.0"}
        assert any("partition 7" in e for e in env.evidence)


class PartitionSmi:
    """amdsmi of one CPX GPU: eight processor handles; their BDF strings as ``_format_bdf`` writes them."""

    class AmdSmiClkType:
        GFX = 1

    def __init__(self, bdfs):
        self.bdfs = bdfs

    def amdsmi_get_processor_handles(self):
        return [f"p{k}" for k in range(len(self.bdfs))]

    def amdsmi_get_gpu_device_bdf(self, h):
        return self.bdfs[int(h[1:])]

    def amdsmi_get_clock_info(self, h, kind):
        return {"clk": 1000 + int(h[1:]), "max_clk": 2100}

    def amdsmi_get_violation_status(self, h):
        return {"active_ppt_pwr": False}

    def amdsmi_get_gpu_metrics_info(self, h):
        return {"throttle_status": False}

    def amdsmi_get_gpu_process_list(self, h):
        return []


def test_monitor_finds_its_own_partition_by_function(tmp_path):
    pcis = mi300x_cpx_nps4(tmp_path / "m")
    mon = amd_smi.Monitor(pci_bus_id="0000:0c:00.5", smi=PartitionSmi(pcis))
    assert mon.available and mon.handle == "p5" and mon.sm_mhz() == 1005.0


def test_monitor_refuses_partitions_that_share_a_bdf(tmp_path):
    pcis = mi300x_cpx_nps4(tmp_path / "m", partition_bits="high")
    mon = amd_smi.Monitor(pci_bus_id="0000:0c:00.0", smi=PartitionSmi(pcis))
    assert not mon.available
    assert "8 amdsmi processors share PCI bus id 0000:0c:00.0 (partitions of one GPU)" in mon.note


def test_hip_describe_takes_the_function_from_hipDeviceGetPCIBusId():
    pytest.importorskip("hip")
    from _hip_standin import HipStandin

    from pytest_gpuenv.runtime.hip import HipRuntime

    class Props:
        name, gcnArchName = b"AMD Instinct MI300X", b"gfx942:sramecc+:xnack-"
        l2CacheSize, multiProcessorCount = 4 << 20, 38
        pciDomainID, pciBusID, pciDeviceID = 0, 0x0C, 0

    class Standin(HipStandin):
        def hipDeviceProp_t(self):
            return Props()

        def hipGetDeviceProperties(self, props, device):
            return (self._err("hipSuccess"),)

        def hipDeviceGetPCIBusId(self, length, device):
            return (self._err("hipSuccess"), b"0000:0c:00.3")

    info = HipRuntime(3, hip=Standin()).describe()
    assert info["pci_bus_id"] == "0000:0c:00.3" and info["sm_count"] == 38
