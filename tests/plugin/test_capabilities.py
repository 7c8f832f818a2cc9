"""``@requires_capability``: the per-arch table (pytest_gpuenv/base/capabilities.py) on each family's machine.

AMD models come from machine trees (tests/_machines.py: KFD topology with the family's gfx_target_version and
wave size) read by the real detector; NVIDIA trees carry no arch without NVML, so those models are the
``--gpuenv-plan-profile`` specs (``cuda:sm_90:1x80GiB``), as the plan builds them.
"""

from __future__ import annotations

import pytest
from _machines import amd_machine

from pytest_gpuenv.base import capabilities
from pytest_gpuenv.detect import detect
from pytest_gpuenv.dist.plan import profile_from_spec
from pytest_gpuenv.marks.markers import MarkerArgumentError, validate
from pytest_gpuenv.marks.skipping import evaluate_mark

#: gfx_target_version (KFD topology) and wave size of each AMD family's tree
AMD = {"gfx906": (90006, 64), "gfx90a": (90010, 64), "gfx942": (90402, 64), "gfx950": (90500, 64),
       "gfx1030": (100300, 32), "gfx1100": (110000, 32), "gfx1201": (120001, 32)}
NVIDIA = ("sm_70", "sm_80", "sm_89", "sm_90", "sm_100")
ARCHES = tuple(AMD) + NVIDIA

