"""HIP as projects write it, through the ``hip_kernel`` fixture on a runner without a GPU (issue 38): host headers
in a kernel file, kernels defined in an included header, static ``__shared__`` per kernel, ``get_global`` by a
typedef spelling, kernel and function names the executor used itself, and every option of ``compile_kernel``
that makes sense in a test. Each test is written as a user writes it (pytester, in a subprocess) and runs on the
CPU executor (``--gpuenv-kernels=run``); the compile check for a GPU arch runs wherever hiprtc or NVRTC is."""

from __future__ import annotations

import os
import shutil
import textwrap

import pytest
from _checkout import CPU_KERNELS, REPO, plugin_installed

from pytest_gpuenv import requires_cuda

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no C++ compiler"),
]
RUN = ("--gpuenv-backend=cpu", "--gpuenv-kernels=run", "-p", "no:cacheprovider")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("front-door-cache") / "cache")


@pytest.fixture
def project(pytester: pytest.Pytester, shared_cache: str, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytest.importorskip("numpy")
    (pytester.path / "kernels").mkdir()
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("GPUENV_CACHE_DIR", shared_cache)
    if not plugin_installed():  # a checkout on sys.path without `pip install -e .`
        monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        pytester.makeconftest('pytest_plugins = ["pytest_gpuenv.plugin"]\n')
    return pytester


def _kernel(project: pytest.Pytester, name: str, text: str) -> None:
    (project.path / "kernels" / name).write_text(textwrap.dedent(text))


# ------------------------------------------------------------------ item 12: the fixture's options
RACY = """\
    #include <hip/hip_runtime.h>
    extern "C" __global__ void racy(int* out) {
        __shared__ int s[64];
        s[threadIdx.x] = 1;
        out[threadIdx.x] = s[(threadIdx.x + 1) % 64];  // another thread's write, no barrier between: a race
        out[threadIdx.x] = 1;
    }
"""


def test_fixture_takes_check_lockstep_warp_size_and_the_compile_options(project):
    """``check=False`` runs unchecked (the race is not looked for), ``warp_size=64`` runs at that width alone
    (the wave32 run skips), and ``lockstep``, ``use_cache``, ``dialect`` are accepted as ``compile_kernel``'s."""
    _kernel(project, "racy.hip", RACY)
    project.makepyfile(test_racy="""
        import numpy as np
        import pytest
        from pytest_gpuenv.rtc import KernelRaceError

        def test_unchecked(hip_kernel):
            k = hip_kernel("racy.hip", "racy", check=False, lockstep=False, warp_size=64, use_cache=True,
                           dialect="hip")
            out = np.zeros(64, np.int32)
            k(1, 64, out)
            assert (out == 1).all()

        def test_checked_by_default(hip_kernel):
            with pytest.raises(KernelRaceError):
                hip_kernel("racy.hip", "racy")(1, 64, np.zeros(64, np.int32))
    """)
    result = project.runpytest_subprocess(*RUN, "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * hip_kernel(warp_size=64): not run at warp size 32"])


def test_fixture_options_are_declared_once_with_a_doc_each():
    """The options ``hip_kernel`` takes are one table (the docs reference reads it), each with a one-line doc,
    and every one of them is a keyword of ``compile_kernel``."""
    import inspect

    from pytest_gpuenv.fixtures.kernel_options import OPTIONS
    from pytest_gpuenv.rtc import compile_kernel

    keywords = set(inspect.signature(compile_kernel).parameters)
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    assert {"check", "lockstep", "dialect", "warp_size", "sync", "names"} <= set(names)
    assert set(names) - {"names"} <= keywords
    assert all(o.doc and "\n" not in o.doc for o in OPTIONS)


# ------------------------------------------------------------------ item 7: names the executor used itself
NAMES = """\
    #include <hip/hip_runtime.h>
    __device__ float gpuenv_state(float x) { return 2 * x; }
    __device__ int gpuenv(int x) { return x; }
    __device__ float gpuenv_shfl(float x) { return x; }
    extern "C" __global__ void a(float* o) { o[threadIdx.x] = gpuenv_state(1.0f); }
    __global__ void v(float* o) { o[threadIdx.x] = gpuenv(3) + gpuenv_shfl(0.0f); }
"""


