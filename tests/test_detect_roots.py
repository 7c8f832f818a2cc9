"""detect(root=...) on the hand-written machine trees, recreated for real (links, modes, users)."""

from __future__ import annotations

import json
import pwd
import shutil
from pathlib import Path

import pytest
from _roots import materialize, new_root_dir, run_as, scenario_env, scenario_expected, scenario_process

from pytest_gpuenv.detect import apply_backend, detect, hide_gpus_env
from pytest_gpuenv.model import STABLE_CODES, GpuEnv

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


@pytest.fixture(scope="session")
def roots(request):
    """scenario name -> a materialized copy (made once per session, removed at the end)."""
    from conftest import GPU_ROOTS

    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS} (set GPUENV_TEST_ROOTS)")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = materialize(GPU_ROOTS / name, new_root_dir())
        return made[name]

    yield get
    for path in made.values():
        shutil.rmtree(path, ignore_errors=True)


def _detect_as(scenario: Path, root: Path, **env_changes) -> GpuEnv:
    environ = scenario_env(scenario)
    for k, v in env_changes.items():
        if v is None:
            environ.pop(k, None)
        else:
            environ[k] = v
    process = scenario_process(scenario)
    if int(process.get("uid", 0)) == 0 and int(process.get("gid", 0)) == 0:
        return detect(root=str(root), environ=environ)
    return GpuEnv.from_dict(run_as(process, root=str(root), environ=environ))


def _map_expected(exp: dict) -> dict:
    """expected.json (DETECTION.md words) -> INTERFACE.md terms."""
    kind = exp["backend"]
    family = {"rocm-wsl": "rocm", "cuda-wsl": "cuda", "hip-windows": "rocm"}.get(kind, kind)
    usable = exp["usable"]
    if usable == "nvml-or-probe":
        usable = "probe-required"  # root mode: no library is loaded, so NVML cannot answer
    backend = "cpu" if usable is False else family
    return {"kind": kind, "backend": backend, "usable": usable}


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name, roots, gpu_roots):
    scenario = gpu_roots / name
    exp = scenario_expected(scenario)
    env = _detect_as(scenario, roots(name))
    want = _map_expected(exp)
    assert env.kind == want["kind"], env.evidence
    assert env.backend == want["backend"]
    assert env.usable == want["usable"]
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
    env = _detect_as(scenario, roots("rocm_no_permission"))
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
    assert env.backend == "rocm" and env.usable is True