CDNA = {"gfx90a", "gfx942", "gfx950"}
#: capability -> the arches that have it (the table's answers, checked against the vendors' documents)
EXPECTED = {
    "fp64": set(ARCHES),
    "fp64_full": {"gfx906", "gfx90a", "gfx942", "gfx950", "sm_70", "sm_80", "sm_90", "sm_100"},
    "fp16": set(ARCHES),
    "bf16": CDNA | {"gfx1100", "gfx1201", "sm_80", "sm_89", "sm_90", "sm_100"},
    "fp8": {"gfx942", "gfx950", "gfx1201", "sm_89", "sm_90", "sm_100"},
    "fp8_ocp": {"gfx950", "gfx1201", "sm_89", "sm_90", "sm_100"},
    "fp8_fnuz": {"gfx942"},
    "int8_dot": set(ARCHES),
    "matrix_cores": CDNA | {"gfx1100", "gfx1201"} | set(NVIDIA),
    "tf32": {"gfx942", "sm_80", "sm_89", "sm_90", "sm_100"},
    "wave32": {"gfx1030", "gfx1100", "gfx1201"} | set(NVIDIA),
    "wave64": {"gfx906"} | CDNA,
    "cooperative_launch": set(ARCHES),
    "unified_memory": CDNA | set(NVIDIA),
    "ecc": {"gfx906"} | CDNA | {"sm_70", "sm_80", "sm_90", "sm_100"},
    "peer_access": set(),  # one GPU on each machine below
    "shared_memory>=64KiB": set(ARCHES),
    "shared_memory>=96KiB": {"gfx950", "sm_70", "sm_80", "sm_89", "sm_90", "sm_100"},
    "shared_memory>=200KiB": {"sm_90", "sm_100"},
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for arch, (version, wave) in AMD.items():
        root = tmp_path_factory.mktemp(arch) / "machine"
        amd_machine(root, 1, gfx_target_version=version, wave=wave)
        out[arch] = detect(root=str(root), environ={}, probe="never")
    for arch in NVIDIA:
        out[arch] = profile_from_spec(f"cuda:{arch}:1x80GiB")[1]
    return out


def test_models_have_the_family_arch(models):
    for arch, env in models.items():
        assert [d.arch for d in env.usable_devices] == [arch], env.describe()


@pytest.mark.parametrize("cap", sorted(EXPECTED))
@pytest.mark.parametrize("arch", ARCHES)
def test_capability_per_family(models, arch, cap):
    env = models[arch]
    skip = evaluate_mark("requires_capability", (cap,), {}, env)
    assert (skip is None) == (arch in EXPECTED[cap]), skip and skip.reason
    if skip is not None:
        assert skip.reason.startswith(f"requires {cap}: ")
        assert skip.category == "capability"


def test_skip_reason_names_arch_and_family(models):
    skip = evaluate_mark("requires_capability", ("bf16", "fp8"), {}, models["gfx90a"])
    assert skip.reason == "requires fp8: gfx90a has no fp8 (CDNA2)"
    skip = evaluate_mark("requires_capability", ("fp8_ocp",), {}, models["gfx942"])
    assert skip.reason == "requires fp8_ocp: gfx942 has fp8 only as e4m3fnuz/e5m2fnuz (CDNA3)"
    skip = evaluate_mark("requires_capability", ("shared_memory>=96KiB",), {}, models["gfx1100"])
    assert skip.reason == "requires shared_memory>=96KiB: gfx1100 has 64.0 KiB of LDS per block (RDNA3)"
    skip = evaluate_mark("requires_capability", ("ecc",), {}, models["sm_89"])
    assert "sm_89 boards ship with and without ECC" in skip.reason


def test_peer_access_needs_two_devices(tmp_path):
    amd_machine(tmp_path / "m", 2, gfx_target_version=90402)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    assert evaluate_mark("requires_capability", ("peer_access",), {}, env) is None
    one = profile_from_spec("cuda:sm_90:1x80GiB")[1]
    assert "1 usable NVIDIA GPU(s), needs two or more" in evaluate_mark(
        "requires_capability", ("peer_access",), {}, one).reason


def test_no_gpu_and_unknown_arch():
    cpu = profile_from_spec("cpu")[1]
    skip = evaluate_mark("requires_capability", ("bf16",), {}, cpu)
    assert skip.reason.startswith("requires bf16: found no GPU")
    old = profile_from_spec("cuda:sm_52:1x8GiB")[1]
    skip = evaluate_mark("requires_capability", ("fp16",), {}, old)
    assert skip.reason == "requires fp16: sm_52 is not in pytest-gpuenv's capability table"


@pytest.mark.parametrize("args", [(), ("bf17",), (16,), ("shared_memory>=lots",), ("shared_memory>=0",)])
def test_bad_arguments(args):
    with pytest.raises(MarkerArgumentError, match=r"invalid marker requires_capability\("):
        validate("requires_capability", args, {})
    with pytest.raises(MarkerArgumentError, match="unexpected keyword"):
        validate("requires_capability", ("bf16",), {"arch": "x"})


def test_describe_lists_each_capability(models):
    env = models["sm_90"]
    text = capabilities.describe(env.devices[0], env)
    assert text.startswith("Hopper: fp64 (1/2 rate), fp16, bf16, fp8 (e4m3/e5m2)")
    assert text.endswith("shared_memory 227.0 KiB")


MODULE = """
import pytest
from pytest_gpuenv import requires_capability

@requires_capability("fp8")
def test_fp8():
    pass

@pytest.mark.gpuenv_requires_capability("bf16", "shared_memory>=64KiB")
def test_bf16():
    pass

@requires_capability("bf17")
def test_typo():
    pass

def test_plain():
    pass
"""


def test_pytester_skip_reason_and_collection_error(pytester, tmp_path):
    amd_machine(tmp_path / "m", 1, gfx_target_version=90010)
    pytester.makepyfile(MODULE)
    result = pytester.runpytest_subprocess("-rsE", f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never",
                                           "-p", "no:xdist")
    result.assert_outcomes(passed=2, skipped=1, errors=1)
    result.stdout.fnmatch_lines(["*invalid marker requires_capability('bf17'): unknown capability 'bf17'*",
                                 "*SKIPPED*requires fp8: gfx90a has no fp8 (CDNA2)*"])


def test_require_option_accepts_capabilities(pytester, tmp_path):
    amd_machine(tmp_path / "m", 1, gfx_target_version=90010)
    pytester.makepyfile("def test_x():\n    pass\n")
    args = [f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never", "-p", "no:xdist"]
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require=bf16,matrix_cores")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require=fp8")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--gpuenv-require=fp8*", "*requires fp8: gfx90a has no fp8 (CDNA2)*"])
    result = pytester.runpytest_subprocess(*args, "--gpuenv-require=fp9")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*invalid --gpuenv-require value 'fp9'*", "*or GPU capabilities*unknown capability 'fp9'*"])


def test_info_lists_capabilities(tmp_path, capsys):
    from pytest_gpuenv.cli import info_text

    amd_machine(tmp_path / "m", 1, gfx_target_version=90402)
    env = detect(root=str(tmp_path / "m"), environ={}, probe="never")
    text = info_text(env)
    assert "capabilities:" in text
    assert "[0] CDNA3: fp64 (1/2 rate), fp16, bf16, fp8 (e4m3fnuz/e5m2fnuz)" in text


def test_plan_shows_capability_skips(pytester):
    pytester.makepyfile(MODULE.replace("@requires_capability(\"bf17\")\n", ""))
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--gpuenv-plan", "-p", "no:xdist",
                                           "--gpuenv-plan-profile=rocm:gfx90a:1x64GiB")
    result.stdout.fnmatch_lines(["*test_fp8*skip: requires fp8*"])
