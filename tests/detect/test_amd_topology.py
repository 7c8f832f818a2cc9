"""What fails libhsakmt's whole topology, not just one node (issue 26 item 6).

Source read: ROCm/ROCR-Runtime c7785a6 (Oct 2024) ``libhsakmt/src/topology.c``:
- ``topology_sysfs_get_gpu_id`` (lines 610-626): ``fopen`` of ``nodes/N/gpu_id`` failing returns
  HSAKMT_STATUS_ERROR; ``fscanf(fd, "%ul", gpu_id) != 1`` returns NOT_SUPPORTED only for EPERM, else ERROR;
- ``topology_sysfs_check_node_supported`` (lines 636-712): NOT_SUPPORTED skips the node; any other error is
  returned; for a GPU node (gpu_id != 0) a ``properties`` file that cannot be opened, or reads 0 bytes, is an
  ERROR, and so is a missing drm_render_minor;
- ``hsakmt_topology_sysfs_get_system_props`` (lines 714-800): the first node whose check fails ends it
  (``goto sysfs_parse_failed``): no node at all, so hsa_init fails and ROCm sees no GPU.
"""

from __future__ import annotations

import os

import pytest
from _machines import amd_machine

from pytest_gpuenv.detect import detect

TOPO = "sys/devices/virtual/kfd/kfd/topology"


pytestmark = pytest.mark.usefixtures("no_outer_masks")


def _rewrite(path, text):
    os.chmod(path, 0o644)
    path.write_text(text)


@pytest.mark.parametrize("case, message", [
    ("gpu_id missing", "nodes/3/gpu_id is missing"),
    ("gpu_id text", "nodes/3/gpu_id holds no number ('ip discovery')"),
    ("gpu_id empty", "nodes/3/gpu_id holds no number ('')"),
    ("properties missing", "nodes/3 has no properties file"),
    ("properties empty", "nodes/3 has an empty properties file"),
    ("empty node dir", "nodes/5/gpu_id is missing"),
])
def test_a_broken_node_fails_every_gpu(tmp_path, case, message):
    root = tmp_path / "m"
    amd_machine(root, 4)
    node = root / TOPO / "nodes/3"
    if case == "gpu_id missing":
        (node / "gpu_id").unlink()
    elif case == "gpu_id text":
        _rewrite(node / "gpu_id", "ip discovery\n")
    elif case == "gpu_id empty":
        _rewrite(node / "gpu_id", "")
    elif case == "properties missing":
        (node / "properties").unlink()
    elif case == "properties empty":
        _rewrite(node / "properties", "")
    else:
        (root / TOPO / "nodes/5").mkdir()
    env = detect(root=str(root), environ={}, probe="never")
    assert env.backend == "cpu" and not any(d.usable for d in env.devices)
    p = env.problem("kfd-topology-invalid")
    assert p.severity == "error" and message in p.message and "ROCm (hsa_init) sees none of the" in p.message
    assert all(d.unusable_reason.startswith("ROCm sees no GPU: ") for d in env.devices)


@pytest.mark.parametrize("text", ["51847abc\n", " +51847\n"])
def test_gpu_id_is_read_as_fscanf_u_reads_it(tmp_path, text):
    # "%ul": leading space and a sign are taken, anything after the digits is left unread
    root = tmp_path / "m"
    amd_machine(root, 4)
    _rewrite(root / TOPO / "nodes/3/gpu_id", text)
    env = detect(root=str(root), environ={}, probe="never")
    assert len(env.devices) == 4 and "kfd-topology-invalid" not in env.problem_codes

