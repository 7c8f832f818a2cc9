"""Detection's ROCm runtime checks: does a GPU fault abort the process, and which hip-python fits.

Fault policy (issue 10 item 1), following:
- ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp ``Runtime::VMFaultHandler``: ``std::abort()``
  unless a registered system event handler returns HSA_STATUS_SUCCESS (ROCm/rocm-systems
  projects/rocr-runtime, commit 1b1610fc, lines 1826-1942);
- clr rocclr/device/rocm/rocdevice.cpp ``callbackQueue`` (tag rocm-6.2.0, lines 2967-2990): ``abort()``;
- clr CHANGELOG.md, "HIP 7.0 for ROCm 7.0": exceptions during a kernel no longer abort the process
  unless core dump is enabled; clr rocclr/utils/flags.hpp ``HIP_SKIP_ABORT_ON_GPU_ERROR`` (default true);
  clr rocclr/os/os_posix.cpp ``Os::DumpCoreFile``: ``getrlimit(RLIMIT_CORE)`` soft limit != 0.
hip-python (item 11): `pip index versions hip-python` lists 6.2.0.499.16 (the first), 6.3.0.540.30 ...
6.4.1.552.39 ... 7.2.0.562.43: numbered after the ROCm release; 6.2 loads the unversioned
libamdhip64.so / libhiprtc.so (its chip/chiprtc extension modules name exactly those).
"""

from __future__ import annotations

import pytest
from _checkout import REPO

from pytest_gpuenv.base.model import GpuEnv
from pytest_gpuenv.detect import checks as _checks
from pytest_gpuenv.detect._ctx import Ctx
from pytest_gpuenv.detect.fs import Fs


def _ctx(root, version, environ=None, kind="rocm", lib_dirs=None):
    env = GpuEnv(kind=kind, backend="rocm" if kind == "rocm" else "cpu")
    env.rocm["version"] = version
    ctx = Ctx(env, Fs(str(root)), environ or {}, "never", 1.0, None)
    ctx.rocm = {"lib_dirs": lib_dirs or []}
    return ctx


def _site(root, dist):
    d = root / "usr/local/lib/python3.11/site-packages" / dist
    d.mkdir(parents=True)


@pytest.mark.parametrize("version", ["5.2.3", "6.4.1", None])
def test_before_rocm7_a_fault_aborts(tmp_path, version):
    ctx = _ctx(tmp_path, version)
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-aborts")
    assert p is not None and "aborts the whole process" in p.message and "ROCm 7.0" in p.message
    assert "-n N" in p.fix and p.severity == "info"
    assert ctx.env.problem("hip-fault-returns-error") is None


def test_rocm7_returns_an_error(tmp_path):
    ctx = _ctx(tmp_path, "7.2.0")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-returns-error")
    assert p is not None and "HIP_SKIP_ABORT_ON_GPU_ERROR in effect" in p.message
    # root mode: the core-dump limit of that machine is not known, and the message says what it would do
    assert "aborts after all when core dumps are enabled" in p.message
    assert ctx.env.problem("hip-fault-aborts") is None


# clr Flag::setValue for a Tuint flag is *(int*)value_ = atoi(value) (ROCm/clr f9f995c rocclr/utils/flags.cpp
# line 176; ROCm/rocm-systems 02fcd1b projects/clr/rocclr/utils/flags.cpp line 180), and Flag::init hands an empty
# value over as " " (lines 114, 136): every value below reads 0, so a fault aborts (tests/detect/test_amd_hipflags.py)
@pytest.mark.parametrize("value", ["0", "", "false", "off", "no", "true", "0x1", '"1"', " 0 "])
def test_rocm7_user_turned_the_opt_out_off(tmp_path, value):
    ctx = _ctx(tmp_path, "7.0.2", {"HIP_SKIP_ABORT_ON_GPU_ERROR": value})
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-aborts")
    assert p is not None and f"HIP_SKIP_ABORT_ON_GPU_ERROR={value!r} is set, which clr reads as 0" in p.message
    assert ctx.env.problem("hip-fault-returns-error") is None


@pytest.mark.parametrize("value", ["1", " 1", "2", "-1", "1abc"])
def test_rocm7_any_nonzero_atoi_keeps_the_opt_out(tmp_path, value):
    ctx = _ctx(tmp_path, "7.0.2", {"HIP_SKIP_ABORT_ON_GPU_ERROR": value})
    _checks.rocm_runtime(ctx)
    assert ctx.env.problem("hip-fault-returns-error") is not None


