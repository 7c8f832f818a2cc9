"""``gpu_expected``: the key chosen per device (``base/expected.py``), and the fixture on machine trees (an AMD
MI300X-like tree, the H100 scenario, a CPU runner) through pytester, with the chosen key in the failure report
and in ``--gpuenv-json``."""

from __future__ import annotations

import json

import pytest
from _machines import amd_machine

from pytest_gpuenv import requires_gpu
from pytest_gpuenv.base.conditions import Facts, device_for, facts, gpu_for
from pytest_gpuenv.base.expected import choose, parse_key
from pytest_gpuenv.base.model import Device, GpuEnv


def _f(vendor, arch=None, **versions):
    return Facts(vendor, arch, {"cuda": None, "rocm": None, "driver": None, "torch": None, **versions}, "h")


H100 = _f("nvidia", "sm_90", cuda="12.8", driver="570.86.15", torch="2.7.0+cu128")
A100 = _f("nvidia", "sm_80", cuda="12.4")
T4 = _f("nvidia", "sm_75", cuda="12.4")
MI300 = _f("amd", "gfx942", rocm="6.4.1")
MI300_OLD = _f("amd", "gfx942", rocm="6.3.2")
MI250 = _f("amd", "gfx90a", rocm="6.4.1")
CPU = _f("cpu", torch="2.7.0+cpu")

MAPPING = {"sm_90": 1, "sm_80+": 2, "nvidia": 3, ("gfx942", "rocm>=6.4"): 5, "gfx942": 4, "gfx9*": 6, "cpu": 7,
           None: 0}


@pytest.mark.parametrize("where, key, value", [
    (H100, "sm_90", 1), (A100, "sm_80+", 2), (T4, "nvidia", 3), (MI300, ("gfx942", "rocm>=6.4"), 5),
    (MI300_OLD, "gfx942", 4), (MI250, "gfx9*", 6), (CPU, "cpu", 7), (_f("amd", "gfx1100"), None, 0),
])
def test_most_specific_key_wins(where, key, value):
    chosen = choose(MAPPING, where)
    assert (chosen.key.given, chosen.value) == (key, value)


def test_specificity_order():
    order = [None, "amd", "cuda>=12", ("nvidia", "cuda>=12"), ("cuda>=12", "torch>=2"), "sm_8?", ("sm_8?", "cuda>=12"),
             "sm_80", ("sm_80", "cuda>=12")]
    specs = [parse_key(k).specificity for k in order]
    assert specs == sorted(specs) and len(set(specs)) == len(specs)


@pytest.mark.parametrize("mapping, where, value", [
    ({"cuda>=12.8": "new", "cuda<12.8": "old"}, H100, "new"),
    ({"cuda>=12.8": "new", "cuda<12.8": "old"}, A100, "old"),
    ({"rocm<7": "six", None: "other"}, MI300, "six"),
    ({"rocm<7": "six", None: "other"}, H100, "other"),  # a ROCm range never holds on NVIDIA
    ({"cuda>=12": "cuda", None: "other"}, CPU, "other"),
    ({"driver>=570": "recent", None: "old"}, H100, "recent"),
    ({"torch>=2.7": "t27", None: "old"}, CPU, "t27"),  # a local version (+cpu) counts as its release
])
def test_version_ranges(mapping, where, value):
    assert choose(mapping, where).value == value


def test_a_tie_with_different_values_names_both_keys():
    with pytest.raises(ValueError, match=r"keys 'gfx94\*' and 'gfx9\*' both match this device \(amd gfx942"):
        choose({"gfx94*": 1, "gfx9*": 2}, MI300)
    assert choose({"gfx94*": 1, "gfx9*": 1}, MI300).key.given == "gfx94*"  # equal values: no ambiguity


@pytest.mark.parametrize("mapping, fragment", [
    ({"sm_9x": 1}, "key 'sm_9x': unknown condition 'sm_9x'"),
    ({"cuda>=twelve": 1}, "is not a version range"),
    ({("amd", 7): 1}, "a condition is a string"),
    ({(): 1}, "an empty tuple is not a key"),
    ({"sm_80": 1}, "no key of gpu_expected matches this device (amd gfx942, rocm 6.4.1); keys: 'sm_80'; add None"),
    ([1, 2], "takes a non-empty mapping"),
])
def test_bad_mappings(mapping, fragment):
    with pytest.raises(ValueError) as info:
        choose(mapping, MI300)
    assert fragment in str(info.value)


