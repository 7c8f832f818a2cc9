"""``gpu_assert_close`` on a real NVIDIA GPU (the H200 of scripts/gpu-check.sh): the arch comes from the
tensor's device, the TF32 profile follows torch's matmul flag, and a GPU tensor's failure names the arch."""

from __future__ import annotations

import pytest

from pytest_gpuenv import requires_capability, requires_cuda
from pytest_gpuenv.base.tolerance import compare


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@requires_cuda
@requires_capability("tf32")
def test_tf32_profile_follows_the_matmul_flag(torch, gpu_device):
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.rand(256, 64, device="cuda", generator=g)
    b = torch.rand(64, 256, device="cuda", generator=g)
    ref = a.double() @ b.double()
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        c = a @ b
        prof = compare(c, ref)  # passes at the TF32 profile
        assert prof.ctx.arch == gpu_device.arch and prof.rtol == 1e-3 and "TF32 matmul on" in prof.rtol_from
        torch.backends.cuda.matmul.allow_tf32 = False
        with pytest.raises(AssertionError, match=rf"profile float32 on {gpu_device.arch}: rtol=1.3e-06"):
            compare(c, ref)  # the TF32 result is not float32-accurate
        exact = compare(a @ b, ref)
        assert exact.rtol == 1.3e-6
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@requires_cuda
def test_gpu_tensor_failure_names_the_arch_and_index(torch, gpu_device, gpu_assert_close):
    x = torch.ones(4, 4, device="cuda", dtype=torch.float16)
    y = x.clone()
    y[2, 1] = 1.5
    with pytest.raises(AssertionError, match=rf"profile float16 on {gpu_device.arch}(.|\n)*index \(2, 1\)"):
        gpu_assert_close(y, x)
    gpu_assert_close(x, x.cpu())


@requires_cuda
@requires_capability("fp8")
def test_fp8_tensor_on_the_gpu(torch, gpu_assert_close):
    f8 = torch.tensor([1.0, 2.0, 4.0], device="cuda").to(torch.float8_e4m3fn)
    gpu_assert_close(f8, torch.tensor([1.1, 2.2, 4.4], device="cuda"))
