"""An existing-style suite, as a user would have it, run with ``pytest -p gpuenv examples``.

The seed's snippet (a matrix times its transpose) runs on ``torch_device``: on the GPU where one is
usable, else on the CPU. The ROCm-only and CUDA-only tests skip elsewhere with a reason that says
what was required and what was found.
"""

import pytest

from pytest_gpuenv import requires_cuda, requires_rocm

torch = pytest.importorskip("torch")


def test_matmul_transpose(torch_device, gpu_assert_close):
    tensor = torch.randn(1000, 1000).to(torch_device)
    result = tensor @ tensor.t()
    reference = tensor.double().cpu() @ tensor.double().cpu().t()
    gpu_assert_close(result, reference, rtol=1e-4, atol=1e-3)  # a failure names the worst element
    assert result.device.type == torch_device.type


@requires_rocm
def test_rocm_build_sees_the_gpu(gpu_device):
    # On ROCm, PyTorch answers through torch.cuda; torch.version.hip tells the builds apart.
    assert torch.version.hip is not None
    assert torch.cuda.is_available()
    props = torch.cuda.get_device_properties(gpu_device.index)
    assert props.gcnArchName.split(":")[0] in (gpu_device.physical_arch, gpu_device.arch)
    # 64 on CDNA (gfx9), 32 on RDNA: read from sysfs by the plugin, from the runtime by torch
    assert getattr(props, "warp_size", gpu_device.warp_size) == gpu_device.warp_size


@requires_cuda
def test_cuda_build_sees_the_gpu(gpu_device):
    assert torch.version.cuda is not None and torch.version.hip is None
    assert torch.cuda.is_available()
    assert torch.cuda.get_device_name(gpu_device.index) == gpu_device.name
    major, minor = torch.cuda.get_device_capability(gpu_device.index)
    assert gpu_device.arch == f"sm_{major}{minor}"
