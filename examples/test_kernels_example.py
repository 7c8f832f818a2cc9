"""The kernels/ library used the way a user would: compile with ``hip_kernel``, launch on torch tensors.

On a GPU each kernel is built for the device (hiprtc on AMD, NVRTC on NVIDIA) and checked against
torch. On a CPU-only runner with a C++ compiler each kernel runs on the CPU executor (``--gpuenv-kernels
run``, the default) where its test takes CPU tensors; with ``--gpuenv-kernels=compile`` each test compiles
its kernel for every target in ``gpuenv_compile_archs`` and then skips ("compiled for gfx90a, gfx1030, sm_90;
no GPU to launch on"). Either way a kernel that no longer compiles fails even there.
"""

import pytest

torch = pytest.importorskip("torch")


def test_vector_add(hip_kernel, torch_device, gpu_assert_close):
    k = hip_kernel("vector_add.hip", "vector_add")  # beside the test, or in a kernels/ folder up to the rootdir
    n = 1_000_000
    a, b = torch.rand(n, device=torch_device), torch.rand(n, device=torch_device)
    out = torch.empty_like(a)
    k(((n + 255) // 256,), (256,), out, a, b, n)
    gpu_assert_close(out, a + b)  # tolerances of the float32 profile for this device (torch's defaults here)


@pytest.mark.parametrize("m, n, k_", [(64, 64, 64), (100, 37, 129), (1, 257, 3)])
def test_matmul_tiled(hip_kernel, torch_device, gpu_assert_close, m, n, k_):
    """Sizes that are not multiples of the 16x16 tile, including a single row."""
    k = hip_kernel("matmul_tiled.hip", "matmul_tiled")
    a = torch.randn(m, k_, device=torch_device)
    b = torch.randn(k_, n, device=torch_device)
    c = torch.full((m, n), float("nan"), device=torch_device)
    tile = 16
    k(((n + tile - 1) // tile, (m + tile - 1) // tile), (tile, tile), c, a, b, m, n, k_)
    gpu_assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20, 3_000_001])
def test_reduce_sum(hip_kernel, torch_device, n):
    """Correct with 32-wide warps (NVIDIA, RDNA) and 64-wide wavefronts (CDNA): nothing assumes 32."""
    k = hip_kernel("reduce_sum.hip", "reduce_sum")
    x = torch.rand(n, device=torch_device, dtype=torch.float32)
    out = torch.zeros(1, device=torch_device)
    block = 256
    grid = min((n + block - 1) // block, 1024)
    k(grid, block, out, x, n, shared_mem=(block // 32) * 4)
    torch.testing.assert_close(out[0], x.double().sum().float(), rtol=1e-4, atol=1e-3)


def test_wrong_argument_is_a_type_error_before_the_launch(hip_kernel, torch_device):
    k = hip_kernel("vector_add.hip", "vector_add")
    a = torch.rand(16, device=torch_device)
    with pytest.raises(TypeError, match=r"argument 'n' \(int n\) expects an integer, got 16.0"):
        k(1, 16, a, a, a, 16.0)
    with pytest.raises(TypeError, match=r"kernel 'vector_add' takes 4 arguments"):
        k(1, 16, a, a, 16)
