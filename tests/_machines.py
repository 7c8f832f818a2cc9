"""Build file trees of multi-GPU machines (4 or 8 GPUs) in the formats of tests/data/gpu-roots.

The hand-written scenarios have at most two GPUs; xdist assignment needs bigger machines. These
builders write the same files the scenarios hold (DETECTION.md sections 3b and 5), nothing more.
"""

from __future__ import annotations

import os
import pathlib


def _w(path: pathlib.Path, text: str, mode: int = 0o444) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def nvidia_machine(root: pathlib.Path, n: int, model: str = "NVIDIA H100 80GB HBM3", driver: str = "550.90.07"):
    _w(root / "proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    _w(root / "proc/driver/nvidia/version",
       f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build\n")
    _w(root / "sys/module/nvidia/version", driver + "\n")
    _w(root / "sys/module/nvidia/initstate", "live\n")
    _w(root / "dev/nvidiactl", "", 0o666)
    _w(root / "dev/nvidia-uvm", "", 0o666)
    uuids = []
    for i in range(n):
        bdf = f"0000:{0x18 + 0x10 * i:02x}:00.0"
        uuid = f"GPU-{i:08x}-1111-2222-3333-{0xabcdef000000 + i:012x}"
        uuids.append(uuid)
        _w(root / f"proc/driver/nvidia/gpus/{bdf}/information",
           f"Model: \t\t {model}\nIRQ:   \t\t 0\nGPU UUID: \t {uuid}\nBus Location: \t {bdf}\n"
           f"Device Minor: \t {i}\nGPU Excluded:\t No\n")
        _w(root / f"dev/nvidia{i}", "", 0o666)
    return uuids


def amd_machine(root: pathlib.Path, n: int, gfx_target_version: int = 90402, wave: int = 64,
                vram: int = 205822885888, rocm: str = "6.4.1"):
    _w(root / "proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    _w(root / "sys/module/amdgpu/initstate", "live\n")
    _w(root / f"opt/rocm-{rocm}/.info/version", rocm + "\n")
    (root / "opt/rocm").symlink_to(f"rocm-{rocm}")
    topo = root / "sys/devices/virtual/kfd/kfd/topology"
    _w(topo / "generation_id", "1\n")
    _w(topo / "system_properties", "platform_oem 0\n")
    (root / "sys/class/kfd").mkdir(parents=True)
    (root / "sys/class/kfd/kfd").symlink_to("../../devices/virtual/kfd/kfd")
    _w(topo / "nodes/0/gpu_id", "0\n")
    _w(topo / "nodes/0/name", "\n")
    _w(topo / "nodes/0/properties", "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n")
    _w(root / "dev/kfd", "", 0o666)
    uuids = []
    for i in range(n):
        node = topo / f"nodes/{i + 1}"
        minor = 128 + 8 * i
        unique = 0x3CBE002BD3B6313D + i
        uuids.append(f"GPU-{unique:016x}")
        _w(node / "gpu_id", f"{51844 + i}\n")
        _w(node / "name", "ip discovery\n")
        _w(node / "properties",
           f"cpu_cores_count 0\nsimd_count 1216\nwave_front_size {wave}\nsimd_per_cu 4\n"
           f"gfx_target_version {gfx_target_version}\nvendor_id 4098\ndevice_id 29857\n"
           f"location_id {3072 + 256 * 16 * i}\ndomain 0\ndrm_render_minor {minor}\nlocal_mem_size 0\n"
           f"unique_id {unique}\nnum_xcc 8\n")
        _w(node / "mem_banks/0/properties", f"heap_type 1\nsize_in_bytes {vram}\nflags 0\nwidth 8192\n")
        _w(root / f"dev/dri/renderD{minor}", "", 0o666)
    return uuids


#: MI300X in CPX compute mode with NPS4 memory: 8 partitions (one XCD each) per GPU, 4 memory partitions
MI300X_VRAM = 205822885888
CPX_PARTITIONS, NPS = 8, 4
#: amdgpu_amdkfd_xcp_memory_size: the memory partition's size / num_xcp_per_mem_partition, page aligned down
CPX_NPS4_BYTES = (MI300X_VRAM // NPS) // (CPX_PARTITIONS // NPS) // 4096 * 4096


def mi300x_cpx_nps4(root: pathlib.Path, gpus: int = 1, partition_bits: str = "function", rocm: str = "6.4.1"):
    """An MI300X machine in CPX/NPS4 mode: each partition is its own KFD node (amdgpu ``kfd_topology_add_device``,
    ROCm/amdgpu 0069a17): ``location_id = pci_dev_id | node_id`` (``partition_bits="function"``; the form of
    a patch on the amd-gfx list, which amdsmi.h documents, puts ``node_id << 28``: ``"high"``), the ASIC's
    ``unique_id`` on every partition, ``num_xcc`` 1, 38 CUs, its own render node and the memory of
    ``CPX_NPS4_BYTES`` (two partitions per NPS4 memory partition). Returns the PCI bus ids, in node order."""
    amd_machine(root, 0, rocm=rocm)
    topo = root / "sys/devices/virtual/kfd/kfd/topology"
    out = []
    for g in range(gpus):
        bus = 0x0C + 0x10 * g
        for k in range(CPX_PARTITIONS):
            n = 1 + g * CPX_PARTITIONS + k
            minor = 128 + n - 1
            loc = (bus << 8) | (k if partition_bits == "function" else k << 28)
            out.append(f"0000:{bus:02x}:00.{k if partition_bits == 'function' else 0}")
            node = topo / f"nodes/{n}"
            _w(node / "gpu_id", f"{41000 + n}\n")
            _w(node / "name", "ip discovery\n")
            _w(node / "properties",
               f"cpu_cores_count 0\nsimd_count 152\nwave_front_size 64\nsimd_per_cu 4\ngfx_target_version 90402\n"
               f"vendor_id 4098\ndevice_id 29857\nlocation_id {loc}\ndomain 0\ndrm_render_minor {minor}\n"
               f"local_mem_size 0\nunique_id {0x3CBE002BD3B6313D + g}\nnum_xcc 1\n")
            _w(node / "mem_banks/0/properties", f"heap_type 1\nsize_in_bytes {CPX_NPS4_BYTES}\nflags 0\n")
            _w(root / f"dev/dri/renderD{minor}", "", 0o666)
    return out


def apu_machine(root: pathlib.Path, kind: str, bank_bytes: int, rocm: str = "7.0.2"):
    """One APU: ``kind`` "mi300a" (gfx942, 228 CUs, 6 XCDs, COHERENTHOSTACCESS) or "strix-halo" (gfx1151, 40 CUs,
    wave 32). ``bank_bytes``: the one memory bank KFD shows, as amdgpu sizes it (see tests/detect/test_amd_apu.py): the
    GTT limit (``ttm_tt_pages_limit() << PAGE_SHIFT``) when ``apu_prefer_gtt``, else the carve-out."""
    amd_machine(root, 0, rocm=rocm)
    topo = root / "sys/devices/virtual/kfd/kfd/topology"
    gfx, simd, wave, xcc, dev, cap, heap = {
        "mi300a": (90402, 912, 64, 6, 0x74A0, 1 << 30, 2),  # HSA_CAP_FLAGS_COHERENTHOSTACCESS, FB private (xcp)
        "strix-halo": (110501, 160, 32, 1, 0x1586, 0, 1),  # a device id outside detect's name table
    }[kind]
    node = topo / "nodes/1"
    _w(node / "gpu_id", "29001\n")
    _w(node / "name", "ip discovery\n")
    _w(node / "properties",
       f"cpu_cores_count 0\nsimd_count {simd}\nwave_front_size {wave}\nsimd_per_cu 4\ngfx_target_version {gfx}\n"
       f"vendor_id 4098\ndevice_id {dev}\nlocation_id {0xC100}\ndomain 0\ndrm_render_minor 128\nlocal_mem_size 0\n"
       f"capability {cap | 2 << 12}\nunique_id {0x5A5A0001}\nnum_xcc {xcc}\n")
    _w(node / "mem_banks/0/properties", f"heap_type {heap}\nsize_in_bytes {bank_bytes}\nflags 0\n")
    _w(root / "dev/dri/renderD128", "", 0o666)


#: the GPUs of amd_machine(root, 4), in physical order (their uuid)
AMD4 = ["GPU-3cbe002bd3b6313d", "GPU-3cbe002bd3b6313e", "GPU-3cbe002bd3b6313f", "GPU-3cbe002bd3b63140"]


def amd4_visible(root: pathlib.Path, **environ: str):  # type: ignore[no-untyped-def]
    """Detection of an amd_machine(root, 4) tree under ``environ``: the model and its devices' physical indexes."""
    from pytest_gpuenv.detect import detect

    env = detect(root=str(root), environ=environ, probe="never")
    return env, [AMD4.index(d.uuid) for d in env.devices]