def test_container_missing_devices_fix(roots, gpu_roots):
    env = _detect_as(gpu_roots / "rocm_container_missing_devices", roots("rocm_container_missing_devices"))
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
    env = _detect_as(scenario, roots("rx6700xt_unsupported_linux"), HSA_OVERRIDE_GFX_VERSION="10.3.0")
    (dev,) = env.devices
    assert dev.physical_arch == "gfx1031" and dev.arch == "gfx1030"
    assert env.usable is True and env.backend == "rocm"
    assert "arch-not-in-build" not in env.problem_codes
    assert env.visible["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"
    assert any("runs as gfx1030" in e for e in env.evidence)


def test_arch_not_in_build_suggests_override(roots, gpu_roots):
    env = _detect_as(gpu_roots / "rx6700xt_unsupported_linux", roots("rx6700xt_unsupported_linux"))
    p = env.problem("arch-not-in-build")
    assert "gfx1031" in p.message and "invalid device function" in p.message
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in p.fix


@pytest.mark.parametrize("value", ["10.3", "gfx1030", "10.3.0.1", "", "ten"])
def test_invalid_override(value, roots, gpu_roots):
    env = _detect_as(gpu_roots / "rx6700xt_unsupported_linux", roots("rx6700xt_unsupported_linux"),
                     HSA_OVERRIDE_GFX_VERSION=value)
    p = env.problem("hsa-override-invalid")
    assert p is not None and p.severity == "error"
    assert f"HSA_OVERRIDE_GFX_VERSION='{value}' is invalid" in p.message
    assert env.backend == "cpu" and env.usable is False
    assert env.devices[0].arch == "gfx1031"


# ---------------------------------------------------------------------------- visible devices
MI300 = ("GPU-3cbe002bd3b6313d", "GPU-648def29d3407eef")


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
        ({"ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}, [MI300[0]]),
        ({"GPU_DEVICE_ORDINAL": "1"}, [MI300[1]]),
    ],
)
def test_amd_masks(variables, uuids, roots, gpu_roots):
    env = _detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"), **variables)
    assert [d.uuid for d in env.devices] == uuids
    assert [d.index for d in env.devices] == list(range(len(uuids)))
    assert [d.physical_index for d in env.devices] == [MI300.index(u) for u in uuids]
    assert {d.uuid for d in env.hidden_devices} == set(MI300) - set(uuids)
    assert all(not d.usable and "hidden by" in d.unusable_reason for d in env.hidden_devices)
    for k, v in variables.items():
        assert env.visible[k] == v
    if "CUDA_VISIBLE_DEVICES" in variables and "ROCR_VISIBLE_DEVICES" not in variables:
        assert "cuda-visible-devices-on-rocm" in env.problem_codes
    assert env.backend == "rocm" and env.usable is True


def test_hip_more_than_rocr(roots, gpu_roots):
    env = _detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"),
                     ROCR_VISIBLE_DEVICES="1", HIP_VISIBLE_DEVICES="0,1")
    assert [d.uuid for d in env.devices] == [MI300[1]]
    p = env.problem("hip-visible-exceeds-rocr")
    assert p and "more devices than ROCR_VISIBLE_DEVICES" in p.message


@pytest.mark.parametrize("variables", [{"HIP_VISIBLE_DEVICES": ""}, {"ROCR_VISIBLE_DEVICES": "0,0"},
                                       {"HIP_VISIBLE_DEVICES": "5"}])
def test_amd_masks_hide_all(variables, roots, gpu_roots):
    env = _detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"), **variables)
    assert env.devices == [] and len(env.hidden_devices) == 2
    assert env.backend == "cpu" and env.usable is False
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
    env = _detect_as(gpu_roots / "h100_linux", roots("h100_linux"), CUDA_VISIBLE_DEVICES=value)
    assert [d.uuid for d in env.devices] == uuids
    if not uuids:
        assert env.problem("visible-devices-hide-all").message.startswith(
            f"0 GPUs visible: CUDA_VISIBLE_DEVICES='{value}' hides all 2 detected device(s)")
        assert env.backend == "cpu"
    else:
        assert env.backend == "cuda"


def test_h100_facts(roots, gpu_roots):
    env = _detect_as(gpu_roots / "h100_linux", roots("h100_linux"))
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
    assert env.problems == []


