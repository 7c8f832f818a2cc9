"""Issue 10 items 4, 5, 6 and 8: AMD visibility as ROCm's own sources decide it.

Sources read (ROCm/rocm-systems 1b1610f, Aug 2025, and ROCm/clr f9f995c, Oct 2024):
- clr ``rocclr/device/rocm/rocdevice.cpp`` ``Device::init`` (lines 496-547): HIP's mask.
- clr ``rocclr/device/pal/paldevice.cpp`` ``parseRequestedDeviceList`` (lines 1308-1375): the same on Windows.
- ROCR-Runtime ``runtime/hsa-runtime/core/runtime/amd_filter_device.cpp`` (``RvdFilter``, lines 64-198) and
  ``amd_topology.cpp`` ``BuildTopology`` (lines 299-402): ROCR_VISIBLE_DEVICES.
- libhsakmt ``src/topology.c`` ``topology_sysfs_check_node_supported`` (lines 648-724),
  ``hsakmt_topology_sysfs_get_system_props`` (lines 802-808), ``topology_sysfs_get_node_props``
  (lines 1236-1251) and ``src/fmm.c`` ``hsakmt_open_drm_render_device`` (lines 2284-2323).
- torch ``torch/cuda/__init__.py`` ``_parse_visible_devices`` and ``_device_count_amdsmi`` (torch 2.13).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from _machines import AMD4 as U
from _machines import amd4_visible as _visible
from _machines import amd_machine
from _roots import new_root_dir, run_as

from pytest_gpuenv.base.model import Usability
from pytest_gpuenv.detect import detect
from pytest_gpuenv.detect._amd import parse_override

TOPO = "sys/devices/virtual/kfd/kfd/topology"
pytestmark = pytest.mark.usefixtures("no_outer_masks")


# ------------------------------------------------------------------------- item 4: HIP (clr)
@pytest.mark.parametrize("environ, physical", [
    # clr rocdevice.cpp Device::init: a repeated index is skipped (valid_indexes), not an empty list as in torch
    ({"HIP_VISIBLE_DEVICES": "0,0"}, [0]),
    ({"HIP_VISIBLE_DEVICES": "2,0,2"}, [2, 0]),
    # the first invalid token ends the list, the devices already chosen stay
    ({"HIP_VISIBLE_DEVICES": "2,x,1"}, [2]),
    ({"HIP_VISIBLE_DEVICES": "3,01"}, [3]),  # str_id != std::to_string(atoi(str_id)): no leading zero
    ({"HIP_VISIBLE_DEVICES": "1,,2"}, [1]),  # an empty token is invalid
    ({"HIP_VISIBLE_DEVICES": "1,"}, [1]),  # ... but a trailing comma ends the loop (pos < ordinals.size())
    # a token holding GPU- is the first device whose UUID contains it (case-sensitive, no ambiguity check);
    # indices and UUIDs mix freely
    ({"HIP_VISIBLE_DEVICES": "GPU-3cbe002bd3b6313,GPU-3cbe002bd3b6313f"}, [0, 2]),
    ({"HIP_VISIBLE_DEVICES": "3,GPU-3cbe002bd3b6313e"}, [3, 1]),
    # HIP_VISIBLE_DEVICES first, CUDA_VISIBLE_DEVICES only when HIP's is unset (flags.hpp default ""; an empty
    # value is " " to clr: tests/detect/test_amd_hipflags.py)
    ({"HIP_VISIBLE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "0"}, [2]),
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3]),
    # HIP indexes into what ROCr surfaced (gpu_agents_ after ROCr's filter)
    ({"ROCR_VISIBLE_DEVICES": "3,2", "HIP_VISIBLE_DEVICES": "1"}, [2]),
    # GPU_DEVICE_ORDINAL is read only when !amd::IS_HIP (OpenCL): HIP ignores it
    ({"GPU_DEVICE_ORDINAL": "1"}, [0, 1, 2, 3]),
])
def test_hip_mask_as_clr_reads_it(four, environ, physical):
    env, seen = _visible(four, **environ)
    assert seen == physical
    assert [d.index for d in env.devices] == list(range(len(physical)))
    assert env.backend == "rocm" and "visible-devices-hide-all" not in env.problem_codes


@pytest.mark.parametrize("value", ["01", "+1", " 1", "GPU-3CBE002BD3B63140", "GPU-ffff", "4"])
def test_hip_token_that_is_not_exactly_an_index_or_a_uuid_hides_all(four, value):
    # clr rocdevice.cpp Device::init: atoi + to_string round trip, UUID by case-sensitive substring
    env, seen = _visible(four, HIP_VISIBLE_DEVICES=value)
    assert seen == [] and env.backend == "cpu"
    assert env.problem("visible-devices-hide-all").message.startswith(f"0 GPUs visible: HIP_VISIBLE_DEVICES='{value}'")


def test_rocr_then_cuda_counts_as_hip_does_and_names_torchs_reading(four):
    # the case: ROCR_VISIBLE_DEVICES=0,1 with CUDA_VISIBLE_DEVICES=1 -> HIP sees 1 GPU (clr reads CUDA's
    # into ROCr's set); torch's _parse_visible_devices returns range(len(ROCR.split(","))) -> 2
    env, seen = _visible(four, ROCR_VISIBLE_DEVICES="0,1", CUDA_VISIBLE_DEVICES="1")
    assert seen == [1]
    p = env.problem("visible-devices-torch-differs")
    assert p.severity == "warning"
    assert "HIP reads CUDA_VISIBLE_DEVICES='1' within ROCR_VISIBLE_DEVICES='0,1' and sees 1 GPU(s)" in p.message
    assert "reads only the number of entries in ROCR_VISIBLE_DEVICES='0,1' and counts 2" in p.message


def test_windows_hip_mask_is_pal_s(four):
    # clr pal/paldevice.cpp parseRequestedDeviceList: strtok skips empty tokens, digits only (leading zeros
    # allowed), and devices come in ordinal order (requestedDevices is looked up per ordinal)
    from pytest_gpuenv.detect.visible import parse_hip

    assert parse_hip("3,,01", U, windows=True) == [1, 3]
    assert parse_hip("3,,01", U) == [3]


# ------------------------------------------------------------------------ item 5: ROCr's filter
@pytest.mark.parametrize("value, physical", [
    # BuildUsrDeviceList: a repeated index ends the list, the devices already chosen stay
    ("0,1,0", [0, 1]),
    # std::strtol(tmp, &end, 0): hex and octal; the whole token must be consumed
    ("0x1", [1]),
    ("03,0X2", [3, 2]),
    ("1,08", [1]),
    # BuildRvdTokenList: tokens upper-cased and trimmed, so UUIDs are case-insensitive
    (" 1 , 2 ", [1, 2]),
    ("gpu-3cbe002bd3b63140", [3]),
    # ProcessUuidToken: a prefix matching two devices ends the list
    ("1,GPU-3cbe002bd3b6313", [1]),
    # only the first numGpus tokens are read (loopCnt)
    ("3,2,1,0,junk", [3, 2, 1, 0]),
])
def test_rocr_mask_as_rocr_reads_it(four, value, physical):
    env, seen = _visible(four, ROCR_VISIBLE_DEVICES=value)
    assert seen == physical
    assert env.backend == "rocm" and "visible-devices-hide-all" not in env.problem_codes


@pytest.mark.parametrize("value", ["", "010", "1,,2", "GPU-3cbe002bd3b6313", "-1"])
def test_rocr_mask_that_leaves_nothing(four, value):
    # "" -> SelectZeroDevices; "010" is octal 8; an empty token makes token.at(0) throw inside hsa_init;
    # an ambiguous first UUID or a negative index selects nothing
    env, seen = _visible(four, ROCR_VISIBLE_DEVICES=value)
    assert seen == [] and env.backend == "cpu"
    assert env.problem("visible-devices-hide-all").message.startswith(f"0 GPUs visible: ROCR_VISIBLE_DEVICES='{value}'")


# ------------------------------------------------------ item 8: render nodes and per-node overrides
def _write(path, text, mode=0o444):
    path.write_text(text)
    os.chmod(path, mode)


def _set_minor(root, node, minor):
    props = root / TOPO / f"nodes/{node}/properties"
    lines = [f"drm_render_minor {minor}" if ln.startswith("drm_render_minor ") else ln
             for ln in props.read_text().splitlines()]
    _write(props, "\n".join(lines) + "\n")


@pytest.mark.parametrize("minor", [0, 300])
def test_render_minor_zero_or_out_of_range_fails_every_gpu(tmp_path, minor):
    # topology_sysfs_check_node_supported: !drm_render_minor -> HSAKMT_STATUS_ERROR; hsakmt_open_drm_render_device:
    # a minor outside 128..255 -> -EINVAL -> error; either fails hsakmt_topology_sysfs_get_system_props: no GPU
    root = tmp_path / "m"
    amd_machine(root, 4)
    _set_minor(root, 3, minor)
    env = detect(root=str(root), environ={}, probe="never")
    assert len(env.devices) == 4 and not any(d.usable for d in env.devices)
    assert env.backend == "cpu" and env.usable is Usability.UNUSABLE
    p = env.problem("render-minor-invalid")
    assert p.severity == "error" and "KFD node(s) 3" in p.message and "none of the 4 AMD GPU(s)" in p.message


def test_render_node_eacces_fails_every_gpu_not_only_its_own():
    # hsakmt_open_drm_render_device returns -errno; topology_sysfs_check_node_supported turns anything but
    # -ENOENT/-EPERM (EACCES here) into HSAKMT_STATUS_ERROR, so ROCm sees no GPU at all
    base = new_root_dir()
    try:
        root = base / "m"
        amd_machine(root, 4)
        os.chmod(root / "dev/dri/renderD144", 0o600)  # node 3's render node: root only
        env = run_as({"uid": 1000, "gid": 1000, "groups": [1000]}, root=str(root), environ={},
                     probe="never")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert len(env["devices"]) == 4 and not any(d["usable"] for d in env["devices"])
    assert env["backend"] == "cpu"
    (p,) = [p for p in env["problems"] if p["code"] == "render-permission-denied"]
    assert "/dev/dri/renderD144 not accessible to user '" in p["message"]
    assert "none of the 4 AMD GPU(s), not only these" in p["message"]
    reasons = [d["unusable_reason"] for d in env["devices"]]
    assert reasons[2] == "/dev/dri/renderD144 not accessible (EACCES)"
    assert reasons[0].startswith("ROCm sees no GPU: ")


def test_per_node_override_uses_libhsakmts_node_id_after_skipped_nodes(tmp_path):
    # topology_sysfs_get_node_props reads HSA_OVERRIDE_GFX_VERSION_<node_id> with the user node id: the index in
    # map_user_to_sysfs_node_id, which leaves out nodes whose render node is missing (-ENOENT). KFD nodes:
    # 0 CPU, 1..4 GPUs; renderD136 (node 2) missing -> libhsakmt nodes 0 CPU, 1 = sysfs 1, 2 = sysfs 3, 3 = sysfs 4
    root = tmp_path / "m"
    amd_machine(root, 4, gfx_target_version=100301)
    (root / "dev/dri/renderD136").unlink()
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION_2": "10.3.0", "HSA_OVERRIDE_GFX_VERSION": "11.0.0",
                                          "HSA_OVERRIDE_GFX_VERSION_4": "junk"}, probe="never")
    assert [(d.node, d.arch) for d in env.devices] == [(1, "gfx1100"), (3, "gfx1030"), (4, "gfx1100")]
    assert "hsa-override-invalid" not in env.problem_codes  # libhsakmt node 4 does not exist here
    assert any("HSA_OVERRIDE_GFX_VERSION_2=10.3.0: device 1 (KFD node 3, libhsakmt node 2)" in e for e in env.evidence)


def test_per_node_override_is_read_instead_of_the_global_one(tmp_path):
    # getenv(per_node_override) || getenv("HSA_OVERRIDE_GFX_VERSION"): a node with its own value never reads the
    # global one, so an invalid global value is harmless there; an invalid per-node value fails the topology
    root = tmp_path / "m"
    amd_machine(root, 1, gfx_target_version=100301)
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION_1": "10.3.0", "HSA_OVERRIDE_GFX_VERSION": "x"},
                 probe="never")
    assert env.devices[0].arch == "gfx1030" and env.usable is Usability.USABLE
    env = detect(root=str(root), environ={"HSA_OVERRIDE_GFX_VERSION_1": "10.3"}, probe="never")
    p = env.problem("hsa-override-invalid")
    assert p.severity == "error" and p.message.startswith("HSA_OVERRIDE_GFX_VERSION_1='10.3' is invalid")
    assert env.backend == "cpu" and env.devices[0].arch == "gfx1031"


@pytest.mark.parametrize("value, parsed", [
    # sscanf("%u.%u.%u%c") == 3: %u skips C-locale space and takes a sign; '.' must follow at once; nothing may
    # follow the stepping (%c would read it); glibc's %u is strtoul cast to 32 bits; major <= 63, others <= 255
    ("10.3.0", (10, 3, 0)), (" 10.\t3. 0", (10, 3, 0)), ("+11.0.0", (11, 0, 0)), ("-0.3.0", (0, 3, 0)),
    ("4294967306.3.0", (10, 3, 0)), ("10.3.0 ", None), ("10 .3.0", None), ("10.3.0\n", None), ("-1.0.0", None),
    ("0x10.3.0", None), ("64.0.0", None),
])
def test_override_value_as_sscanf_reads_it(value, parsed):
    assert parse_override(value) == parsed


# ----------------------------------------------------------------- item 6: xdist worker masks on AMD
RECORDER = """
import json, os, pathlib
from pytest_gpuenv.session.state import get_env
from pytest_gpuenv.detect import detect

