"""Checked mode sees libc's memory and string functions called from device code, shared memory is
limited as on a GPU, globals are read and written through the executor's child process, and pytest
holds no file descriptor per kernel. (The kernels run in the executor's child process.)"""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from pytest_gpuenv.rtc import (  # noqa: E402
    KernelBoundsError,
    KernelCompileError,
    KernelRaceError,
    KernelStackOverflowError,
    compile_kernel,
)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
HEAD = "#include <hip/hip_runtime.h>\n#include <stdio.h>\n#include <string.h>\n"
LIBC = {  # line 5 does the call; p has 4 ints (16 bytes)
    "memset": "memset(p, 0, 17)",
    "memcpy": "memcpy(p, q, 20)",
    "memcpy_read": "memcpy(q, p, 20)",
    "memmove": "memmove(p + 1, p, 16)",
    "strcpy": 'strcpy((char*)p, "sixteen chars ok")',
    "strncpy": 'strncpy((char*)p, "x", 17)',
    "strlen": "p[0] = (int)strlen((const char*)p)",
    "sprintf": 'sprintf((char*)p, "%d-%d-%d", 12345, 67890, 13579)',
    "snprintf": 'snprintf((char*)p, 32, "%d-%d-%d", 12345, 67890, 13579)',
}


def _libc_kernel(call: str) -> str:
    return (HEAD + 'extern "C" __global__ void k(int* p, int* q) {\n' + f"    {call};\n" + "}\n")


@pytest.mark.parametrize("name", list(LIBC))
@pytest.mark.parametrize("warp", [64])
def test_libc_past_a_buffer_is_out_of_bounds(cpu_cache: str, name: str, warp: int) -> None:
    k = compile_kernel(_libc_kernel(LIBC[name]), "k", arch="cpu", cache_dir=cpu_cache, warp_size=warp)
    p = np.full(4, 0x41414141, np.int32)  # no terminating zero: strlen reads past the end
    q = np.zeros(64, np.int32)
    with pytest.raises(KernelBoundsError, match=r"at <source>\.hip:5, .* out of bounds: argument '[pq]'"):
        k(1, 1, p, q)


def test_libc_within_bounds_runs(cpu_cache: str) -> None:
    src = (HEAD + 'extern "C" __global__ void k(char* s, int* n) {\n'
           '    memset(s, 0, 32);\n    snprintf(s, 32, "%d-%s", 42, "ok");\n    n[0] = (int)strlen(s);\n'
           '    memmove(s + 1, s, 4);\n}\n')
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    s, n = np.full(32, 0x7F, np.int8), np.zeros(1, np.int32)
    k(1, 1, s, n)
    assert n[0] == 5 and bytes(s[:6]) == b"442-o\x00"


def test_static_shared_over_the_limit_is_a_compile_error(cpu_cache: str) -> None:
    src = (HEAD + 'extern "C" __global__ void k(float* p) {\n    __shared__ float big[16384];\n'
           '    __shared__ float more[1024];\n    big[threadIdx.x] = more[threadIdx.x] = 1;\n    p[0] = big[0] + more[0];\n}\n')
    with pytest.raises(KernelCompileError, match=r"kernel k: 69632 bytes of static __shared__ memory \('k::big' \(65536 bytes\), "
                                                 r"'k::more' \(4096 bytes\)\) exceed the 65536-byte \(64 KiB\) limit "
                                                 r"of a block on gfx90a"):
        compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)


def test_static_and_dynamic_shared_over_the_limit_is_a_launch_error(cpu_cache: str) -> None:
    src = HEAD + 'extern "C" __global__ void k(float* p) {\n    __shared__ volatile float s[12288];\n    s[0] = 1;\n    p[0] = s[0];\n}\n'
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    p = np.zeros(1, np.float32)
    k(1, 1, p, shared_mem=16384)
    with pytest.raises(TypeError, match=r"49152 bytes of static __shared__ memory \('s' \(49152 bytes\)\) and "
                                        r"shared_mem=16385 exceed the 65536-byte limit"):
        k(1, 1, p, shared_mem=16385)