# ---------------------------------------------------------------------------- WSL
def test_wsl1(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("4.4.0-18985-Microsoft\n")
    env = detect(root=str(tmp_path), environ={"WSL_DISTRO_NAME": "Ubuntu"})
    assert env.wsl == 1 and env.backend == "cpu" and env.kind == "cpu"
    p = env.problem("wsl1-no-gpu")
    assert "4.4.0-18985-Microsoft" in p.message and "wsl --set-version" in p.fix


@pytest.mark.parametrize("osrelease, wsl", [("4.19.67-microsoft-standard", 2),
                                             ("5.15.167.4-microsoft-standard-WSL2", 2),
                                             ("6.8.0-45-generic", None)])
def test_wsl_versions(tmp_path, osrelease, wsl):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(osrelease + "\n")
    assert detect(root=str(tmp_path), environ={}).wsl == wsl


def test_rocm_wsl_without_dxg_flag(roots, gpu_roots):
    env = _detect_as(gpu_roots / "rx7900xtx_wsl2", roots("rx7900xtx_wsl2"), HSA_ENABLE_DXG_DETECTION=None)
    p = env.problem("rocm-wsl-dxg-disabled")
    assert "HSA_ENABLE_DXG_DETECTION=1" in p.fix
    assert env.kind == "rocm-wsl" and env.usable == "probe-required"
    assert env.probe["required"] is True and env.probe["ran"] is False


def test_cuda_wsl_with_wsl_lib_on_path(roots, gpu_roots):
    env = _detect_as(gpu_roots / "cuda_wsl2", roots("cuda_wsl2"), PATH="/usr/lib/wsl/lib:/usr/bin:/bin")
    assert "nvidia-smi-not-on-path" not in env.problem_codes
    assert env.cuda["libcuda"] == "/usr/lib/wsl/lib/libcuda.so.1"
    assert env.describe().startswith("CUDA on WSL 2 found, device count unknown")


# ---------------------------------------------------------------------------- Windows
def test_windows_hip_sdk_details(roots, gpu_roots):
    env = _detect_as(gpu_roots / "windows_hip_sdk", roots("windows_hip_sdk"))
    assert env.hip_sdk["dll"] == "amdhip64_6.dll" and env.hip_sdk["version"] == "6.4"
    assert env.hip_sdk["path"] == "C:\\Program Files\\AMD\\ROCm\\6.4\\"
    assert env.hip_sdk["hipinfo"].endswith("hipInfo.exe")
    assert env.compilers["hipcc"].endswith("hipcc.bin.exe")
    p = env.problem("no-torch-rocm-on-windows")
    assert "WSL 2" in p.fix
    env2 = _detect_as(gpu_roots / "windows_hip_sdk", roots("windows_hip_sdk"), HSA_OVERRIDE_GFX_VERSION="11.0.0")
    assert env2.problem("hsa-override-ignored-on-windows").severity == "warning"
    assert "hsa-override-invalid" not in env2.problem_codes


# ---------------------------------------------------------------------------- torch flavour
def _with_torch(root: Path, version: str, cuda: str | None, hip: str | None) -> None:
    path = root / "usr/lib/python3/dist-packages/torch"
    path.mkdir(parents=True, exist_ok=True)
    q = lambda v: "None" if v is None else repr(v)  # noqa: E731
    (path / "version.py").write_text(
        f"from typing import Optional\n__version__ = {version!r}\ncuda: Optional[str] = {q(cuda)}\n"
        f"hip: Optional[str] = {q(hip)}\n"
    )


def test_torch_cpu_build_on_gpu_host(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    _with_torch(root, "2.5.1+cpu", None, None)
    env = detect(root=str(root), environ={})
    p = env.problem("torch-cpu-build")
    assert env.torch["build"] == "cpu" and env.backend == "rocm"
    assert "https://download.pytorch.org/whl/rocm6.4" in p.fix


def test_torch_wrong_flavour(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    _with_torch(root, "2.5.1+cu124", "12.4", None)
    env = detect(root=str(root), environ={})
    p = env.problem("torch-wrong-flavour")
    assert "CUDA" in p.message and "rocm6.4" in p.fix


def test_torch_cuda_on_h100(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "h100_linux", tmp_path / "r")
    _with_torch(root, "2.5.1+cpu", None, None)
    env = detect(root=str(root), environ={})
    assert "https://download.pytorch.org/whl/cu" in env.problem("torch-cpu-build").fix


# ---------------------------------------------------------------------------- --gpuenv-backend
def test_apply_backend_and_hide(roots, gpu_roots):
    env = _detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"))
    assert apply_backend(env, "auto") is env
    cpu = apply_backend(env, "cpu")
    assert cpu.backend == "cpu" and cpu.forced_backend == "cpu" and len(cpu.devices) == 2
    assert all(not d.usable and d.unusable_reason == "hidden by --gpuenv-backend=cpu" for d in cpu.devices)
    assert env.backend == "rocm" and env.devices[0].usable  # the original is untouched
    assert cpu.describe() == "no GPU (--gpuenv-backend=cpu)"
    rocm = apply_backend(env, "rocm")
    assert rocm.forced_backend == "rocm" and "backend-not-available" not in rocm.problem_codes
    cuda = apply_backend(env, "cuda")
    p = cuda.problem("backend-not-available")
    assert p.severity == "error" and "--gpuenv-backend=cuda" in p.message
    assert hide_gpus_env(env) == {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}
    with pytest.raises(ValueError):
        apply_backend(env, "tpu")


def test_backend_not_available_carries_fix(roots, gpu_roots):
    env = _detect_as(gpu_roots / "rocm_no_permission", roots("rocm_no_permission"))
    p = apply_backend(env, "rocm").problem("backend-not-available")
    assert "usermod -aG render,video" in p.fix


def test_hide_gpus_env_nvidia(roots, gpu_roots):
    env = _detect_as(gpu_roots / "h100_linux", roots("h100_linux"))
    assert hide_gpus_env(env) == {"CUDA_VISIBLE_DEVICES": ""}


def test_device_cgroup_eperm_hides_node(tmp_path, gpu_roots, monkeypatch):
    """A GPU node whose gpu_id reads EPERM (device cgroup, DETECTION.md A3) is not counted, silently."""
    import errno

    from pytest_gpuenv.detect import _fs

    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    real_open = _fs.os.open

    def fake_open(path, flags, *a, **k):
        if str(path).endswith("topology/nodes/2/gpu_id"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(_fs.os, "open", fake_open)
    env = detect(root=str(root), environ={})
    assert [d.uuid for d in env.devices] == [MI300[0]]
    assert any("hidden by the device cgroup" in e for e in env.evidence)
    assert env.problems == []


def test_kfd_without_render_nodes(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    shutil.rmtree(root / "dev/dri")
    env = detect(root=str(root), environ={})
    assert env.devices == [] and env.backend == "cpu"
    assert "--device /dev/dri" in env.problem("render-nodes-missing").fix


def test_compiler_discovery_under_a_root(tmp_path, gpu_roots):
    """The lookups rtc makes on the real system (Fs(None)), made here under a root: homes, tools, libraries."""
    from pytest_gpuenv.detect import _compilers
    from pytest_gpuenv.detect._fs import Fs

    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    for path in ("opt/rocm-5.7.1/bin/hipcc", "opt/rocm-6.4.1/bin/hipcc", "opt/rocm-6.4.1/lib/libhiprtc.so.6",
                 "usr/local/cuda/bin/nvcc", "usr/local/cuda/include/cuda_fp16.h"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    fs, environ = Fs(str(root)), {"ROCM_HOME": "/opt/rocm-6.4.1/", "PATH": "/usr/bin:/bin"}
    homes = _compilers.rocm_homes(fs, environ)
    assert homes == ["/opt/rocm-6.4.1", "/opt/rocm", "/opt/rocm-5.7.1"]
    assert _compilers.find_tool(fs, "hipcc", environ, homes) == "/opt/rocm-6.4.1/bin/hipcc"
    assert _compilers.hiprtc_library(fs, environ) == "/opt/rocm-6.4.1/lib/libhiprtc.so.6"
    assert _compilers.cuda_homes(fs, environ) == ["/usr/local/cuda"]
    assert _compilers.find_tool(fs, "nvcc", environ, ["/usr/local/cuda"]) == "/usr/local/cuda/bin/nvcc"
    assert _compilers.cuda_include_dirs(fs, environ) == ["/usr/local/cuda/include"]
    env = detect(root=str(root), environ=environ)
    assert env.rocm["path"] == "/opt/rocm-6.4.1"
    assert env.compilers == {"hiprtc": True, "nvrtc": False, "hipcc": "/opt/rocm-6.4.1/bin/hipcc",
                             "nvcc": "/usr/local/cuda/bin/nvcc"}
    (root / "opt/rocm-6.4.1/lib/libhiprtc.so.6").unlink()  # ROCm 5 style: hiprtc inside libamdhip64
    assert _compilers.hiprtc_library(fs, environ) == "/opt/rocm-6.4.1/lib/libamdhip64.so"