MASKS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")

def pytest_sessionstart(session):
    wi = getattr(session.config, "workerinput", None)
    if wi is None:
        return
    own = detect(root=os.environ["TREE"], environ=dict(os.environ), probe="never")
    rec = {"vars": {k: os.environ.get(k) for k in MASKS},
           "assigned": [d.uuid for d in get_env(session.config).devices],
           "own": [d.uuid for d in own.devices if d.usable]}
    out = pathlib.Path(os.environ["RECORD_DIR"])
    out.mkdir(exist_ok=True)
    (out / (wi["workerid"] + ".json")).write_text(json.dumps(rec))
"""


@pytest.mark.parametrize("masks, physical", [
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3]),  # the case
    ({"HIP_VISIBLE_DEVICES": '""', "CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3]),  # removeQuotes('""') is "": CUDA's
    ({"ROCR_VISIBLE_DEVICES": "1,2,3", "CUDA_VISIBLE_DEVICES": "1,2"}, [2, 3]),  # CUDA's indexes into ROCr's
    ({"ROCR_VISIBLE_DEVICES": "3,0x2,1", "HIP_VISIBLE_DEVICES": "0,1"}, [3, 2]),
])
@pytest.mark.slow
def test_xdist_workers_get_the_gpus_the_masks_in_force_select(pytester, monkeypatch, masks, physical):
    # the worker keeps ROCR_VISIBLE_DEVICES and sets HIP_VISIBLE_DEVICES (read before CUDA_VISIBLE_DEVICES by
    # clr rocdevice.cpp Device::init) to indices into what ROCr surfaces; each worker re-detects with the
    # variables it ended up with and must find exactly the GPU the controller assigned it
    tree = new_root_dir()
    try:
        amd_machine(tree / "m", 4)
        for k, v in masks.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("TREE", str(tree / "m"))
        monkeypatch.setenv("RECORD_DIR", str(pytester.path / "rec"))
        pytester.makeconftest(RECORDER)
        pytester.makepyfile("def test_a(): pass\ndef test_b(): pass")
        result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", f"--gpuenv-root={tree / 'm'}")
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    result.assert_outcomes(passed=2)
    recs = {p.stem: json.loads(p.read_text()) for p in sorted((pytester.path / "rec").glob("gw*.json"))}
    assert sorted(recs) == ["gw0", "gw1"]
    for w, phys in zip(("gw0", "gw1"), physical):
        rec = recs[w]
        assert rec["assigned"] == [U[phys]], rec
        assert rec["own"] == rec["assigned"], rec
        assert rec["vars"]["ROCR_VISIBLE_DEVICES"] == masks.get("ROCR_VISIBLE_DEVICES")
        if "CUDA_VISIBLE_DEVICES" in masks:  # never left wider than the worker's own GPUs
            assert rec["vars"]["CUDA_VISIBLE_DEVICES"] == rec["vars"]["HIP_VISIBLE_DEVICES"]