@pytest.mark.parametrize("limit,text", [(-1, "ulimit -c unlimited"), (4096, "ulimit -c 4096")])
def test_rocm7_with_core_dumps_aborts(tmp_path, monkeypatch, limit, text):
    monkeypatch.setattr(_checks, "_core_limit", lambda ctx: limit)
    ctx = _ctx(tmp_path, "7.1.1")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-aborts")
    assert p is not None and text in p.message and "`ulimit -c 0`" in p.fix


def test_rocm7_core_dumps_off_is_in_effect(tmp_path, monkeypatch):
    monkeypatch.setattr(_checks, "_core_limit", lambda ctx: 0)
    ctx = _ctx(tmp_path, "7.1.1")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-returns-error")
    assert p is not None and "aborts after all" not in p.message


def test_no_fault_policy_without_amd_gpu(tmp_path):
    ctx = _ctx(tmp_path, "7.2.0", kind="cpu")
    _checks.rocm_runtime(ctx)
    assert ctx.env.problem("hip-fault-aborts") is None and ctx.env.problem("hip-fault-returns-error") is None


@pytest.mark.parametrize("rocm,req", [("5.2.3", "hip-python==6.2.*"), ("6.2.4", "hip-python==6.2.*"),
                                      ("6.3", "hip-python==6.3.*"), ("6.4.1", "hip-python==6.4.1.*"),
                                      ("7.2.0", "hip-python==7.2.0.*"), (None, "hip-python==6.2.*")])
def test_requirement_follows_the_pypi_scheme(rocm, req):
    assert _checks.hip_python_requirement(rocm) == req


def test_hip_python_mismatch_names_the_release(tmp_path):
    _site(tmp_path, "hip_python-6.2.0.499.16.dist-info")
    ctx = _ctx(tmp_path, "7.2.0")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-python-rocm-mismatch")
    assert p is not None and p.severity == "warning"
    assert "hip-python 6.2.0.499.16 does not match ROCm 7.2.0" in p.message
    assert 'pip install "hip-python==7.2.0.*"' in p.fix


def test_hip_python_matching_minor_is_fine(tmp_path):
    _site(tmp_path, "hip_python-6.4.2.555.40.dist-info")
    ctx = _ctx(tmp_path, "6.4.1")
    _checks.rocm_runtime(ctx)
    assert not [p for p in ctx.env.problems if p.code.startswith("hip-python")]


def test_hip_python_62_needs_the_unversioned_library(tmp_path):
    _site(tmp_path, "hip_python-6.2.0.499.16.dist-info")
    lib = tmp_path / "opt/rocm-6.2.4/lib"
    lib.mkdir(parents=True)
    (lib / "libamdhip64.so.6").write_bytes(b"")
    ctx = _ctx(tmp_path, "6.2.4", lib_dirs=["/opt/rocm-6.2.4/lib"])
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-python-no-unversioned-lib")
    assert p is not None and "loads libamdhip64.so" in p.message
    (lib / "libamdhip64.so").write_bytes(b"")
    ctx = _ctx(tmp_path, "6.2.4", lib_dirs=["/opt/rocm-6.2.4/lib"])
    _checks.rocm_runtime(ctx)
    assert ctx.env.problem("hip-python-no-unversioned-lib") is None


def test_hip_python_missing_on_an_amd_machine(tmp_path):
    ctx = _ctx(tmp_path, "6.4.1")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-python-missing")
    assert p is not None and p.severity == "info" and 'pip install "hip-python==6.4.1.*"' in p.fix


def test_real_system_rocm52_with_hip_python_62_is_fine():
    # this machine: Debian's ROCm 5.2.3 (libamdhip64.so -> .so.5 in the multiarch dir) and hip-python 6.2
    pytest.importorskip("hip")
    from pytest_gpuenv.detect import detect

    env = detect(probe="never")
    if env.rocm.get("version") is None or not env.rocm["version"].startswith("5."):
        pytest.skip("not the Debian ROCm 5 machine")
    assert not [p.code for p in env.problems if p.code.startswith("hip-python")]


