"""The CPU executor's launch request: by-value arguments whose alignment exceeds their ctypes type's (a
``double4``, an ``__align__(32)`` struct) arrive aligned as the kernel's signature says; a kernel's own
output (``write`` to its stdout) is shown whole even when the kernel moves the file's offset."""

from __future__ import annotations

import ctypes
import shutil

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv.rtc import compile_kernel  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")

ALIGNED = """#include <hip/hip_runtime.h>
struct __align__(32) S32 { double a, b, c, d; };
extern "C" __global__ void take_d4(double4 v, double* out) {
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
extern "C" __global__ void take_d4_after_char(char c, double4 v, double* out) {
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
template <class T> __global__ void take_s(char c, T v, double* out) {
    out[0] = v.a; out[1] = v.b; out[2] = v.c; out[3] = v.d;
}
"""


class S32(ctypes.Structure):
    _fields_ = [("a", ctypes.c_double), ("b", ctypes.c_double), ("c", ctypes.c_double), ("d", ctypes.c_double)]


@pytest.mark.parametrize(("name", "args"), [
    ("take_d4", ((1.0, 2.0, 3.0, 4.0),)),
    ("take_d4_after_char", (7, (1.0, 2.0, 3.0, 4.0))),
    ("take_s<S32>", (7, S32(1, 2, 3, 4))),
])
def test_over_aligned_by_value_arguments(cpu_cache: str, name: str, args: tuple) -> None:
    k = compile_kernel(ALIGNED, name, arch="cpu", cache_dir=cpu_cache)
    out = np.zeros(4)
    k(1, 1, *args, out)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]


OUTPUT = '#include <hip/hip_runtime.h>\n#include <unistd.h>\n'


def test_output_of_a_kernel_that_seeks_its_stdout(cpu_cache: str, capfd: pytest.CaptureFixture[str]) -> None:
    plain = compile_kernel(OUTPUT + 'extern "C" __global__ void w(int* p) { write(1, "plain\\n", 6); }\n', "w",
                           arch="cpu", cache_dir=cpu_cache)
    seeker = compile_kernel(OUTPUT + 'extern "C" __global__ void s(int* p) { write(1, "seeker\\n", 7); '
                            'lseek(1, 0, SEEK_SET); }\n', "s", arch="cpu", cache_dir=cpu_cache)
    p = np.zeros(1, np.int32)
    plain(1, 1, p)
    assert capfd.readouterr().out == "plain\n"
    seeker(1, 1, p)
    assert capfd.readouterr().out == "seeker\n"  # its own output
    plain(1, 1, p)
    assert capfd.readouterr().out == "plain\n"  # and the next kernel's


BOOL_AND_VEC = """#include <hip/hip_runtime.h>
extern "C" __global__ void k(int* out, bool flag, float4 v, float f) {
    out[0] = flag ? 1 : 2;
    out[1] = (int)(v.x + v.y + v.z + v.w + f);
}
"""


def test_numpy_bool_is_a_bool_and_strings_are_no_numbers(tmp_path):
    """numpy 2 calls its scalar ``bool`` (``np.bool_`` was refused for a ``bool`` parameter), and a string was
    taken for a float4's or a float's number (``float("1.5")``)."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    k = compile_kernel(BOOL_AND_VEC, "k", arch="cpu", cache_dir=str(tmp_path))
    out = np.zeros(2, np.int32)
    k(1, 1, out, np.True_, (1, 2, 3, 4), np.float32(0.5))
    assert out.tolist() == [1, 10]
    with pytest.raises(TypeError, match=r"argument 'v' \(float4 v\) expects a number, got"):
        k(1, 1, out, True, ("1", 2, 3, 4), 0.0)
    with pytest.raises(TypeError, match=r"argument 'f' \(float f\) expects a number, got"):
        k(1, 1, out, True, (1, 2, 3, 4), "1.5")


class _Forged:
    """An object that claims to be an array at an address that holds no memory of this process."""

    def __init__(self, address: int, readonly: bool = False) -> None:
        self.__array_interface__ = {"shape": (16,), "typestr": "<i4", "data": (address, readonly), "version": 3}


@pytest.mark.parametrize("address", [8, 2**47 - 4096])
def test_a_forged_array_interface_is_a_type_error_not_a_crash(tmp_path, address):
    """A forged ``__array_interface__`` (data address 8) killed the launching pytest with SIGSEGV when the
    argument was copied: an address range that is not readable (or, for output, writable) memory of this
    process is a TypeError before anything touches it."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    k = compile_kernel(BOOL_AND_VEC, "k", arch="cpu", cache_dir=str(tmp_path))
    with pytest.raises(TypeError, match=r"argument 'out' \(int\* out\): its __array_interface__ gives 64 bytes at "
                                        rf"{address:#x}, which are not writable memory"):
        k(1, 1, _Forged(address), True, (1, 2, 3, 4), 0.0)
    out = np.zeros(2, np.int32)
    k(1, 1, out, True, (1, 2, 3, 4), 0.0)  # the process and the executor go on
    assert out.tolist() == [1, 10]


@pytest.mark.parametrize("wrap", ["np.asarray", "np.array(copy=False)"])
def test_a_forged_array_interface_inside_a_real_ndarray_is_refused(tmp_path, wrap):
    """``np.asarray(forged)`` is a real ndarray over the forged address: the check follows its bases."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    k = compile_kernel(BOOL_AND_VEC, "k", arch="cpu", cache_dir=str(tmp_path))
    forged = np.asarray(_Forged(0x10000)) if wrap == "np.asarray" else np.array(_Forged(0x10000), copy=False)
    with pytest.raises(TypeError, match="which are not writable memory of this process"):
        k(1, 1, forged, True, (1, 2, 3, 4), 0.0)
    for real in (np.zeros(4, np.int32), np.frombuffer(bytearray(16), np.int32), np.zeros(8, np.int32)[:4]):
        k(1, 1, real, True, (1, 2, 3, 4), 0.0)
        assert real[:2].tolist() == [1, 10]


@pytest.mark.parametrize("view", ["[::2]", "[::-1]", "transposed"])
def test_a_strided_view_is_refused_for_a_pointer(tmp_path, view):
    """``np.zeros(16)[::2]`` let the kernel write the elements between the view's (a pointer is memory from its
    first element on); ``[::-1]`` was refused as a buffer of 1 element. Both are refused as not contiguous."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    k = compile_kernel(BOOL_AND_VEC, "k", arch="cpu", cache_dir=str(tmp_path))
    base = np.zeros((4, 4), np.int32)
    arr = {"[::2]": base.reshape(-1)[::2], "[::-1]": base.reshape(-1)[::-1], "transposed": base.T}[view]
    with pytest.raises(TypeError, match=r"argument 'out' \(int\* out\) is not contiguous \(strides .*ascontiguousarray"):
        k(1, 1, arr, True, (1, 2, 3, 4), 0.0)
    assert not base.any()
    k(1, 1, np.ascontiguousarray(arr), True, (1, 2, 3, 4), 0.0)  # the copy is taken
