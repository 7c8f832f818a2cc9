"""``detect.asan``: what ROCm's GPU AddressSanitizer needs, read from machine trees (the MI300X tree, with the
files of ROCm's llvm, device-libs and ``*-asan`` packages added where a case has them). Layouts: ROCm docs,
"Using AddressSanitizer" (``llvm/lib/clang/<v>/lib/linux/libclang_rt.asan-x86_64.so``, ``lib/asan``); LLVM's
per-target runtime folder (``lib/x86_64-unknown-linux-gnu/libclang_rt.asan.so``) and ROCm 7's ``lib/llvm``;
the SVM capability bit: linux include/uapi/linux/kfd_sysfs.h."""

from __future__ import annotations

import re
import shutil

import pytest
from _checkout import GPU_ROOTS
from _roots import materialize, new_root_dir, scenario_env

from pytest_gpuenv.detect import detect
from pytest_gpuenv.detect.asan import HSA_CAP_SVMAPI_SUPPORTED, rocm_asan
from pytest_gpuenv.detect.fs import Fs

HOME = "opt/rocm-6.4.1"
RUNTIME = f"{HOME}/llvm/lib/clang/19/lib/linux/libclang_rt.asan-x86_64.so"
DEVICE_RT = f"{HOME}/amdgcn/bitcode/asanrtl.bc"
HIPCC = f"{HOME}/bin/hipcc"
ASAN_LIB = f"{HOME}/lib/asan/libamdhip64.so.6"
SHOWN = "/opt/rocm"  # the install detection reports (a link to opt/rocm-6.4.1)
NODE_PROPS = "sys/devices/virtual/kfd/kfd/topology/nodes/1/properties"


@pytest.fixture
def mi300x():
    if not GPU_ROOTS.is_dir():
        pytest.skip(f"file trees not found at {GPU_ROOTS}")
    dest = new_root_dir()
    root = materialize(GPU_ROOTS / "mi300x_linux", dest / "root")
    yield root
    shutil.rmtree(dest, ignore_errors=True)


def _add(root, *paths, mode=0o644):
    for p in paths:
        f = root / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"\x7fELF")
        f.chmod(mode)


def _check(root, environ=None):
    environ = dict(scenario_env(GPU_ROOTS / "mi300x_linux") if environ is None else environ)
    env = detect(root=str(root), environ=environ)
    assert env.devices and env.devices[0].arch == "gfx942"
    return rocm_asan(Fs(str(root)), env.rocm["path"], env.devices[0], environ)


def test_plain_rocm_lacks_the_asan_runtimes_and_hipcc(mi300x):
    found = _check(mi300x)
    assert not found.ready and found.runtime is None and found.lib_dir is None
    text = "\n".join(found.missing)
    assert "no libclang_rt.asan under /opt/rocm/llvm/lib/clang/*/lib/linux" in text
    assert "no asanrtl.bc under /opt/rocm/amdgcn/bitcode" in text
    assert "hipcc: not on PATH nor in /opt/rocm/bin" in text
    assert not any(m.startswith(("arch", "XNACK")) for m in found.missing)  # gfx942 with SVM: those are fine


def test_complete_install_is_ready(mi300x):
    _add(mi300x, RUNTIME, DEVICE_RT, ASAN_LIB)
    _add(mi300x, HIPCC, mode=0o755)
    found = _check(mi300x)
    assert found.missing == [], found.missing
    assert found.runtime == SHOWN + RUNTIME[len(HOME):] and found.lib_dir == f"{SHOWN}/lib/asan"
    assert found.hipcc == SHOWN + HIPCC[len(HOME):] and found.xnack.startswith("on (HSA_XNACK=1")


@pytest.mark.parametrize("runtime", ["llvm/lib/clang/20/lib/x86_64-unknown-linux-gnu/libclang_rt.asan.so",
                                     "lib/llvm/lib/clang/20/lib/linux/libclang_rt.asan-x86_64.so"])
def test_other_runtime_layouts(mi300x, runtime):
    _add(mi300x, f"{HOME}/{runtime}", f"{HOME}/lib/llvm/amdgcn/bitcode/asanrtl.bc")
    _add(mi300x, HIPCC, mode=0o755)
    found = _check(mi300x)
    assert found.ready and found.runtime == f"{SHOWN}/{runtime}"
    assert found.lib_dir is None  # the instrumented libraries are optional


def test_no_svm_support_means_no_xnack(mi300x):
    _add(mi300x, RUNTIME, DEVICE_RT)
    _add(mi300x, HIPCC, mode=0o755)
    props = (mi300x / NODE_PROPS).read_text()
    cap = int(re.search(r"^capability (\d+)$", props, re.M).group(1))
    assert cap & HSA_CAP_SVMAPI_SUPPORTED  # the MI300X tree's driver has it
    without = cap & ~HSA_CAP_SVMAPI_SUPPORTED
    (mi300x / NODE_PROPS).write_text(props.replace(f"capability {cap}\n", f"capability {without}\n"))
    found = _check(mi300x)
    assert found.missing == ["XNACK: the amdgpu kernel driver has no HMM/SVM support for this GPU (KFD node 1 "
                             "capability lacks HSA_CAP_SVMAPI_SUPPORTED; a kernel built with CONFIG_HSA_AMD_SVM has "
                             "it)"]


def test_user_turned_xnack_off(mi300x):
    _add(mi300x, RUNTIME, DEVICE_RT)
    _add(mi300x, HIPCC, mode=0o755)
    environ = {**scenario_env(GPU_ROOTS / "mi300x_linux"), "HSA_XNACK": "0"}
    found = _check(mi300x, environ)
    assert found.xnack == "off (HSA_XNACK=0)"
    assert found.missing == ["XNACK: HSA_XNACK=0 in the environment keeps it off; unset it (the run sets HSA_XNACK=1)"]


def test_driver_default_is_named(mi300x):
    _add(mi300x, "sys/module/amdgpu/parameters/noretry")
    (mi300x / "sys/module/amdgpu/parameters/noretry").write_text("1\n")
    assert _check(mi300x).xnack == "on (HSA_XNACK=1; the driver's default is off, amdgpu.noretry=1)"


def test_arch_without_asan(mi300x):
    env = detect(root=str(mi300x), environ=scenario_env(GPU_ROOTS / "mi300x_linux"))
    dev = env.devices[0]
    dev.arch = "gfx1100"
    found = rocm_asan(Fs(str(mi300x)), env.rocm["path"], dev, {})
    assert found.missing[0].startswith("arch: ROCm's AddressSanitizer supports gfx90a, gfx942, gfx950; ")
    assert found.missing[0].endswith(" is gfx1100")


def test_option_names_what_is_missing(mi300x, pytester, monkeypatch):
    """On the MI300X tree, --gpuenv-sanitize stops the run before any test (exit 4), naming what ASan lacks there;
    racecheck has no AMD counterpart at all."""
    monkeypatch.setenv("GPUENV_ROOT", str(mi300x))
    pytester.makepyfile("def test_one(): pass")
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-sanitize=memcheck")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*gpuenv: --gpuenv-sanitize=memcheck: AddressSanitizer on this AMD GPU needs: the "
                                 "host ASan runtime: no libclang_rt.asan under /opt/rocm/llvm/lib/clang/*"])
    result = pytester.runpytest_subprocess("-p", "gpuenv", "--gpuenv-sanitize=racecheck")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--gpuenv-sanitize=racecheck: racecheck has no ROCm counterpart: AMD GPUs are "
                                 "checked by AddressSanitizer, as memcheck*"])
