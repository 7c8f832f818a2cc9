"""hipErrorLaunchFailure is sticky only when a kernel failed (issue 10 item 2).

clr's launch validation (ROCm/clr hipamd/src/hip_module.cpp, ``ihipLaunchKernel_validate``, tag
rocm-6.2.0 lines 242-250 for the launch bounds, 253-255 and 272-274 for cooperative launches) returns hipErrorLaunchFailure before anything is enqueued when
the block is larger than the kernel's launch bounds (``workGroupInfo()->size_``) and when the device
cannot do a cooperative (multi-device) launch. A device already in error answers every API with its
error (clr hipamd/src/hip_internal.hpp ``HIP_INIT_API`` since HIP 7.0: ``if (amd::Device::IsGPUInError())
HIP_RETURN(ConvertCLErrorIntoHIPError(amd::Device::GetGPUError()))``), so a failing cheap call after the refusal means the context is broken.
The binding is replaced by tests/_hip_standin.py (hip-python's own enums); everything above it is real.
"""

from __future__ import annotations

import pytest

pytest.importorskip("hip")

from _hip_standin import HipStandin

from pytest_gpuenv.runtime import KernelLaunchError, poisoned
from pytest_gpuenv.runtime import sticky as _sticky
from pytest_gpuenv.runtime._common import Function
from pytest_gpuenv.runtime.hip import HipRuntime

pytestmark = pytest.mark.usefixtures("no_poison")  # a clean sticky-error record before and after each test (conftest)


def _launch(hip: HipStandin, block=(1024, 1, 1)):
    rt = HipRuntime(0, hip=hip)
    rt.launch(Function(handle=object(), module=None, name="k"), (1, 1, 1), block, 0, stream=0)


def test_block_above_launch_bounds_is_not_sticky():
    # hip_module.cpp: "Launch params (%u, %u, %u) are larger than launch bounds (%lu)" -> hipErrorLaunchFailure
    hip = HipStandin(launch="hipErrorLaunchFailure", func_attr=("hipSuccess", 256))
    with _sticky.running("tests/x.py::test_big_block"), pytest.raises(KernelLaunchError) as e:
        _launch(hip)
    assert e.value.code == "hipErrorLaunchFailure" and e.value.sticky is False
    assert "1024x1x1 (1024 threads)" in str(e.value) and "(256 threads per block)" in str(e.value)
    assert "still usable" in str(e.value)
    assert poisoned() is None and poisoned("rocm") is None  # later hip_kernel tests are not skipped
    assert hip.calls == ["hipModuleLaunchKernel", "hipFuncGetAttribute(HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)"]


def test_refused_within_bounds_names_no_block_but_is_not_sticky():
    # hip_module.cpp: a cooperative launch the device cannot do -> hipErrorLaunchFailure, nothing ran
    hip = HipStandin(launch="hipErrorLaunchFailure", func_attr=("hipSuccess", 1024))
    with pytest.raises(KernelLaunchError) as e:
        _launch(hip, block=(64, 1, 1))
    assert e.value.sticky is False and "refused to launch kernel 'k' before it ran" in str(e.value)
    assert poisoned() is None


def test_refused_on_a_device_in_error_is_sticky():
    # HIP_INIT_API returns the device's error for every call once a kernel faulted
    hip = HipStandin(launch="hipErrorLaunchFailure", func_attr=("hipErrorLaunchFailure", 0))
    with _sticky.running("tests/x.py::test_after_fault"), pytest.raises(KernelLaunchError) as e:
        _launch(hip)
    assert e.value.sticky is True and "hipFuncGetAttribute after hipErrorLaunchFailure" in str(e.value)
    p = poisoned("rocm")
    assert p is not None and p.code == "hipErrorLaunchFailure" and p.culprit is False
    assert p.by == "tests/x.py::test_after_fault"


def test_launch_failure_while_waiting_for_the_kernel_stays_sticky():
    hip = HipStandin(sync="hipErrorLaunchFailure")
    rt = HipRuntime(0, hip=hip)
    with _sticky.running("tests/x.py::test_faults"), pytest.raises(KernelLaunchError) as e:
        rt.synchronize(0)
    assert e.value.sticky is True
    p = poisoned("rocm")
    assert p is not None and p.culprit is True and p.by == "tests/x.py::test_faults"


def test_other_launch_errors_unchanged():
    hip = HipStandin(launch="hipErrorInvalidValue")
    with pytest.raises(KernelLaunchError) as e:
        _launch(hip)
    assert e.value.code == "hipErrorInvalidValue" and e.value.sticky is False
    # on HIP 7 the code may be clr's stored GPU error: one hipGetDevice (HIP_INIT_API) tells (test_amd_sticky.py)
    assert hip.calls == ["hipModuleLaunchKernel", "hipGetDevice"]
