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
