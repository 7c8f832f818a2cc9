"""detect(root=...) on the hand-written machine trees, recreated for real (links, modes, users)."""

from __future__ import annotations

import json
import pwd

import pytest
from _roots import MI300, detect_as, materialize, scenario_env, scenario_expected

from pytest_gpuenv.base.model import STABLE_CODES, GpuEnv, Usability
from pytest_gpuenv.detect import detect

SCENARIOS = [
    "cpu_only_container",
    "cuda_wsl2",
    "h100_linux",
    "mi300x_linux",
    "rocm_container_missing_devices",
    "rocm_installed_no_gpu",
    "rocm_no_permission",
    "rx6700xt_unsupported_linux",
    "rx7900xtx_wsl2",
    "windows_hip_sdk",
]
#: scenario-specific codes the expected.json files use, beside model.STABLE_CODES
SCENARIO_CODES = {"arch-not-in-build", "wsl-no-kfd-sysfs", "nvidia-smi-not-on-path", "no-torch-rocm-on-windows",
                  "hsa-override-ignored-on-windows"}


def _map_expected(exp: dict) -> dict:
    """expected.json (DETECTION.md words) -> INTERFACE.md terms."""
    kind = exp["backend"]
    family = {"rocm-wsl": "rocm", "cuda-wsl": "cuda", "hip-windows": "rocm"}.get(kind, kind)
    usable = exp["usable"]
    if usable == "nvml-or-probe":
        usable = "probe-required"  # root mode: no library is loaded, so NVML cannot answer
    backend = "cpu" if usable is False else family
    return {"kind": kind, "backend": backend, "usable": Usability(usable)}


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name, roots, gpu_roots):
    scenario = gpu_roots / name
    exp = scenario_expected(scenario)
    env = detect_as(scenario, roots(name))
    want = _map_expected(exp)
    assert env.kind == want["kind"], env.evidence
    assert env.backend == want["backend"]
    assert env.usable is want["usable"]
    assert env.platform == exp["platform"]
    assert env.wsl == exp["wsl"]
    if exp.get("device_count") is not None:
        assert len(env.devices) == exp["device_count"]
    else:
        assert env.devices == []
    if exp["usable"] is False:
        assert env.devices and all(not d.usable and d.unusable_reason for d in env.devices)
    elif exp["usable"] is True and env.devices:
        assert all(d.usable for d in env.devices)
    checks = {"archs": "arch", "wave_size": "warp_size", "vram_bytes": "memory_bytes", "uuids": "uuid",
              "pci": "pci", "render_nodes": "render_node", "names": "name"}
    for key, attr in checks.items():
        if exp.get(key) is not None:
            assert [getattr(d, attr) for d in env.devices] == exp[key], key
    if "rocm_version" in exp:
        assert env.rocm["version"] == exp["rocm_version"]
    if "amdgpu_driver_version" in exp:
        assert env.rocm["driver_version"] == exp["amdgpu_driver_version"]
    if "driver_version" in exp:
        assert env.cuda["driver_version"] == exp["driver_version"]
    if "torch" in exp:
        for k, v in exp["torch"].items():
            assert env.torch[k] == v
        assert env.torch["build"] == "rocm"
    codes = set(env.problem_codes)
    assert set(exp["warnings"]) <= codes, env.problems
    loud = {p.code for p in env.problems if p.severity in ("warning", "error")}
    assert loud <= set(exp["warnings"]), env.problems
    for p in env.problems:
        assert p.fix, p
    # every scenario code is either stable or one the scenarios name
    assert set(exp["warnings"]) <= set(STABLE_CODES) | SCENARIO_CODES
    d = env.to_dict()
    assert GpuEnv.from_dict(json.loads(json.dumps(d))).to_dict() == d


def test_no_permission_message_names_user_and_group(roots, gpu_roots):
    scenario = gpu_roots / "rocm_no_permission"
    env = detect_as(scenario, roots("rocm_no_permission"))
    p = env.problem("kfd-permission-denied")
    try:
        user = pwd.getpwuid(1000).pw_name
    except KeyError:
        user = "alice"
    assert p.severity == "error" and p.category == "permission"
    assert "gfx1100" in p.message and "mode 0660 root:" in p.message
    assert f"sudo usermod -aG render,video {user}" in p.fix
    assert env.devices[0].memory_bytes == 25753026560
    assert env.describe().startswith("1x AMD Radeon RX 7900 XTX/XT (gfx1100, 24.0 GiB) present but not usable")


