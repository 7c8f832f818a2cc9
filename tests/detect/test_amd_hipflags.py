"""HIP's environment as clr's flag parser reads it: empty and quoted masks, HIP_SKIP_ABORT_ON_GPU_ERROR.

Sources read:
- ROCm/clr f9f995c (Oct 2024) ``rocclr/utils/flags.cpp``: ``removeQuotes`` (lines 39-76), ``Flag::init``
  (lines 96-159; an empty value is stored as ``" "`` at lines 114 and 136), ``Flag::setValue`` (lines 162-192:
  ``atoi`` for ``Tint``/``Tuint`` at line 176, ``removeQuotes`` for ``Tcstring`` at line 184). The same text is
  in ROCm/rocm-systems 02fcd1b ``projects/clr/rocclr/utils/flags.cpp`` (``Flag::init`` gained four lines of
  async logging, so ``setValue`` starts at line 166 there). The empty-value rule is clr commit b5799c4
  (2022-11-10, "SWDEV-363536 - HIP_VISIBLE_DEVICES= should disable the device").
- ROCm/clr f9f995c ``rocclr/utils/flags.hpp`` lines 156-159: ``release(cstring, HIP_VISIBLE_DEVICES, "")``
  and ``CUDA_VISIBLE_DEVICES``; ``rocclr/device/rocm/rocdevice.cpp`` ``Device::init`` lines 496-547: HIP's
  value when ``HIP_VISIBLE_DEVICES[0] != '\\0'``, else CUDA's; each token must equal
  ``std::to_string(atoi(str_id))``, so ``" "`` selects nothing. ``pal/paldevice.cpp`` lines 1431-1438: the
  same choice on Windows.
- ROCm/rocm-systems ca4deb4 ``projects/clr/rocclr/utils/flags.hpp``: ``release(uint,
  HIP_SKIP_ABORT_ON_GPU_ERROR, true, "Set this to true, to avoid host side abort for GPU errors")``; clr
  tests ``if (!HIP_SKIP_ABORT_ON_GPU_ERROR || !amd::Device::IsGPUInError())`` (hipamd/src/hip_platform.cpp).
- torch ``torch/cuda/__init__.py`` ``_parse_visible_devices`` (torch 2.13): ``""`` -> no device.
"""

from __future__ import annotations

import pytest
from _machines import amd4_visible as _visible

from pytest_gpuenv.detect._hipmask import clr_cstring, clr_uint, hip_mask_source, remove_quotes

pytestmark = pytest.mark.usefixtures("no_outer_masks")


# ------------------------------------------------------------------- item 1: empty masks hide every GPU
@pytest.mark.parametrize("environ, name", [
    ({"HIP_VISIBLE_DEVICES": ""}, "HIP_VISIBLE_DEVICES"),
    # HIP's " " is non-empty, so it wins over CUDA's list
    ({"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "2,3"}, "HIP_VISIBLE_DEVICES"),
    # HIP's unset: CUDA's " " is read, and hides everything as well
    ({"CUDA_VISIBLE_DEVICES": ""}, "CUDA_VISIBLE_DEVICES"),
    # within ROCr's set too
    ({"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": ""}, "HIP_VISIBLE_DEVICES"),
])
def test_empty_mask_hides_every_gpu_from_hip(four, environ, name):
    env, seen = _visible(four, **environ)
    assert seen == [] and env.backend == "cpu"
    p = env.problem("visible-devices-hide-all")
    assert p.message == (f"0 GPUs visible: {name}='' hides all 4 detected device(s) (HIP reads an empty value "
                         "as ' ', which is no device index)")
    assert all(not d.usable and d.unusable_reason.startswith("hidden by ") for d in env.hidden_devices)
    assert any("clr stores an empty value as ' ' (Flag::init)" in e for e in env.evidence)
    # torch's _parse_visible_devices also reads "" as no device: the two readings agree
    assert "visible-devices-torch-differs" not in env.problem_codes


def test_empty_mask_skip_reason_names_the_variable(pytester, four, monkeypatch):
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    pytester.makepyfile("def test_gpu(gpu_device): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", f"--gpuenv-root={four}", "-rs", "--gpuenv-probe=never")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*no visible GPU, 4 hidden (hidden by HIP_VISIBLE_DEVICES='')*"])


def test_quoted_empty_value_falls_through_to_cuda(four):
    # removeQuotes('""') is "" -> HIP_VISIBLE_DEVICES[0] == '\0' -> CUDA_VISIBLE_DEVICES is read
    env, seen = _visible(four, HIP_VISIBLE_DEVICES='""', CUDA_VISIBLE_DEVICES="3")
    assert seen == [3]
    assert hip_mask_source({"HIP_VISIBLE_DEVICES": '""'}) is None


# ------------------------------------------------------------------------ item 5: quoted mask values
@pytest.mark.parametrize("raw, value", [
    ('"1"', "1"),
    ('  "1,2"  ', "1,2"),  # leading and trailing blanks around the quotes
    ('"1" x', '"1" x'),  # a non-blank after the last quote: not a quoted string
    ('"a"b"', 'a"b'),  # from the first to the last quote
    ("\t\"1\"", "\t\"1\""),  # only ' ' is skipped
    ('"1', '"1'),
])
def test_remove_quotes_as_clr(raw, value):
    assert remove_quotes(raw) == value
    assert clr_cstring(raw) == value


def test_quoted_hip_visible_devices_selects_the_gpu(four):
    # a .env file's HIP_VISIBLE_DEVICES="1" arrives with its quotes: clr strips them
    env, seen = _visible(four, HIP_VISIBLE_DEVICES='"1"')
    assert seen == [1] and "visible-devices-hide-all" not in env.problem_codes
    assert any("clr strips the quotes (removeQuotes): '1'" in e for e in env.evidence)
    # torch's _strtoul('"1"') is -1: torch counts 0 and says so
    p = env.problem("visible-devices-torch-differs")
    assert "HIP reads HIP_VISIBLE_DEVICES='\"1\"' (clr strips the quotes (removeQuotes): '1') and sees 1" in p.message


# ------------------------------------------------------- item 2: HIP_SKIP_ABORT_ON_GPU_ERROR as a uint flag
@pytest.mark.parametrize("raw, value", [
    (None, 1), ("1", 1), (" 1", 1), ("+2", 2), ("-1", -1), ("7abc", 7),
    ("", 0), ("false", 0), ("off", 0), ("no", 0), ("true", 0), ("0x1", 0), ('"1"', 0), ("0", 0),
    ("4294967296", 0),  # (int)strtol: the low 32 bits
    ("99999999999999999999999", -1),  # strtol clamps to LONG_MAX, whose low 32 bits are -1
])
def test_uint_flag_reads_with_atoi(raw, value):
    assert clr_uint(raw, 1) == value
