"""detect(root=...) per platform and situation: WSL, native Windows, the torch build, --gpuenv-backend,
device-cgroup hiding, and the compiler discovery rtc shares, on the machine trees and small hand-made ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _roots import MI300, detect_as, materialize

from pytest_gpuenv.base.model import Usability
from pytest_gpuenv.detect import apply_backend, detect, hide_gpus_env


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
    env = detect_as(gpu_roots / "rx7900xtx_wsl2", roots("rx7900xtx_wsl2"), HSA_ENABLE_DXG_DETECTION=None)
    p = env.problem("rocm-wsl-dxg-disabled")
    assert "HSA_ENABLE_DXG_DETECTION=1" in p.fix
    assert env.kind == "rocm-wsl" and env.usable is Usability.PROBE_REQUIRED
    assert env.probe["required"] is True and env.probe["ran"] is False


def test_cuda_wsl_with_wsl_lib_on_path(roots, gpu_roots):
    env = detect_as(gpu_roots / "cuda_wsl2", roots("cuda_wsl2"), PATH="/usr/lib/wsl/lib:/usr/bin:/bin")
    assert "nvidia-smi-not-on-path" not in env.problem_codes
    assert env.cuda["libcuda"] == "/usr/lib/wsl/lib/libcuda.so.1"
    assert env.describe().startswith("CUDA on WSL 2 found, device count unknown")


# ---------------------------------------------------------------------------- Windows
def test_windows_hip_sdk_details(roots, gpu_roots):
    env = detect_as(gpu_roots / "windows_hip_sdk", roots("windows_hip_sdk"))
    assert env.hip_sdk["dll"] == "amdhip64_6.dll" and env.hip_sdk["version"] == "6.4"
    assert env.hip_sdk["path"] == "C:\\Program Files\\AMD\\ROCm\\6.4\\"
    assert env.hip_sdk["hipinfo"].endswith("hipInfo.exe")
    assert env.compilers["hipcc"].endswith("hipcc.bin.exe")
    p = env.problem("no-torch-rocm-on-windows")
    assert "WSL 2" in p.fix
    env2 = detect_as(gpu_roots / "windows_hip_sdk", roots("windows_hip_sdk"), HSA_OVERRIDE_GFX_VERSION="11.0.0")
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
    env = detect_as(gpu_roots / "mi300x_linux", roots("mi300x_linux"))
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
    env = detect_as(gpu_roots / "rocm_no_permission", roots("rocm_no_permission"))
    p = apply_backend(env, "rocm").problem("backend-not-available")
    assert "usermod -aG render,video" in p.fix


def test_hide_gpus_env_nvidia(roots, gpu_roots):
    env = detect_as(gpu_roots / "h100_linux", roots("h100_linux"))
    assert hide_gpus_env(env) == {"CUDA_VISIBLE_DEVICES": ""}


def test_device_cgroup_eperm_hides_node(tmp_path, gpu_roots, monkeypatch):
    """A GPU node whose gpu_id reads EPERM (device cgroup, DETECTION.md A3) is not counted, silently."""
    import errno

    from pytest_gpuenv.detect import fs as _fs

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
    # informational notes (what a GPU fault does on this ROCm) are not problems of this tree
    assert [p.code for p in env.problems if p.severity != "info"] == []


def test_kfd_without_render_nodes(tmp_path, gpu_roots):
    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    shutil.rmtree(root / "dev/dri")
    env = detect(root=str(root), environ={})
    assert env.devices == [] and env.backend == "cpu"
    assert "--device /dev/dri" in env.problem("render-nodes-missing").fix


def test_compiler_discovery_under_a_root(tmp_path, gpu_roots):
    """The lookups rtc makes on the real system (Fs(None)), made here under a root: homes, tools, libraries."""
    from pytest_gpuenv.detect import compilers
    from pytest_gpuenv.detect.fs import Fs

    root = materialize(gpu_roots / "mi300x_linux", tmp_path / "r")
    for path in ("opt/rocm-5.7.1/bin/hipcc", "opt/rocm-6.4.1/bin/hipcc", "opt/rocm-6.4.1/lib/libhiprtc.so.6",
                 "usr/local/cuda/bin/nvcc", "usr/local/cuda/include/cuda_fp16.h"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    fs, environ = Fs(str(root)), {"ROCM_HOME": "/opt/rocm-6.4.1/", "PATH": "/usr/bin:/bin"}
    homes = compilers.rocm_homes(fs, environ)
    assert homes == ["/opt/rocm-6.4.1", "/opt/rocm", "/opt/rocm-5.7.1"]
    assert compilers.find_tool(fs, "hipcc", environ, homes) == "/opt/rocm-6.4.1/bin/hipcc"
    assert compilers.hiprtc_library(fs, environ) == "/opt/rocm-6.4.1/lib/libhiprtc.so.6"
    assert compilers.cuda_homes(fs, environ) == ["/usr/local/cuda"]
    assert compilers.find_tool(fs, "nvcc", environ, ["/usr/local/cuda"]) == "/usr/local/cuda/bin/nvcc"
    assert compilers.cuda_include_dirs(fs, environ) == ["/usr/local/cuda/include"]
    env = detect(root=str(root), environ=environ)
    assert env.rocm["path"] == "/opt/rocm-6.4.1"
    assert env.compilers == {"hiprtc": True, "nvrtc": False, "hipcc": "/opt/rocm-6.4.1/bin/hipcc",
                             "nvcc": "/usr/local/cuda/bin/nvcc"}
    (root / "opt/rocm-6.4.1/lib/libhiprtc.so.6").unlink()  # ROCm 5 style: hiprtc inside libamdhip64
    assert compilers.hiprtc_library(fs, environ) == "/opt/rocm-6.4.1/lib/libamdhip64.so"


# ---------------------------------------------------------------------------- device-file permissions
def test_nvidia_permission_problem_names_the_device_file_s_group(tmp_path):
    import grp

    from pytest_gpuenv.detect._nvidia import _permission_problem
    from pytest_gpuenv.detect.fs import Fs

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidiactl").write_text("")
    gid = (tmp_path / "dev/nvidiactl").stat().st_gid
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    p = _permission_problem(Fs(str(tmp_path)), ["/dev/nvidiactl", "/dev/nvidia0"])
    assert p.code == "nvidia-permission-denied" and p.category == "permission"
    assert f"/dev/nvidiactl, /dev/nvidia0 not readable+writable by this user (group '{group}')" == p.message
    assert f"sudo usermod -aG {group} $USER" in p.fix
    assert "(group '?')" in _permission_problem(Fs(str(tmp_path)), ["/dev/nvidia7"]).message  # no such file
