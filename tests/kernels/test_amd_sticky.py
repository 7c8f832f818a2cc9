"""HIP 7's stored GPU error: a queue error answers every later HIP call (issue 26 item 3).

Sources read (ROCm/rocm-systems 01280b9, ``projects/clr``):
- ``rocclr/device/rocm/rocdevice.cpp`` ``callbackQueue``: unless it aborts, ``amd::Device::gpu_error_ =
  ConvertHSAErrorIntoCLError(status)``; ``ConvertHSAErrorIntoCLError``: OUT_OF_RESOURCES -> CL_OUT_OF_RESOURCES,
  EXCEPTION / INVALID_PACKET_FORMAT -> CL_INVALID_OPERATION, INVALID_ARGUMENT / INCOMPATIBLE_ARGUMENTS ->
  CL_INVALID_ARG_VALUE, INVALID_ALLOCATION -> CL_MEM_OBJECT_ALLOCATION_FAILURE, INVALID_CODE_OBJECT ->
  CL_INVALID_PROGRAM, INVALID_ISA -> CL_INVALID_KERNEL, ILLEGAL_INSTRUCTION -> CL_BUILD_PROGRAM_FAILURE,
  MEMORY_FAULT / MEMORY_APERTURE_VIOLATION -> CL_INVALID_MEM_OBJECT, INVALID_DISPATCH_PARAMETERS ->
  CL_OUT_OF_RESOURCES, HSA_STATUS_ERROR and the rest -> CL_DEVICE_NOT_AVAILABLE.
- ``hipamd/src/hip_internal.hpp`` ``ConvertCLErrorIntoHIPError``: CL_INVALID_OPERATION and
  CL_BUILD_PROGRAM_FAILURE -> hipErrorLaunchFailure, CL_MEM_OBJECT_ALLOCATION_FAILURE and CL_INVALID_MEM_OBJECT ->
  hipErrorIllegalAddress, CL_INVALID_PROGRAM -> hipErrorInvalidSource, CL_INVALID_ARG_VALUE -> hipErrorInvalidValue,
  CL_INVALID_KERNEL -> hipErrorInvalidKernelFile, anything else (CL_OUT_OF_RESOURCES, CL_DEVICE_NOT_AVAILABLE) ->
  hipErrorUnknown; ``HIP_INIT_API``: ``if (amd::Device::IsGPUInError()) HIP_RETURN(ConvertCLErrorIntoHIPError(
  amd::Device::GetGPUError()))`` before anything else.
- ROCm/clr f9f995c (Oct 2024, ROCm 6.3): no ``IsGPUInError``/``gpu_error_`` anywhere; ``callbackQueue`` aborts.
  ``hip_context.cpp`` line 203: ``hipRuntimeGetVersion`` uses ``HIP_INIT_API_NO_RETURN`` (answers in error);
  ``hip_device_runtime.cpp`` line 657: ``hipGetDevice`` uses ``HIP_INIT_API``.
"""

from __future__ import annotations

import pytest
from _checkout import TESTS

pytest.importorskip("hip")

from _hip_standin import HipStandin

from pytest_gpuenv.runtime import KernelLaunchError, poisoned
from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime._common import Function
from pytest_gpuenv.runtime.hip import HipRuntime

pytestmark = pytest.mark.usefixtures("no_poison")  # a clean sticky-error record before and after each test (conftest)


def _launch(rt):
    rt.launch(Function(handle=object(), module=None, name="k"), (1, 1, 1), (64, 1, 1), 0, stream=0)


# an HSA status of the queue callback -> the code every later call answers
@pytest.mark.parametrize("code", ["hipErrorUnknown", "hipErrorInvalidValue", "hipErrorLaunchFailure",
                                  "hipErrorIllegalAddress", "hipErrorInvalidKernelFile", "hipErrorInvalidSource"])