def test_kernels_named_a_and_v_and_functions_named_gpuenv(project):
    _kernel(project, "names.hip", NAMES)
    project.makepyfile(test_names="""
        import numpy as np

        def test_a(hip_kernel):
            out = np.zeros(64, np.float32)
            hip_kernel("names.hip", "a")(1, 64, out)
            assert (out == 2).all()

        def test_module(hip_kernel):
            m = hip_kernel("names.hip", names=["a", "v"])
            out = np.zeros(64, np.float32)
            m.kernel("v")(1, 64, out)
            assert (out == 3).all()
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=4)


# ------------------------------------------------------------------ a whole file, host main included
def test_a_whole_file_with_its_host_code_runs_its_kernels(project):
    """A kernel file as hipcc takes it (tests/data/cpu_kernels/host_code.hip: host main with hipMalloc, hipMemcpy,
    hipEvent timing, a HIP_CHECK macro, ``<<<>>>`` and hipLaunchKernelGGL launches): its kernels run, checked
    and unchecked."""
    with open(os.path.join(CPU_KERNELS, "host_code.hip")) as fh:
        (project.path / "kernels" / "host_code.hip").write_text(fh.read())
    project.makepyfile(test_whole="""
        import numpy as np
        import pytest

        @pytest.mark.parametrize("check", [True, False])
        def test_fill(hip_kernel, check):
            out = np.zeros(300, np.int32)
            hip_kernel("host_code.hip", "fill", check=check)(2, 256, out, 300)
            assert out.tolist() == list(range(300))

        def test_template(hip_kernel):
            m = hip_kernel("host_code.hip", names=["scale<float, 3>"])
            x = np.arange(300, dtype=np.float32)
            y = np.zeros(300, np.float32)
            m.kernel("scale<float, 3>")(2, 256, y, x, np.float32(2), 300)
            assert (y == 2 * x + 3).all()
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=6)


# ------------------------------------------------------------------ item 5: get_global by a typedef spelling
MASK = """\
    #include <stdint.h>
    #include <hip/hip_runtime.h>
    template <class T> __device__ T mask[4];
    template <class T> __global__ void apply(T* out) { out[threadIdx.x] = mask<T>[threadIdx.x]; }
"""


def test_get_global_takes_the_typedef_spelling_kernel_names_take(project):
    _kernel(project, "mask.hip", MASK)
    project.makepyfile(test_mask="""
        import numpy as np
        import pytest

        def test_mask(hip_kernel):
            m = hip_kernel("mask.hip", names=["apply<int16_t>"])
            mask = m.get_global("mask<int16_t>", dtype=np.int16)
            mask[:] = [1, 2, 3, 4]
            assert m.get_global("mask< std::int16_t >", dtype=np.int16) is not None
            assert m.get_global("mask<short>", dtype=np.int16).tolist() == [1, 2, 3, 4]  # the same memory
            out = np.zeros(4, np.int16)
            m.kernel("apply<int16_t>")(1, 4, out)
            assert out.tolist() == [1, 2, 3, 4]
            with pytest.raises(KeyError) as info:
                m.get_global("nothing")
            assert "variables there: mask<short>)" in str(info.value)
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2)


# ------------------------------------------------------------------ item 1: host headers in a kernel file
#: a kernel file as benchmark suites write one (HeCBench's ``main.cu``): host headers, a host helper, the kernel
HOST_HEADERS = """\
    #include <stdio.h>
    #include <stdlib.h>
    #include <stdint.h>
    #include <hip/hip_runtime.h>
    #include <chrono>
    #include <vector>
    #include <iostream>

    double elapsed(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
        std::vector<double> s{std::chrono::duration<double>(b - a).count()};
        std::cout << s[0] << std::endl;
        return s[0];
    }

    __global__ void fill(int32_t* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = i;
    }
"""
FILL_TEST = """
    import numpy as np

    def test_fill(hip_kernel):
        out = np.zeros(300, np.int32)
        hip_kernel("{file}", "fill")(2, 256, out, 300)
        assert out.tolist() == list(range(300))
"""


def _hipcc_here() -> None:
    from pytest_gpuenv.rtc import compilers

    if not compilers.get("hiprtc").available() or not compilers.get("hipcc").available():
        pytest.skip("requires hiprtc and hipcc (ROCm)")


def test_host_headers_are_checked_with_hipcc_where_hiprtc_cannot_take_them(project):
    """hiprtc fails inside ``stdint-intn.h`` on such a file; hipcc builds it, so the test runs (both widths) and
    the compile-only run builds it for gfx90a; ``std::vector`` used in device code still fails, with hipcc's log."""
    _hipcc_here()
    _kernel(project, "bench.hip", HOST_HEADERS)
    _kernel(project, "device_vector.hip", HOST_HEADERS.replace("if (i < n) out[i] = i;",
                                                               "std::vector<int> v(1); if (i < n) out[i] = v[0];"))
    project.makepyfile(test_bench=FILL_TEST.format(file="bench.hip"),
                       test_bad=FILL_TEST.format(file="device_vector.hip"))
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*hip_kernel: compile check for gfx90a*device_vector.hip:*(compiling kernel 'fill' "
                                 "for gfx90a with hipcc)*"])
    assert "stdint-intn.h" not in result.stdout.str()
    result = project.runpytest_subprocess("--gpuenv-backend=cpu", "--gpuenv-kernels=compile", "-rs",
                                          "--gpuenv-compile-archs=gfx90a", "test_bench.py")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED * compiled for gfx90a; no GPU to launch on"])


