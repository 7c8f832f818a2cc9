"""The capability table against a real NVIDIA GPU (the H200 of scripts/gpu-check.sh: sm_90).

What torch reads from the device must agree with what ``base/capabilities.py`` says of its arch: shared memory
per block (opt-in), warp size, bf16, and the effects of tf32 and fp8 on real arithmetic.
"""

from __future__ import annotations

import pytest

from pytest_gpuenv import requires_capability, requires_cuda
from pytest_gpuenv.base import capabilities


@pytest.fixture
def torch_cuda():
    return pytest.importorskip("torch")


def _device(gpu_env):
    return gpu_env.usable_devices[0]


@requires_cuda
def test_table_matches_torch_properties(gpu_env, torch_cuda):
    torch = torch_cuda
    dev = _device(gpu_env)
    major, minor = torch.cuda.get_device_capability(0)
    assert dev.arch == f"sm_{major}{minor}"
    row = capabilities.row(dev.arch)
    assert row is not None, f"{dev.arch} missing from the table"
    props = torch.cuda.get_device_properties(0)
    optin = getattr(props, "shared_memory_per_block_optin", None)
    if optin is not None:
        assert optin == row.shared, (optin, row.shared)
    if getattr(props, "warp_size", None):
        assert props.warp_size in row.waves
    assert torch.cuda.is_bf16_supported() == row.bf16
    print(f"{dev.arch}: {capabilities.describe(dev, gpu_env)}")


@requires_cuda
@requires_capability("tf32")
def test_tf32_changes_float32_matmul(torch_cuda):
    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(512, 512, device="cuda", generator=g)
    b = torch.randn(512, 512, device="cuda", generator=g)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        exact = a @ b
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert not torch.equal(exact, tf32)
    assert torch.allclose(exact, tf32, rtol=1e-2, atol=1e-1)


@requires_cuda
@requires_capability("fp8_ocp", "matrix_cores")
def test_fp8_scaled_mm_runs(torch_cuda):
    torch = torch_cuda
    a = torch.eye(32, device="cuda").to(torch.float8_e4m3fn)
    b = torch.eye(32, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
    assert torch.equal(out, torch.eye(32, device="cuda"))


@requires_cuda
@requires_capability("bf16", "shared_memory>=200KiB")
def test_h100_class_capabilities_run(gpu_env):
    assert capabilities.row(_device(gpu_env).arch).shared >= 200 * 1024
