"""The CPU executor compiles what hipcc compiles for AMD (tests/data/cpu_kernels/headers.hip), at
warpSize 64 and 32: hipcc's macros, the executor's own HIP headers (never the system ROCm's, which
``#error`` under g++), vector types with HIP's layout and operators, bfloat16, cooperative groups,
``__syncthreads_count/_and/_or`` and builtins that are not macros."""

from __future__ import annotations

import os
import shutil

import pytest

np = pytest.importorskip("numpy")

from _checkout import CPU_KERNELS  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")
SOURCE = os.path.join(CPU_KERNELS, "headers.hip")


def test_hipcc_macros(cpu_kernel, warp):
    out = np.zeros(3, np.int32)
    cpu_kernel("macros")(1, 1, out)
    assert out.tolist() == [warp, warp, 1]


def test_vector_types(cpu_kernel):
    f, i = np.zeros(12, np.float32), np.zeros(14, np.int32)
    cpu_kernel("vector_types")(1, 1, f, i)
    assert f.tolist() == [2.5, 4.5, 6.5, 8.5, 5, 13, -5, 0, 9, 8, 7, 6]
    assert i.tolist() == [4, 2, 17, 4, 13, 12, 4, 16, 16, 32, 32, 3, 4, 1]


def test_builtins_are_objects(cpu_kernel):
    out = np.zeros(4, np.int32)
    cpu_kernel("builtins_are_objects")(3, 4, out, 7)  # every block writes the same slots: the last block's values stay
    assert out.tolist() == [7 + 5 + 2 + 300] * 4


@pytest.mark.parametrize("pred, want", [([1] * 64, [64, 1, 1]), ([0] * 64, [0, 0, 0]),
                                        ([int(t % 5 == 0) for t in range(64)], [13, 0, 1])])
def test_syncthreads_count_and_or(cpu_kernel, pred, want):
    out = np.zeros(3, np.int32)
    cpu_kernel("sync_reductions")(1, 64, out, np.array(pred, np.int32))
    assert out.tolist() == want


