"""Kernel arguments are checked against the declared parameters before anything reaches a GPU."""

from __future__ import annotations

import ctypes
import struct

import pytest

from pytest_gpuenv.rtc._args import launch_dims, pack_args
from pytest_gpuenv.rtc.source import find_kernels

SRC = """extern "C" __global__ void k(float* out, const float* __restrict__ a, int n, unsigned int m,
                                size_t s, double d, __half h, float f) {}"""
PARAMS = find_kernels(SRC)["k"].params


class FakeCudaTensor:
    """Quacks like a CUDA torch tensor (this machine has no GPU)."""

    __module__ = "torch.fake"

    def __init__(self, index=0, dtype="torch.float32", ptr=0x7000_0000):
        self.device = _Dev("cuda", index)
        self.dtype = dtype
        self._ptr = ptr

    def data_ptr(self):
        return self._ptr


class _Dev:
    def __init__(self, type_, index):
        self.type, self.index = type_, index

    def __str__(self):
        return f"{self.type}:{self.index}"


class CAI:
    def __init__(self, ptr, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr, "shape": (4,), "version": 3}


def good_args():
    return [FakeCudaTensor(), CAI(0x1234), 10, 2**32 - 1, 2**64 - 1, 1.5, 0.5, 2.0]


def test_pack_good_args_values_and_layout():
    packed = pack_args("k", PARAMS, good_args(), device=0)
    assert len(packed) == 8
    vals = [v.value for v in packed.values]
    assert vals[:6] == [0x7000_0000, 0x1234, 10, 2**32 - 1, 2**64 - 1, 1.5]
    assert vals[6] == struct.unpack("<H", struct.pack("<e", 0.5))[0]
    assert isinstance(packed.values[2], ctypes.c_int32) and isinstance(packed.values[4], ctypes.c_uint64)
    ptrs = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
    assert ptrs[2] == ctypes.addressof(packed.values[2])


def test_wrong_count_names_expected_params():
    with pytest.raises(TypeError, match=r"kernel 'k' takes 8 arguments \(float\* out, const float\* __restrict__ a, int n,"):
        pack_args("k", PARAMS, good_args()[:3])


@pytest.mark.parametrize(
    "index, value, match",
    [
        (2, 2**31, r"argument 'n' \(int n\): 2147483648 does not fit int"),
        (2, 1.5, r"argument 'n' \(int n\) expects an integer, got 1.5"),
        (2, True, r"argument 'n' \(int n\) expects an integer, got True"),
        (3, -1, r"argument 'm' \(unsigned int m\): -1 does not fit unsigned int"),
        (5, "x", r"argument 'd' \(double d\) expects a number, got str"),
        (6, 1e6, r"argument 'h' \(__half h\): 1000000.0 overflows __half"),
        (7, 1e39, r"argument 'f' \(float f\): 1e\+39 overflows float"),
        (2, FakeCudaTensor(), r"argument 'n' \(int n\) is a scalar int, got a torch.float32 tensor on cuda:0"),
        (0, 3.0, r"argument 'out' \(float\* out\) expects a device pointer"),
        (0, FakeCudaTensor(index=1), r"argument 'out' \(float\* out\) is on cuda:1, but the kernel launches on cuda:0"),
        (0, FakeCudaTensor(dtype="torch.float64"), r"argument 'out' \(float\* out\) expects float elements, got a torch.float64"),
        (1, CAI(1, "<f8"), r"argument 'a' .* expects float elements, got an array of typestr '<f8'"),
    ],
)
def test_bad_argument_names_the_parameter(index, value, match):
    args = good_args()
    args[index] = value
    with pytest.raises(TypeError, match=match):
        pack_args("k", PARAMS, args, device=0)


def test_cpu_tensor_and_host_array_rejected():
    torch = pytest.importorskip("torch")
    args = good_args()
    args[0] = torch.zeros(4)
    with pytest.raises(TypeError, match=r"argument 'out' \(float\* out\) is a tensor on the CPU \(cpu\); move it to the GPU"):
        pack_args("k", PARAMS, args, device=0)
    np = pytest.importorskip("numpy")
    args[0] = np.zeros(4, dtype=np.float32)
    with pytest.raises(TypeError, match=r"argument 'out' \(float\* out\) is a host array \(numpy.ndarray\)"):
        pack_args("k", PARAMS, args, device=0)


def test_numpy_scalars_accepted():
    np = pytest.importorskip("numpy")
    args = good_args()
    args[2], args[5], args[7] = np.int32(7), np.float64(2.5), np.float32(1.25)
    vals = [v.value for v in pack_args("k", PARAMS, args).values]
    assert (vals[2], vals[5], vals[7]) == (7, 2.5, 1.25)


def test_none_and_int_addresses_for_pointers():
    args = good_args()
    args[0], args[1] = None, 0xDEAD0000
    vals = [v.value for v in pack_args("k", PARAMS, args).values]
    assert vals[0] is None and vals[1] == 0xDEAD0000


def test_by_value_vector_wants_a_tuple_by_name():
    params = find_kernels('extern "C" __global__ void k(float2 v) {}')["k"].params
    with pytest.raises(TypeError, match=r"argument 'v' \(float2 v\) is a float2 by value: pass a tuple of 2 numbers, got float"):
        pack_args("k", params, [1.0])


@pytest.mark.parametrize(
    "value, expect",
    [(4, (4, 1, 1)), ((4,), (4, 1, 1)), ((2, 3), (2, 3, 1)), ([2, 3, 4], (2, 3, 4))],
)
def test_launch_dims(value, expect):
    assert launch_dims(value, "grid") == expect


@pytest.mark.parametrize("value", [0, (1, 2, 3, 4), (), (1.5,), "8", -1])
def test_launch_dims_bad(value):
    with pytest.raises(TypeError, match="grid"):
        launch_dims(value, "grid")