def test_same_tree_as_root_is_usable(roots, gpu_roots):
    """The permission answer really comes from os.access: as root the same tree is usable."""
    env = detect(root=str(roots("rocm_no_permission")), environ=scenario_env(gpu_roots / "rocm_no_permission"))
    assert env.backend == "rocm" and env.usable is Usability.USABLE


def test_container_missing_devices_fix(roots, gpu_roots):
    env = detect_as(gpu_roots / "rocm_container_missing_devices", roots("rocm_container_missing_devices"))
    p = env.problem("kfd-missing-in-container")
    assert p.severity == "error"
    assert "--device /dev/kfd --device /dev/dri" in p.fix and "--group-add" in p.fix
    assert env.container is True


def test_flattened_tree_is_read_too(gpu_roots):
    """Pointed at the scenario tree itself (links flattened) the detector still finds the GPUs."""
    env = detect(root=str(gpu_roots / "mi300x_linux"), environ=scenario_env(gpu_roots / "mi300x_linux"))
    assert [d.arch for d in env.devices] == ["gfx942", "gfx942"]
    assert env.rocm["version"] == "6.4.1"


# ---------------------------------------------------------------------------- HSA_OVERRIDE_GFX_VERSION
def test_override_makes_gfx1031_run_as_gfx1030(roots, gpu_roots):
    scenario = gpu_roots / "rx6700xt_unsupported_linux"
    env = detect_as(scenario, roots("rx6700xt_unsupported_linux"), HSA_OVERRIDE_GFX_VERSION="10.3.0")
    (dev,) = env.devices
    assert dev.physical_arch == "gfx1031" and dev.arch == "gfx1030"
    assert env.usable is Usability.USABLE and env.backend == "rocm"
    assert "arch-not-in-build" not in env.problem_codes
    assert env.visible["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"
    assert any("runs as gfx1030" in e for e in env.evidence)


def test_arch_not_in_build_suggests_override(roots, gpu_roots):
    env = detect_as(gpu_roots / "rx6700xt_unsupported_linux", roots("rx6700xt_unsupported_linux"))
    p = env.problem("arch-not-in-build")
    assert "gfx1031" in p.message and "invalid device function" in p.message
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in p.fix


@pytest.mark.parametrize("value", ["10.3", "gfx1030", "10.3.0.1", "", "ten"])
def test_invalid_override(value, roots, gpu_roots):
    env = detect_as(gpu_roots / "rx6700xt_unsupported_linux", roots("rx6700xt_unsupported_linux"),
                     HSA_OVERRIDE_GFX_VERSION=value)
    p = env.problem("hsa-override-invalid")
    assert p is not None and p.severity == "error"
    assert f"HSA_OVERRIDE_GFX_VERSION='{value}' is invalid" in p.message
    assert env.backend == "cpu" and env.usable is Usability.UNUSABLE
    assert env.devices[0].arch == "gfx1031"


# ---------------------------------------------------------------------------- visible devices
@pytest.mark.parametrize(
    "variables, uuids",
    [
        ({"HIP_VISIBLE_DEVICES": "1"}, [MI300[1]]),
        ({"HIP_VISIBLE_DEVICES": "1,0"}, [MI300[1], MI300[0]]),
        ({"ROCR_VISIBLE_DEVICES": "GPU-648d"}, [MI300[1]]),
        ({"ROCR_VISIBLE_DEVICES": "1,0", "HIP_VISIBLE_DEVICES": "1"}, [MI300[0]]),
        ({"ROCR_VISIBLE_DEVICES": "1"}, [MI300[1]]),
        ({"HIP_VISIBLE_DEVICES": "0,7,1"}, [MI300[0]]),
        ({"HIP_VISIBLE_DEVICES": "0,-1,1"}, [MI300[0]]),
        ({"CUDA_VISIBLE_DEVICES": "1"}, [MI300[1]]),
        # HIP reads CUDA_VISIBLE_DEVICES (HIP's unset) and indexes into what ROCr left; GPU_DEVICE_ORDINAL is
        # OpenCL's, not HIP's (clr rocclr/device/rocm/rocdevice.cpp Device::init; tests/detect/test_amd_visibility.py)
        ({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0"}, [MI300[1]]),
        ({"GPU_DEVICE_ORDINAL": "1"}, list(MI300)),
    ],
)
def test_amd_masks(variables, uuids, roots, gpu_roots):
    env = detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"), **variables)
    assert [d.uuid for d in env.devices] == uuids
    assert [d.index for d in env.devices] == list(range(len(uuids)))
    assert [d.physical_index for d in env.devices] == [MI300.index(u) for u in uuids]
    assert {d.uuid for d in env.hidden_devices} == set(MI300) - set(uuids)
    assert all(not d.usable and "hidden by" in d.unusable_reason for d in env.hidden_devices)
    for k, v in variables.items():
        assert env.visible[k] == v
    if "CUDA_VISIBLE_DEVICES" in variables and "ROCR_VISIBLE_DEVICES" not in variables:
        assert "cuda-visible-devices-on-rocm" in env.problem_codes
    assert env.backend == "rocm" and env.usable is Usability.USABLE


def test_hip_more_than_rocr(roots, gpu_roots):
    env = detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"),
                     ROCR_VISIBLE_DEVICES="1", HIP_VISIBLE_DEVICES="0,1")
    assert [d.uuid for d in env.devices] == [MI300[1]]
    p = env.problem("hip-visible-exceeds-rocr")
    assert p and "more devices than ROCR_VISIBLE_DEVICES" in p.message


# HIP_VISIBLE_DEVICES='' counts as unset for HIP and ROCR_VISIBLE_DEVICES=0,0 keeps device 0 (clr rocdevice.cpp,
# ROCR-Runtime amd_filter_device.cpp; tests/detect/test_amd_visibility.py): hide-all needs an empty ROCr mask or a bad index
@pytest.mark.parametrize("variables", [{"ROCR_VISIBLE_DEVICES": ""}, {"ROCR_VISIBLE_DEVICES": "5,0"},
                                       {"HIP_VISIBLE_DEVICES": "5"}])
def test_amd_masks_hide_all(variables, roots, gpu_roots):
    env = detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"), **variables)
    assert env.devices == [] and len(env.hidden_devices) == 2
    assert env.backend == "cpu" and env.usable is Usability.UNUSABLE
    (var, value), = variables.items()
    p = env.problem("visible-devices-hide-all")
    assert p.message == f"0 GPUs visible: {var}='{value}' hides all 2 detected device(s)"
    assert p.severity == "error"


H100 = ("GPU-3f6c2a1e-9b7d-4c55-8e21-0a4f7d9b1c23", "GPU-8d2e4b7c-1f3a-4e9d-b6c5-7a0e2d4f8b91")


@pytest.mark.parametrize(
    "value, uuids",
    [
        ("1", [H100[1]]),
        ("GPU-8d2e", [H100[1]]),
        ("GPU-8d2e4b7c-1f3a-4e9d-b6c5-7a0e2d4f8b91,GPU-3f6c", [H100[1], H100[0]]),
        ("0,2,-1,1", [H100[0]]),
        ("1, 0", [H100[1], H100[0]]),
        ("MIG-GPU-3f6c2a1e-9b7d-4c55-8e21-0a4f7d9b1c23/1/0", [H100[0]]),
        ("", []),
        ("0,0", []),
        ("GPU-", []),
        ("GPU-ffff", []),
    ],
)
def test_cuda_visible_devices(value, uuids, roots, gpu_roots):
    env = detect_as(gpu_roots / "h100_linux", roots("h100_linux"), CUDA_VISIBLE_DEVICES=value)
    assert [d.uuid for d in env.devices] == uuids
    if not uuids:
        assert env.problem("visible-devices-hide-all").message.startswith(
            f"0 GPUs visible: CUDA_VISIBLE_DEVICES='{value}' hides all 2 detected device(s)")
        assert env.backend == "cpu"
    else:
        assert env.backend == "cuda"


def test_h100_facts(roots, gpu_roots):
    env = detect_as(gpu_roots / "h100_linux", roots("h100_linux"))
    assert [d.node for d in env.devices] == [0, 1]
    assert all(d.vendor == "nvidia" and d.warp_size == 32 and d.arch is None for d in env.devices)
    assert env.cuda["driver_version"] == "550.90.07"
    assert any("identical GPUs" in e for e in env.evidence)
    assert env.describe() == "CUDA (2x NVIDIA H100 80GB HBM3)"


def test_h100_device_nodes_missing(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "h100_linux", tmp_path / "r")
    for n in ("nvidiactl", "nvidia0", "nvidia1"):
        (root / "dev" / n).unlink()
    env = detect(root=str(root), environ={"PATH": "/usr/bin"})
    p = env.problem("nvidia-device-nodes-missing")
    assert p.severity == "error" and "nvidia-modprobe" in p.fix
    assert env.backend == "cpu" and len(env.devices) == 2


def test_render_node_missing_hides_that_gpu(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    (root / "dev/dri/renderD136").unlink()
    env = detect(root=str(root), environ={})
    assert [d.uuid for d in env.devices] == [MI300[0]]
    assert any("renderD136: missing" in e for e in env.evidence)
    # informational notes (what a GPU fault does on this ROCm) are not problems of this tree
    assert [p.code for p in env.problems if p.severity != "info"] == []
