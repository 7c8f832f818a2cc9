"""Marker argument checks and evaluation against environment models (pure logic, no hardware)."""

import pytest

from pytest_gpuenv.base.model import ArchPattern, Device, GpuEnv, Problem, parse_size
from pytest_gpuenv.marks import markers, skipping


def _env(backend="cpu", devices=(), **kw):
    return GpuEnv(backend=backend, kind=backend, devices=list(devices), **kw)


H200 = Device(index=0, vendor="nvidia", name="NVIDIA H200", arch="sm_90", memory_bytes=150_150_000_000, warp_size=32)
MI300X = Device(index=0, vendor="amd", name="AMD Instinct MI300X", arch="gfx942", memory_bytes=205822885888, warp_size=64)
CUDA = _env("cuda", [H200], compilers={"hiprtc": False, "nvrtc": True, "hipcc": None, "nvcc": None})
ROCM = _env("rocm", [MI300X, Device(index=1, vendor="amd", name="AMD Instinct MI300X", arch="gfx942",
                                     memory_bytes=205822885888, warp_size=64)],
            compilers={"hiprtc": True, "nvrtc": False, "hipcc": "/opt/rocm/bin/hipcc", "nvcc": None})
CPU = _env("cpu")


def ev(name, *args, env, **kwargs):
    return skipping.evaluate_mark(name, args, kwargs, env)


@pytest.mark.parametrize(
    "name,args,kwargs,fragment",
    [
        ("requires_memory", ("lots",), {}, "requires_memory('lots')"),
        ("requires_memory", (0,), {}, "positive"),
        ("requires_devices", (0,), {}, "requires_devices(0)"),
        ("requires_devices", ("2",), {}, "int >= 1"),
        ("requires_devices", (True,), {}, "int >= 1"),
        ("requires_arch", ("sm_9x",), {}, "requires_arch('sm_9x')"),
        ("requires_arch", (), {}, "at least one"),
        ("skip_on", ("solaris",), {}, "unknown condition 'solaris'"),
        ("xfail_on", ("cpu",), {"strikt": True}, "unexpected keyword"),
        ("requires_wsl", (3,), {}, "version must be 1, 2"),
        ("requires_rocm", ("x",), {}, "takes no arguments"),
        ("requires_gpu", (), {"vendor": "amd"}, "unexpected keyword argument(s) vendor"),
        ("requires_devices", (2,), {"n": 2}, "unexpected keyword argument(s) n"),
    ],
)
def test_bad_arguments_name_marker_and_value(name, args, kwargs, fragment):
    with pytest.raises(markers.MarkerArgumentError) as exc:
        markers.validate(name, args, kwargs)
    assert fragment in str(exc.value)
    assert name in str(exc.value)


def test_requires_rocm_on_cuda_names_what_was_found():
    skip = ev("requires_rocm", env=CUDA)
    assert skip.reason == "requires ROCm: found CUDA (1x NVIDIA H200 (sm_90, 139.8 GiB))"
    assert skip.category == "vendor"
    assert ev("requires_cuda", env=CUDA) is None
    assert ev("requires_gpu", env=CUDA) is None


def test_requires_cuda_on_rocm_and_cpu():
    assert "found ROCm (2x AMD Instinct MI300X" in ev("requires_cuda", env=ROCM).reason
    assert ev("requires_cuda", env=CPU).reason == "requires CUDA: found no GPU"


def test_memory_and_devices():
    assert ev("requires_memory", "200GiB", env=CUDA).reason == "requires_memory('200GiB'): largest device has 139.8 GiB"
    assert ev("requires_memory", "100GiB", env=CUDA) is None
    assert ev("requires_memory", 2**30, env=ROCM) is None
    skip = ev("requires_devices", 2, env=CUDA)
    assert skip.category == "devices" and "1 usable GPU(s)" in skip.reason
    assert ev("requires_devices", 2, env=ROCM) is None


def test_arch_patterns_never_cross_vendor():
    assert ev("requires_arch", "gfx94*", env=ROCM) is None
    assert ev("requires_arch", "sm_80+", env=CUDA) is None
    assert ev("requires_arch", "sm_100+", env=CUDA).category == "arch"
    assert ev("requires_arch", "gfx9*", env=CUDA).reason.startswith("requires arch gfx9*: found sm_90")
    assert not ArchPattern.parse("sm_80+").matches("gfx942")
    assert ArchPattern.parse("gfx11*").matches("gfx1100:xnack-")


def test_hip_needs_a_compiler():
    assert ev("requires_hip", env=CUDA) is None
    no_compiler = _env("cuda", [H200])
    skip = ev("requires_hip", env=no_compiler)
    assert skip.category == "toolchain" and "NVRTC or nvcc" in skip.reason


def test_skip_on_and_xfail_on():
    assert ev("skip_on", "cuda", env=CUDA).category == "condition"
    assert ev("skip_on", "rocm", "gfx90a", env=CUDA) is None
    assert "sm_90" in ev("skip_on", "sm_90", env=CUDA, reason="known bug").reason
    mark = pytest.mark.xfail_on("cpu", reason="no kernels", strict=True).mark
    assert skipping.xfail_for([mark], CPU) == ("xfail_on('cpu'): expected to fail here, found no GPU: no kernels", True)
    assert skipping.xfail_for([mark], CUDA) is None


def test_wsl():
    wsl = _env("cpu", wsl=2)
    assert ev("requires_wsl", env=wsl) is None
    assert ev("requires_wsl", 1, env=wsl).reason == "requires WSL 1: found WSL 2 (linux)"
    assert ev("requires_wsl", env=CPU).category == "wsl"


def test_problem_with_fix_is_in_reason():
    dev = Device(index=0, vendor="amd", name="AMD Radeon RX 7900 XTX", arch="gfx1100", memory_bytes=25753026560,
                 usable=False, unusable_reason="/dev/kfd not accessible")
    env = _env("cpu", [dev], problems=[Problem("kfd-permission-denied", "/dev/kfd is not accessible",
                                               "sudo usermod -aG render,video alice", severity="error")])
    skip = ev("requires_rocm", env=env)
    assert skip.category == "problem"
    assert "[kfd-permission-denied]; fix: sudo usermod -aG render,video alice" in skip.reason
    assert "present but not usable" in skip.reason


def test_forced_cpu_names_the_option():
    env = _env("cpu", [Device(index=0, vendor="nvidia", name="NVIDIA H200", arch="sm_90", usable=False)],
               forced_backend="cpu")
    skip = ev("requires_cuda", env=env)
    assert skip.reason == "requires CUDA: GPUs hidden by --gpuenv-backend=cpu"


@pytest.mark.parametrize("text,n", [("16GiB", 16 * 2**30), ("40GB", 40 * 10**9), ("512MiB", 512 * 2**20),
                                    (1024, 1024), ("1.5 GiB", int(1.5 * 2**30))])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["lots", "10 parsecs", "", "-1GiB", None, True, -5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_model_round_trip():
    import json

    d = ROCM.to_dict()
    again = GpuEnv.from_dict(json.loads(json.dumps(d)))
    assert again == ROCM