@pytest.mark.parametrize("release", ["6.2.0.499.16", "6.4.1.552.39", "7.0.2.555.40", "7.2.2.562.43"])
def test_amd_extra_admits_the_release_doctor_names(release):
    # releases as `pip index versions hip-python` lists them (PyPI, November 2026)
    tomllib = pytest.importorskip("tomllib")
    import pathlib

    from packaging.requirements import Requirement

    data = tomllib.loads(pathlib.Path(REPO, "pyproject.toml").read_text())
    (req,) = [Requirement(r) for r in data["project"]["optional-dependencies"]["amd"] if r.startswith("hip-python")]
    assert req.specifier.contains(release)
    wanted = _checks.hip_python_requirement(".".join(release.split(".")[:3]))
    assert Requirement(wanted).specifier.contains(release)


# ------------------------------------------------------- issue 26 item 9: torch's own HIP runtime
# A torch ROCm wheel carries its own libamdhip64.so in torch/lib (its torch.version.hip), and torch's launches
# use it whatever ROCm is installed; HIP_SKIP_ABORT_ON_GPU_ERROR exists from HIP 7.0 (clr CHANGELOG.md, "HIP 7.0
# for ROCm 7.0"; ROCm/clr f9f995c, ROCm 6.3, has no such flag in rocclr/utils/flags.hpp).
def _torch_wheel(root, hip, bundled=True):
    site = root / "usr/local/lib/python3.11/site-packages/torch"
    (site / "lib").mkdir(parents=True)
    (site / "version.py").write_text(f"__version__ = '2.5.1+rocm6.2'\nhip = '{hip}'\ncuda = None\n")
    if bundled:
        (site / "lib/libamdhip64.so").write_bytes(b"\x7fELF")
    return {"version": "2.5.1+rocm6.2", "build": "rocm", "hip": hip, "cuda": None,
            "path": "/usr/local/lib/python3.11/site-packages/torch/version.py"}


def test_torch_wheel_with_an_older_hip_aborts_even_on_rocm7(tmp_path):
    ctx = _ctx(tmp_path, "7.0.2")
    ctx.env.torch = _torch_wheel(tmp_path, "6.2.41133-dd7f95766")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-aborts")
    assert p is not None and p.message.startswith(
        "torch 2.5.1+rocm6.2's own HIP runtime 6.2.41133-dd7f95766 (/usr/local/lib/python3.11/site-packages/torch/"
        "lib/libamdhip64.so) aborts the whole process on a GPU fault")
    assert ctx.env.problem("hip-fault-returns-error") is None


def test_torch_using_the_system_runtime_follows_rocm(tmp_path):
    # no libamdhip64.so in torch/lib (a torch built against the system ROCm): the system's policy
    ctx = _ctx(tmp_path, "7.0.2")
    ctx.env.torch = _torch_wheel(tmp_path, "6.2.41133-dd7f95766", bundled=False)
    _checks.rocm_runtime(ctx)
    assert ctx.env.problem("hip-fault-returns-error") is not None


def test_torch_wheel_hip7_without_system_rocm(tmp_path):
    ctx = _ctx(tmp_path, None)
    ctx.env.torch = _torch_wheel(tmp_path, "7.0.51831-a3e329ad8")
    _checks.rocm_runtime(ctx)
    p = ctx.env.problem("hip-fault-returns-error")
    assert p is not None and "torch 2.5.1+rocm6.2's own HIP runtime 7.0.51831-a3e329ad8" in p.message


@pytest.mark.parametrize("package", ["libamdhip64-5", "libamdhip64-dev", "libamdhip64-5t64"])
def test_debian_rocm_version_from_the_runtime_packages_changelog(tmp_path, package):
    """Debian's packages name the HIP runtime's version in their changelog: the library's package (named after
    its major), the -dev package, or another name (a t64 rename), found by listing the folder."""
    import gzip

    from pytest_gpuenv.detect.compilers import _debian_version

    doc = tmp_path / "usr/share/doc" / package
    doc.mkdir(parents=True)
    (doc / "changelog.Debian.gz").write_bytes(gzip.compress(b"rocm-hipamd (5.2.3-3) unstable; urgency=medium\n\n"))
    ev: list[str] = []
    assert _debian_version(Fs(str(tmp_path)), ev, "5") == "5.2.3"
    assert ev == [f"/usr/share/doc/{package}/changelog.Debian.gz: rocm-hipamd (5.2.3-3) unstable; urgency=medium"]
