"""Published HIP kernels, as written, on the CPU executor at wave64 and wave32, checked and unchecked.

The kernels are in tests/data/published (device code verbatim from ROCm/rocm-examples, ROCm/HIP-Examples
and ROCm/hip-tests; each file's first line names repo, commit and path; README.md there lists what each
one exercises). They are called as their authors wrote them: C++ and template kernels by name expression,
``__constant__``/``__device__`` tables through ``compile_module(...).get_global``, by-value vectors as
tuples. Each is correct on AMD hardware, so checked mode must report nothing; the exceptions below are
code that is not portable (reduction v5 relies on lockstep wavefronts) or has a real bug (prefix_sum
past one block, mini-nbody's last partial block). Inputs and numpy references: tests/_published.py.
"""

from __future__ import annotations

import shutil

import pytest

np = pytest.importorskip("numpy")

from _published import BY_NAME, CASES, PUBLISHED, CpuRun, check_on_cpu  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None,
                                reason="no C++ compiler")


#: the cases whose code depends on the warp size (shuffles, ballots, wave-sized templates, lockstep): the default set
#: runs them at both warp sizes; every other case at wave64, checked, and saxpy and reduction_v5 unchecked too
#: (the other combinations are slow: ``-m "slow or not slow"``)
BY_WARP = {"warp_shuffle", "reduction_v5", "reduction_v7", "reduction_v9", "ballot", "cg_tile_shfl"}
UNCHECKED = {"saxpy", "reduction_v5"}
COMBINATIONS = [(w, c, chk) for w in (64, 32) for c in CASES for chk in (True, False)]


def _fast(warp: int, name: str, check: bool) -> bool:
    return (warp == 64 or name in BY_WARP) and (check or name in UNCHECKED)


@pytest.mark.parametrize(("warp", "case", "check"),
                         [pytest.param(w, c, chk, marks=() if _fast(w, c.name, chk) else pytest.mark.slow)
                          for w, c, chk in COMBINATIONS],
                         ids=[f"wave{w}-{c.name}-{'checked' if chk else 'unchecked'}" for w, c, chk in COMBINATIONS])
def test_published_kernel(case, warp, check, cpu_cache):
    check_on_cpu(case, warp, check, cpu_cache)


def test_every_published_file_names_its_origin():
    import os

    files = sorted(f for f in os.listdir(PUBLISHED) if f.endswith(".hip"))
    assert files == sorted(c.name + ".hip" for c in CASES)
    for f in files:
        with open(os.path.join(PUBLISHED, f), "rb") as fh:
            first = fh.readline().decode()
        assert first.startswith("// origin: ROCm/"), f
        assert "@" in first and ":" in first.split("@", 1)[1], f  # repo@commit:path
        commit = first.split("@", 1)[1].split(":", 1)[0]
        assert len(commit) == 40 and int(commit, 16) >= 0, f


def test_latin1_licence_is_read_as_bytes(cpu_cache):
    """HIP-Examples' Histogram has a Latin-1 licence comment: the source is not UTF-8 and still compiles."""
    import os

    with open(os.path.join(PUBLISHED, "hipex_histogram.hip"), "rb") as fh:
        data = fh.read()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    rtc.compile_kernel(os.path.join(PUBLISHED, "hipex_histogram.hip"), "histogram256", arch="cpu", cache_dir=cpu_cache)


def test_reduction_v5_relies_on_lockstep(warp, cpu_cache):
    """rocm-examples' reduction v5 finishes in shared memory with no barrier, relying on a wavefront running
    in lockstep (AMD hardware does; NVIDIA since Volta does not): checked mode says so."""
    case = BY_NAME["reduction_v5"]
    with pytest.raises(rtc.KernelWarpSyncError) as info:
        case.body(CpuRun(case, warp, True, cpu_cache, lockstep=False))
    assert isinstance(info.value, rtc.KernelRaceError)
    assert "lockstep" in str(info.value).lower()


def test_prefix_sum_past_one_block_is_out_of_bounds(cpu_cache):
    """A real bug in rocm-examples' prefix_sum: block_prefix_sum builds its tree over the whole ``size``,
    not the block's 2 x 128 items, so above the default size 256 it indexes its shared array out of bounds
    (the example's own check passes on a GPU all the same)."""
    case = BY_NAME["prefix_sum"]
    run = CpuRun(case, 64, True, cpu_cache)
    data = np.ones(512, np.float32)
    with pytest.raises(rtc.KernelBoundsError):
        run.launch(run.kernel("block_prefix_sum"), 2, 128, data, 512, 1, shared_mem=2 * 128 * 4)


def test_nbody_tail_block_is_a_bug(cpu_cache):
    """A real bug in HIP-Examples' mini-nbody: bodyForce puts its barriers inside ``if (i < n)`` and reads
    whole tiles of ``p``, so with ``n`` not a multiple of 256 (the sample's default is 30,000) it reads past
    the bodies and the last block's threads skip barriers that its others wait at."""
    case = BY_NAME["nbody_block"]
    run = CpuRun(case, 64, True, cpu_cache)
    n = 300
    p, v = np.zeros(n * 4, np.float32), np.zeros(n * 4, np.float32)
    with pytest.raises((rtc.KernelBoundsError, rtc.KernelBarrierError)):
        run.launch(run.kernel("bodyForce"), 2, 256, p, v, 0.01, n)
