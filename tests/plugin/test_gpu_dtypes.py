"""``@gpu_dtypes`` on a real GPU (the H100 of scripts/gpu-check.sh, sm_90): each dtype the table gives the GPU
runs with a torch dtype, and a value rounded through it is within the dtype's own tolerance profile (which
float32's would reject for the narrow types)."""

from __future__ import annotations

import pytest

from pytest_gpuenv import gpu_dtypes, requires_gpu

torch = pytest.importorskip("torch")


@requires_gpu
@gpu_dtypes("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float64")
def test_round_trip_within_the_dtypes_profile(dtype, gpu_assert_close):
    assert isinstance(dtype, torch.dtype)
    x = torch.linspace(0.5, 2.0, 1024, device="cuda")
    y = x.to(dtype).to(torch.float32)  # rounded on the GPU, compared as float32
    gpu_assert_close(y, x)
    if dtype != torch.float64:
        with pytest.raises(AssertionError, match="profile float32"):
            gpu_assert_close(y, x, dtype="float32")


@requires_gpu
@gpu_dtypes("bfloat16", "float16")
def test_matmul_in_dtype(dtype, gpu_assert_close):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 256, device="cuda", generator=g)
    b = torch.randn(256, 256, device="cuda", generator=g)
    ref = (a.to(dtype).double() @ b.to(dtype).double())
    out = (a.to(dtype) @ b.to(dtype))
    gpu_assert_close(out, ref.to(dtype), atol=0.5)  # sums of 256 products: an absolute floor; rtol from the profile