def test_host_headers_without_hipcc_are_a_note_not_a_failure(project):
    """Where hipcc is missing, the file is not compile-checked for the GPU: a warning says so, the test runs."""
    _hipcc_here()
    _kernel(project, "bench.hip", HOST_HEADERS)
    project.makeconftest("""
        from pytest_gpuenv.rtc import compilers

        compilers.get("hipcc").available = lambda: False  # a ROCm install with hiprtc and no hipcc
    """ + ("" if plugin_installed() else 'pytest_plugins = ["pytest_gpuenv.plugin"]\n'))
    project.makepyfile(test_bench=FILL_TEST.format(file="bench.hip"))
    result = project.runpytest_subprocess(*RUN, "-W", "default")
    result.assert_outcomes(passed=2, warnings=2)
    result.stdout.fnmatch_lines(["*UserWarning: hip_kernel: gfx90a (hiprtc cannot take the host header "
                                 "*stdint-intn.h, and hipcc is not installed or does not know gfx90a; not "
                                 "compile-checked)"])


# ------------------------------------------------------------------ item 2: kernels in an included file
MAIN = """\
    #include <hip/hip_runtime.h>
    #include "kernels.h"
"""
KERNELS_H = """\
    extern "C" __global__ void fill(int* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = i;
    }
"""


def test_kernels_defined_in_an_included_header_are_found(project):
    _kernel(project, "main.hip", MAIN)
    _kernel(project, "kernels.h", KERNELS_H)
    project.makepyfile(test_main=FILL_TEST.format(file="main.hip"))
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2)


#: a kernel in a header of another folder, found through the include path (HeCBench's ``-I../extrema-cuda``)
SHARED_H = """\
    template <int N> __global__ void rotate(int* out) {
        __shared__ int s[N];
        s[threadIdx.x] = threadIdx.x;
        __syncthreads();
        out[threadIdx.x] = s[(threadIdx.x + 1) % N];
    }
"""


def test_kernels_in_a_header_found_through_include_dirs_or_I_are_found(project):
    """The header is in neither the kernel file's folder nor the working directory: ``include_dirs=`` or an
    ``-I`` option finds it, for the kernel's lookup, its parameters and its ``__shared__`` memory alike."""
    _kernel(project, "main.hip", MAIN)
    (project.path / "fill-cuda").mkdir()
    (project.path / "fill-cuda" / "kernels.h").write_text(textwrap.dedent(KERNELS_H) + textwrap.dedent(SHARED_H))
    project.makepyfile(test_main="""
        import numpy as np
        import pytest

        @pytest.mark.parametrize("how", [dict(include_dirs=["fill-cuda"]), dict(options=["-Ifill-cuda"])])
        def test_fill(hip_kernel, how):
            out = np.zeros(300, np.int32)
            hip_kernel("main.hip", "fill", **how)(2, 256, out, 300)
            assert out.tolist() == list(range(300))
            rot = np.zeros(64, np.int32)
            hip_kernel("main.hip", "rotate<64>", **how)(1, 64, rot)
            assert rot.tolist() == [(i + 1) % 64 for i in range(64)]
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=4)


def test_an_extern_shared_array_in_an_included_header_is_dynamic_shared_memory(project):
    """The CPU build rewrites the headers it reaches as it rewrites the kernel file (HeCBench bitpermute's
    kernels.h: ``extern __shared__ fr_t exchange[]``); a header that one includes beside it is still found."""
    _kernel(project, "main.hip", MAIN)
    (project.path / "rev-cuda").mkdir()
    (project.path / "rev-cuda" / "kernels.h").write_text(textwrap.dedent("""\
        #include "kind.h"
        extern "C" __global__ void fill(kind* out, int n) {
            extern __shared__ kind buf[];
            buf[threadIdx.x] = threadIdx.x;
            __syncthreads();
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = buf[blockDim.x - 1 - threadIdx.x];
        }
    """))
    (project.path / "rev-cuda" / "kind.h").write_text("typedef int kind;\n")
    project.makepyfile(test_main="""
        import numpy as np

        def test_fill(hip_kernel):
            out = np.zeros(256, np.int32)
            hip_kernel("main.hip", "fill", include_dirs=["rev-cuda"])(1, 256, out, 256, shared_mem=1024)
            assert out.tolist() == list(range(255, -1, -1))
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=2)