def test_race_at_the_end_of_64_kib_of_shared_memory(cpu_cache: str) -> None:
    """The shadow covers all of a block's shared memory (with the red zones, past 64 KiB of section)."""
    src = (HEAD + 'extern "C" __global__ void k(int* p) {\n    __shared__ volatile int a[8];\n'
           "    __shared__ volatile int b[16376];\n    a[threadIdx.x] = 1;\n    b[16375] = threadIdx.x;\n"
           "    p[threadIdx.x] = a[threadIdx.x];\n}\n")
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    with pytest.raises(KernelRaceError, match=r"<source>\.hip:8.*'b' element 16375"):
        k(1, 2, np.zeros(2, np.int32))


def test_huge_local_array_is_a_stack_overflow(cpu_cache: str) -> None:
    src = HEAD + 'extern "C" __global__ void k(int* p) {\n    volatile char big[1 << 22];\n    big[p[1]] = 1;\n    p[0] = big[p[2]];\n}\n'
    for check in (True, False):
        k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache, check=check)
        with pytest.raises(KernelStackOverflowError, match="stack overflow"):
            k(1, 1, np.zeros(4, np.int32))


GLOBALS = """#include <hip/hip_runtime.h>
// neighbours: an overflow of one lands in a red zone, not in the other
__constant__ int table[4] = {1, 2, 3, 4};
__device__ int counter;
__device__ inline int twice(int x) { return 2 * x; }
extern "C" __global__ void k(int* p, int i) {
    p[0] = table[i] + twice(counter);
}
"""


@pytest.mark.parametrize("i", [4, 5, -1])
def test_device_array_overflowing_into_a_neighbour_is_out_of_bounds(cpu_cache: str, i: int) -> None:
    k = compile_kernel(GLOBALS, "k", arch="cpu", cache_dir=cpu_cache)
    p = np.zeros(1, np.int32)
    k(1, 1, p, 3)
    assert p[0] == 4
    with pytest.raises(KernelBoundsError, match=rf"<source>\.hip:7, .*read of 4 bytes out of bounds: __device__ "
                                                rf"variable 'table' element {i} \(byte {4 * i}; it has 16 bytes"):
        k(1, 1, p, i)


def test_big_zeroed_globals_stay_out_of_the_module_file(cpu_cache: str) -> None:
    """A red-zoned section has file contents: 32 MiB of zeroed globals are built again in .bss instead."""
    src = (HEAD + '__device__ float big[1 << 23];\nextern "C" __global__ void k(float* p, int i) {\n'
           "    big[i] = 2.0f;\n    p[0] = big[i];\n}\n")
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    assert len(k.binary) < (1 << 20)
    p = np.zeros(1, np.float32)
    k(1, 1, p, (1 << 23) - 1)
    assert p[0] == 2.0


def test_globals_rewrite_keeps_lines_and_leaves_functions_alone() -> None:
    from pytest_gpuenv.rtc._cpu_globals import rewrite_globals

    src = ("#include <x.h>\n/* c */ __device__ int a[2];\nstatic __device__ float b = 1;\n__device__ int f(int x) "
           "{ return x; }\nextern __device__ int e;\n__device__ const int c = 3;\ntemplate <class T> __device__ T g;\n"
           "__device__\nint d;\n")
    out = rewrite_globals(src)
    assert out.count("\n") == src.count("\n")
    assert out.splitlines()[1:3] == ["/* c */ GPUENV_GLOBAL_RZ GPUENV_GLOBAL int a[2];",
                                     "GPUENV_GLOBAL_RZ static GPUENV_GLOBAL float b = 1;"]
    assert out.splitlines()[3:7] == src.splitlines()[3:7]
    assert out.splitlines()[7:] == ["GPUENV_GLOBAL_RZ GPUENV_GLOBAL", "int d;"]