def test_fault_seen_at_sync_poisons_and_names_the_test(code):
    hip = HipStandin(fault=code)
    rt = HipRuntime(0, hip=hip)
    with _sticky.running("tests/x.py::test_faults"):
        _launch(rt)
        with pytest.raises(KernelLaunchError) as e:
            rt.synchronize()
    assert e.value.code == code and e.value.sticky
    p = poisoned("rocm")
    assert (p.by, p.code, p.culprit) == ("tests/x.py::test_faults", code, True)


def test_stored_error_found_by_a_later_test_names_the_launcher():
    # test A launched and returned without waiting; the queue callback stored HSA_STATUS_ERROR (hipErrorUnknown);
    # test B's first call (hipMalloc) answers it
    hip = HipStandin()
    rt = HipRuntime(0, hip=hip)
    with _sticky.running("tests/x.py::test_a"):
        _launch(rt)
    hip.stored = "hipErrorUnknown"
    with _sticky.running("tests/x.py::test_b"), pytest.raises(KernelLaunchError) as e:
        rt.malloc(64)
    assert e.value.code == "hipErrorUnknown" and e.value.sticky
    p = poisoned("rocm")
    assert (p.by, p.culprit, p.launched) == ("tests/x.py::test_b", False, "tests/x.py::test_a")
    assert p.reason().startswith("HIP device poisoned by tests/x.py::test_a (its kernel's error surfaced in "
                                 "tests/x.py::test_b) (hipErrorUnknown)")


def test_the_same_code_without_a_stored_error_is_not_sticky():
    # hipErrorInvalidValue from a bad argument: hipGetDevice answers hipSuccess, nothing is stored
    hip = HipStandin()
    rt = HipRuntime(0, hip=hip)
    with pytest.raises(KernelLaunchError) as e:
        rt.malloc(-1)
    assert e.value.code == "hipErrorInvalidValue" and not e.value.sticky and poisoned() is None
    assert "hipGetDevice" in hip.calls


def test_before_hip7_nothing_is_stored_so_nothing_is_probed():
    # ROCm 6.x: a queue error aborts (no gpu_error_); hipErrorUnknown is an ordinary error
    hip = HipStandin(version=60443483, sync="hipErrorUnknown")
    rt = HipRuntime(0, hip=hip)
    with pytest.raises(KernelLaunchError) as e:
        rt.synchronize()
    assert not e.value.sticky and poisoned() is None and "hipGetDevice" not in hip.calls
    # hipErrorIllegalAddress stays sticky on every version
    hip.sync = "hipErrorIllegalAddress"
    with pytest.raises(KernelLaunchError) as e:
        rt.synchronize()
    assert e.value.sticky and poisoned("rocm").code == "hipErrorIllegalAddress"


def test_later_gpu_tests_skip_naming_the_culprit(pytester):
    pytester.makeconftest(f"""
import sys
sys.path.insert(0, {TESTS!r})
import pytest
from _hip_standin import HipStandin
from pytest_gpuenv import runtime
from pytest_gpuenv.runtime.hip import HipRuntime
from pytest_gpuenv.runtime._common import Function

HIP = HipStandin()
runtime._RUNTIMES[("rocm", 0)] = HipRuntime(0, hip=HIP)
""")
    pytester.makepyfile("""
import pytest
from pytest_gpuenv import runtime
from pytest_gpuenv.runtime._common import Function
import conftest

def _rt():
    return runtime._RUNTIMES[("rocm", 0)]

def test_a_launches():
    with runtime.running("test_x.py::test_a_launches"):
        _rt().launch(Function(object(), None, "k"), (1, 1, 1), (64, 1, 1), 0, stream=0)
    conftest.HIP.stored = "hipErrorUnknown"   # the queue callback stores HSA_STATUS_ERROR

def test_b_finds_it():
    with runtime.running("test_x.py::test_b_finds_it"):
        _rt().malloc(64)

def test_c_later():
    p = runtime.poisoned("rocm")
    assert p is not None
    pytest.skip(p.reason())
""")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*HIP device poisoned by test_x.py::test_a_launches (its kernel's error surfaced "
                                 "in test_x.py::test_b_finds_it) (hipErrorUnknown)*"])

