"""Speed budgets a user would write for the seed's two kernels (kernels/vector_add.hip and
kernels/matmul_tiled.hip), with the ``gpu_bench`` and ``hip_kernel`` fixtures.

- vector_add at 64M elements moves 3 x 4 bytes per element; its bandwidth is compared with an
  equal-bytes device copy measured in the same session (portable across GPUs: no datasheet numbers).
  On the H200 the seed's kernel (one scalar float per thread, 256-thread blocks) reaches 0.80 to 0.81
  of the copy bandwidth (3.40-3.45 of 4.24-4.26 TB/s in two runs; ncu agrees: 232-237 us per launch),
  not the 0.85 the issue hoped for; 512- and 1024-thread blocks are slower (0.75, 0.67); torch.add
  (vectorised loads) reaches 1.02. Timed by the CUPTI timer (kernel durations only, no event pair) the
  copy reads 188 us and vector_add 252 us: 0.75 (two runs, 2026-11-30). The budget is 0.70: what it
  achieves under either timer, with a margin.
- The seed's 16x16 shared-memory tiled matmul is a teaching kernel: on the H200 it takes 6.49x
  [6.47, 6.50] the time of torch.matmul (float32, TF32 off) at 2048^3. The budget below is that ratio
  with a 15 % margin, so the test catches the kernel getting slower, not a faster torch.
"""

import pytest

from pytest_gpuenv import requires_cuda, requires_gpu  # noqa: F401

#: tiled matmul time / torch.matmul time at 2048^3, float32 without TF32: 6.49x measured on the H200 (twice)
MATMUL_RATIO_BUDGET = {"NVIDIA H200": 7.5}
#: vector_add bandwidth / copy bandwidth on the H200: 0.80-0.81 with the event timer, 0.75 with CUPTI's
VECTOR_ADD_COPY_FRACTION = 0.70


def _hip_kernel(request):
    try:
        return request.getfixturevalue("hip_kernel")
    except pytest.FixtureLookupError:
        pytest.skip("requires the hip_kernel fixture (pytest_gpuenv.rtc)")


@pytest.mark.requires_gpu
def test_vector_add_reaches_copy_bandwidth(request, gpu_bench, torch_device):
    import torch

    if torch_device.type != "cuda":
        pytest.skip(f"requires a GPU torch device: found {torch_device}")
    k = _hip_kernel(request)("vector_add.hip", "vector_add", sync=False)
    n = 64 << 20
    a = torch.rand(n, device=torch_device)
    b = torch.rand(n, device=torch_device)
    out = torch.empty_like(a)
    grid = ((n + 255) // 256,)
    m = gpu_bench(lambda: k(grid, (256,), out, a, b, n), bytes=3 * 4 * n, name="vector_add")
    m.assert_bandwidth(at_least=VECTOR_ADD_COPY_FRACTION, of="copy")
    torch.testing.assert_close(out, a + b)


@pytest.mark.requires_gpu
def test_tiled_matmul_vs_torch(request, gpu_bench, torch_device):
    import torch

    if torch_device.type != "cuda":
        pytest.skip(f"requires a GPU torch device: found {torch_device}")
    k = _hip_kernel(request)("matmul_tiled.hip", "matmul_tiled", sync=False)
    M = N = K = 2048
    A = torch.rand(M, K, device=torch_device)
    B = torch.rand(K, N, device=torch_device)
    C = torch.empty(M, N, device=torch_device)
    C_ref = torch.empty(M, N, device=torch_device)
    grid, block = ((N + 15) // 16, (M + 15) // 16), (16, 16)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        name = torch.cuda.get_device_name(torch_device)
        budget = MATMUL_RATIO_BUDGET.get(name)
        if budget is None:
            pytest.skip(f"no matmul ratio budget for {name}: budgets are given for {', '.join(MATMUL_RATIO_BUDGET)}")
        c = gpu_bench.assert_ratio(
            lambda: k(grid, block, C, A, B, M, N, K),
            lambda: torch.matmul(A, B, out=C_ref),
            at_most=budget,
            name="matmul_tiled",
        )
        print(f"matmul_tiled / torch.matmul = {c.ratio:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    torch.testing.assert_close(C, C_ref, rtol=1e-4, atol=1e-3)