def test_read_and_write_symbols(cpu_cache: str) -> None:
    from pytest_gpuenv.rtc import _cpu
    from pytest_gpuenv.rtc.kernel import get_cache

    src = (HEAD + '__constant__ int table[4] = {1, 2, 3, 4};\n__device__ int counter;\n'
           'extern "C" __global__ void k(int* p) {\n    atomicAdd(&counter, table[threadIdx.x]);\n    p[0] = counter;\n}\n')
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)
    rt = _cpu.runtime(get_cache(cpu_cache))
    mod = k.load()
    assert np.frombuffer(rt.read_symbol(mod, "table"), np.int32).tolist() == [1, 2, 3, 4]
    rt.write_symbol(mod, "table", np.array([10, 20, 30, 40], np.int32).tobytes())
    p = np.zeros(1, np.int32)
    k(1, 4, p)
    assert p[0] == 100 and rt.read_symbol(mod, "counter") == np.int32(100).tobytes()
    with pytest.raises(KeyError, match="has no global 'nothing'"):
        rt.read_symbol(mod, "nothing")
    with pytest.raises(KeyError, match="has no global 'malloc'"):  # libc's, not the module's
        rt.read_symbol(mod, "malloc")
    with pytest.raises(ValueError, match="'counter' has 4 bytes; 8 given"):
        rt.write_symbol(mod, "counter", bytes(8))


def test_buffers_past_the_first_arena_and_aliased_buffers(cpu_cache: str) -> None:
    """The shared arena grows (16 MiB at first); a buffer passed twice is one copy, as on a GPU."""
    src = (HEAD + 'extern "C" __global__ void k(int* out, const int* in, int n) {\n'
           "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i] + 1;\n}\n")
    k = compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache, check=False)
    n = 6 << 20  # 24 MiB in and out
    a = np.arange(n, dtype=np.int32)
    out = np.zeros_like(a)
    k(64, 256, out, a, n)
    assert (out == a + 1).all()
    k(64, 256, a[:1000], a[:1000], 1000)  # in place: the same memory twice
    assert (a[:1000] == np.arange(1000) + 1).all() and a[1000] == 1000


def test_pytest_holds_no_descriptor_per_kernel(cpu_cache: str) -> None:
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    ks = [compile_kernel(HEAD + f'extern "C" __global__ void k(int* p) {{ p[0] = {i}; }}\n', "k", arch="cpu",
                         cache_dir=cpu_cache, check=False) for i in range(4)]
    p = np.zeros(1, np.int32)
    ks[0](1, 1, p)  # the child and the arena exist from here on
    before = fds()
    for i, k in enumerate(ks):
        k(1, 1, p)
        assert p[0] == i
    assert fds() == before


@pytest.mark.parametrize("spelling", [
    '#define ASM __asm__\n#define VOL volatile\n',  # a keyword behind a macro
    '#define CAT(a, b) a##b\n#define ASM CAT(__as, m__)\n#define VOL volatile\n',  # pasted from tokens
])
def test_inline_assembly_behind_a_macro_is_refused(cpu_cache: str, spelling: str) -> None:
    """The text scan sees no ``asm(``; the preprocessed kernel does, at the line that expands to it."""
    src = HEAD + spelling + 'extern "C" __global__ void k(int* p) {\n    ASM VOL("nop");\n    p[0] = 1;\n}\n'
    line = src.count("\n", 0, src.index("ASM VOL")) + 1
    with pytest.raises(KernelCompileError, match=rf"<source>\.hip:{line}: inline assembly \(through a macro or a header\)"):
        compile_kernel(src, "k", arch="cpu", cache_dir=cpu_cache)


def test_a_big_endian_array_is_refused_for_a_float_pointer(cpu_cache: str) -> None:
    import numpy as np

    k = compile_kernel(HEAD + 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n', "k", arch="cpu",
                       cache_dir=cpu_cache)
    with pytest.raises(TypeError, match=r"argument 'p' \(float\* p\) expects float elements in the device's byte order "
                                        r"\(little-endian\), got an array of typestr '>f4': pass arr.astype\('<f4'\)"):
        k(1, 4, np.zeros(4, ">f4"))
    k(1, 4, np.zeros(4, "<f4"))