# ------------------------------------------------------------------ item 3: static __shared__ per kernel
#: five kernels of 16 KiB each: 80 KiB in the file, as HeCBench scan's; each fits alone
SCAN = """\
    #include <hip/hip_runtime.h>
    template <class T, int N> __global__ void scan(T* out) {
        __shared__ T temp[N];
        temp[threadIdx.x] = 1;
        __syncthreads();
        out[threadIdx.x] = temp[(threadIdx.x + 1) % blockDim.x];
    }
    template __global__ void scan<float, 4096>(float*);
    template __global__ void scan<int, 4096>(int*);
    template __global__ void scan<double, 2048>(double*);
    template __global__ void scan<long, 2048>(long*);
    extern "C" __global__ void ones(float* out) {
        __shared__ float s[4096];
        s[threadIdx.x] = 1;
        __syncthreads();
        out[threadIdx.x] = s[threadIdx.x];
    }
"""
#: a kernel of 16 KiB calling a helper of 40 KiB that uses a 16 KiB namespace-scope array: 72 KiB, too much
OVER = """\
    #include <hip/hip_runtime.h>
    __shared__ float table[4096];
    __device__ float stage(float x) {
        __shared__ float h[10240];
        h[threadIdx.x] = x;
        table[threadIdx.x] = x;
        __syncthreads();
        return h[threadIdx.x] + table[0];
    }
    extern "C" __global__ void over(float* out) {
        __shared__ float mine[4096];
        mine[threadIdx.x] = 0;
        out[threadIdx.x] = stage(1.0f) + mine[threadIdx.x];
    }
"""


def test_static_shared_memory_is_counted_per_kernel(project):
    _kernel(project, "scan.hip", SCAN)
    project.makepyfile(test_scan="""
        import numpy as np
        import pytest

        @pytest.mark.parametrize("name, dtype", [("scan<float, 4096>", np.float32), ("scan<long, 2048>", np.int64),
                                                 ("ones", np.float32)])
        def test_fits(hip_kernel, name, dtype):
            out = np.zeros(64, dtype)
            hip_kernel("scan.hip", name)(1, 64, out)
            assert (out == 1).all()
    """)
    result = project.runpytest_subprocess(*RUN)
    result.assert_outcomes(passed=6)


def test_a_kernel_over_the_limit_with_what_it_calls_is_named(tmp_path):
    """What a kernel calls counts (a GPU compiler refuses this file too: the fixture's check fails it first)."""
    from pytest_gpuenv.rtc import KernelCompileError, compile_kernel

    (tmp_path / "over.hip").write_text(textwrap.dedent(OVER))
    with pytest.raises(KernelCompileError, match=r"kernel over: 73728 bytes of static __shared__ memory \('stage"
                       r"\(float\)::h' \(40960 bytes\), 'over::mine' \(16384 bytes\), 'table' \(16384 bytes\)\) "
                       r"exceed the 65536-byte \(64 KiB\) limit of a block"):
        compile_kernel(str(tmp_path / "over.hip"), "over", arch="cpu", cache_dir=str(tmp_path / "cache"))


# ------------------------------------------------------------------ the same on an NVIDIA GPU (scripts/gpu-check.sh)
GPU_TEST = """
    import torch

    def test_fill(hip_kernel, torch_device):
        out = torch.zeros(300, dtype=torch.int32, device=torch_device)
        hip_kernel("bench.hip", "fill")(2, 256, out, 300)
        assert out.tolist() == list(range(300))

    def test_mask(hip_kernel, torch_device):
        m = hip_kernel("mask.hip", names=["apply<int16_t>"])
        m.get_global("mask<int16_t>", dtype=torch.int16).copy_(torch.tensor([1, 2, 3, 4], dtype=torch.int16))
        out = torch.zeros(4, dtype=torch.int16, device=torch_device)
        m.kernel("apply<int16_t>")(1, 4, out)
        assert out.tolist() == [1, 2, 3, 4]
"""


@requires_cuda
def test_host_headers_and_typedef_globals_on_the_gpu(project, monkeypatch):
    """NVRTC cannot take the host headers: nvcc builds the file and it runs; ``get_global`` by the typedef."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    _kernel(project, "bench.hip", HOST_HEADERS)
    _kernel(project, "mask.hip", MASK)
    project.makepyfile(test_gpu=GPU_TEST)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-rfEs")
    result.assert_outcomes(passed=2)