def test_facts_of_the_device_a_test_runs_on():
    gpus = [Device(index=0, vendor="nvidia", arch="sm_90"), Device(index=1, vendor="nvidia", arch="sm_80")]
    env = GpuEnv(backend="cuda", kind="cuda", devices=gpus, cuda={"driver_version": "570.86.15", "max_cuda": "12.8"},
                 torch={"version": "2.7.0+cu126", "build": "cuda", "cuda": "12.6", "hip": None})
    assert device_for(env) is gpus[0] and device_for(env, "cuda:1") is gpus[1] and device_for(env, "cpu") is None
    # "cuda" is torch's current GPU (the first), and a torch.device is read by its text
    assert device_for(env, "cuda") is gpus[0] and device_for(env, "cuda:7") is gpus[0]
    # an int is a CUDA ordinal, as torch reads one; a value of another type names no device (its __str__ unread)
    assert device_for(env, 1) is gpus[1] and device_for(env, 0) is gpus[0] and device_for(env, True) is gpus[0]

    class Hostile:
        def __str__(self):
            raise RuntimeError("boom")

    assert device_for(env, Hostile()) is gpus[0] and gpu_for(env, Hostile()) is gpus[0]
    torch = pytest.importorskip("torch")
    assert device_for(env, torch.device("cuda:1")) is gpus[1] and device_for(env, torch.device("cpu")) is None
    assert device_for(env, torch.device("cuda")) is gpus[0]
    f = facts(env, gpus[1])
    assert (f.vendor, f.arch, f.versions["cuda"], f.versions["driver"]) == ("nvidia", "sm_80", "12.6", "570.86.15")
    assert facts(env, None).versions == {"cuda": None, "rocm": None, "driver": None, "torch": "2.7.0+cu126"}


def test_gpu_device_of_each_torch_device(pytester, tmp_path):
    """``gpu_device`` is the GPU ``torch_device`` names, and the first GPU beside ``torch_device`` ``cpu``
    (where ``device_for`` says the test runs on the CPU)."""
    amd_machine(tmp_path, 2)
    pytester.makepyfile("""
def test_dev(torch_device, gpu_device):
    assert gpu_device.index == {"cpu": 0, "cuda:0": 0, "cuda:1": 1}[str(torch_device)]
""")
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--gpuenv-root={tmp_path}", "--gpuenv-probe=never",
                                           "--gpuenv-devices=all", "-v")
    result.assert_outcomes(passed=3)


MODULE = """
def test_exact(gpu_expected):
    assert gpu_expected({"gfx942": 1, "gfx94*": 2, "amd": 3, "cpu": 4, None: 0}) == {want}

def test_wrong_value(gpu_expected):
    assert gpu_expected({{"gfx94*": 2.0, "cpu": 2.5, None: 0.0}}) == 3.0

def test_bad_key(gpu_expected):
    gpu_expected({{"sm_9x": 1}})
"""


@pytest.mark.parametrize("machine, want, chosen", [("amd", 1, "'gfx942'"), ("cpu", 4, "'cpu'")])
def test_fixture_on_machine_trees(pytester, tmp_path, machine, want, chosen):
    amd_machine(tmp_path / "m", 1, gfx_target_version=90402)
    pytester.makepyfile(MODULE.replace("{want}", str(want)).replace("{{", "{").replace("}}", "}"))
    args = [f"--gpuenv-root={tmp_path / 'm'}", "--gpuenv-probe=never", "-p", "no:xdist", "--gpuenv-json=r.json"]
    if machine == "cpu":
        args.append("--gpuenv-backend=cpu")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, failed=2)
    pattern = "'gfx94*' -> 2.0 (device: amd gfx942, rocm 6.4.1)" if machine == "amd" else "'cpu' -> 2.5 (device: cpu)"
    result.stdout.fnmatch_lines(["*- gpuenv: gpu_expected -*", f"gpu_expected chose key {pattern}",
                                 "*gpu_expected: key 'sm_9x': unknown condition 'sm_9x'*"])
    assert "During handling" not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    assert [(e["nodeid"].split("::")[1], e["key"]) for e in report["expected"]] == [
        ("test_exact", chosen), ("test_wrong_value", "'gfx94*'" if machine == "amd" else "'cpu'")]


def test_fixture_on_the_h100_tree(pytester, roots):
    """NVIDIA trees carry no arch without NVML: the vendor key and the driver's version range decide."""
    pytester.makepyfile("""
        def test_vendor(gpu_expected):
            assert gpu_expected({"sm_90": 1, "nvidia": 2, None: 0}) == 2

        def test_driver(gpu_expected):
            assert gpu_expected({("nvidia", "driver>=550"): "new", "nvidia": "old"}) == "new"
    """)
    result = pytester.runpytest_subprocess(f"--gpuenv-root={roots('h100_linux')}", "-p", "no:xdist")
    result.assert_outcomes(passed=2)


@requires_gpu
def test_on_the_gpu(gpu_expected, gpu_device):
    """On a real GPU the arch key of that GPU wins over its vendor's and the default."""
    assert gpu_expected({gpu_device.arch.split(":")[0]: "arch", gpu_device.vendor: "vendor", None: "default"}) == "arch"