def _bf16(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint32).astype(np.uint64)
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def test_bfloat16_conversions(cpu_kernel):
    x = np.concatenate([np.random.randn(1000) * 1e3, [0.0, -0.0, 1.0, 1.00390625, 3.0e38, -np.inf]]).astype(np.float32)
    out = np.zeros(2 * len(x), np.float32)
    cpu_kernel("bf16_round_trip")((len(x) + 255) // 256, 256, out, x, len(x))
    np.testing.assert_array_equal(out[:len(x)], _bf16(x))
    with np.errstate(over="ignore"):  # 3e38 doubles to inf, in bfloat16 as in float
        np.testing.assert_array_equal(out[len(x):], _bf16(x) * 2)


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
def test_cooperative_groups_block_sum(cpu_kernel, check):
    x = np.random.rand(4 * 256).astype(np.float32)
    out = np.zeros(4, np.float32)
    cpu_kernel("cg_block_sum", check=check)(4, 256, out, x)
    np.testing.assert_allclose(out, x.reshape(4, 256).sum(axis=1), rtol=1e-5)


def test_cooperative_groups_tile_votes_and_shuffles(cpu_kernel):
    ballots, votes, misc = np.zeros(8, np.uint64), np.zeros(16, np.int32), np.zeros(129, np.int32)
    cpu_kernel("cg_tile_votes")(1, 64, ballots, votes, misc)
    assert ballots.tolist() == [sum(1 << i for i in range(8) if (8 * t + i) % 3 == 0) for t in range(8)]
    assert votes.tolist() == [v for t in range(8) for v in (int(t == 0), int(t < 7))]
    assert misc[:128].tolist() == [v for r in range(64) for v in (r ^ 1, r // 8 * 8 + 7)]
    assert misc[128] == 4


def test_cooperative_groups_coalesced_threads(cpu_kernel, warp):
    out = np.full(64, -1, np.int32)
    cpu_kernel("cg_coalesced")(1, 64, out)
    size = warp // 2
    want = [-1 if r % 2 == 0 else size * 1000 + ((r % warp) // 2) * 10 + int((r % warp) // 2 > 0) for r in range(64)]
    assert out.tolist() == want


def test_this_grid_compiles_and_grid_sync_needs_a_cooperative_launch(cpu_kernel):
    out = np.zeros(64, np.int32)
    cpu_kernel("cg_grid")(2, 32, out)
    assert out.tolist() == [64] * 64
    with pytest.raises(rtc.KernelBarrierError, match=r"headers\.hip:\d+ needs a cooperative launch"):
        cpu_kernel("cg_grid_sync")(2, 32, out)


def test_hip_complex(cpu_kernel):
    out = np.zeros(8, np.float32)
    cpu_kernel("complex_ops")(1, 1, out)
    np.testing.assert_allclose(out, [5, 5, 1, 2, 4, 3, 5, -3], rtol=1e-6)


def test_include_options_reach_the_cpu_build_in_every_spelling(tmp_path):
    """``-I DIR`` (two arguments) broke the CPU build with a misleading "No such file", and ``-include`` and
    ``-isystem`` were dropped in silence: each spelling GPU compilers take is passed on."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    for folder, header in (("a", "va.h"), ("b", "vb.h"), ("c", "vc.h")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / header).write_text(f"#define {header[:2].upper()} {len(folder) + ord(folder) - 96}\n")
    (tmp_path / "pre.h").write_text("#define PRE 4\n")
    (tmp_path / "k.hip").write_text('#include <hip/hip_runtime.h>\n#include <va.h>\n#include <vb.h>\n#include <vc.h>\n'
                                    'extern "C" __global__ void k(int* o) { o[0] = VA * 1000 + VB * 100 + VC * 10 + PRE; }\n')
    options = ["-I", str(tmp_path / "a"), "-isystem", str(tmp_path / "b"), f"--include-path={tmp_path / 'c'}",
               "-include", str(tmp_path / "pre.h")]
    k = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=str(tmp_path / "cache"), options=options)
    out = np.zeros(1, np.int32)
    k(1, 1, out)
    assert out[0] == 2 * 1000 + 3 * 100 + 4 * 10 + 4


@pytest.mark.parametrize("option", ["-fopenmp", "-o", "--emit-llvm"])
def test_an_option_the_cpu_build_cannot_take_is_refused_by_name(tmp_path, option):
    from pytest_gpuenv.rtc import KernelCompileError, compile_kernel

    (tmp_path / "k.hip").write_text('#include <hip/hip_runtime.h>\nextern "C" __global__ void k(int* o) { o[0] = 1; }\n')
    with pytest.raises(KernelCompileError, match=rf"option '{option}' is not one the CPU executor's build takes"):
        compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=str(tmp_path / "cache"), options=[option])


def test_gpu_code_generation_options_are_left_out_of_the_cpu_build(tmp_path):
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    (tmp_path / "k.hip").write_text('#include <hip/hip_runtime.h>\nextern "C" __global__ void k(int* o) { o[0] = 7; }\n')
    k = compile_kernel(str(tmp_path / "k.hip"), "k", arch="cpu", cache_dir=str(tmp_path / "cache"),
                       options=["-lineinfo", "--offload-arch=gfx90a", "-munsafe-fp-atomics", "--use_fast_math"])
    out = np.zeros(1, np.int32)
    k(1, 1, out)
    assert out[0] == 7


def test_an_include_option_naming_a_standard_header_is_looked_up_on_the_path(tmp_path):
    """``-include cstdint`` names no file here: it is passed as given (g++ searches its include path), not made
    an absolute path in the working folder."""
    import numpy as np

    from pytest_gpuenv.rtc import compile_kernel

    src = '#include <hip/hip_runtime.h>\nextern "C" __global__ void k(unsigned* o) { o[0] = (uint32_t)7; }\n'
    k = compile_kernel(src, "k", arch="cpu", cache_dir=str(tmp_path), options=["-include", "cstdint"])
    out = np.zeros(1, np.uint32)
    k(1, 1, out)
    assert out[0] == 7
