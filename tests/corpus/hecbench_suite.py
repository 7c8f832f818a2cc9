"""HeCBench's HIP benchmarks through the ``hip_kernel`` fixture, written as a user of the plugin writes them.

tests/corpus/test_hecbench_fixture.py runs this module with pytest (pytester, in a subprocess, CPU backend):
each benchmark's ``main.cu``, kept whole in tests/data/published/hecbench, is handed to ``hip_kernel`` as
hipcc takes it, at both widths (the fixture's wave64/wave32), checked and unchecked (``check=False``),
and its outputs compared with numpy (inputs, launches and references: tests/_corpus.py).

``EVERY_FILE`` and ``XFAIL`` (one line per file) say why each test fails today; a test whose mode has a cause is a
strict xfail, so a fix that makes it pass shows as XPASS(strict) and its cause is lifted. ``lockstep`` (from
tests/_corpus.py) is passed where a kernel relies on a wavefront running in lockstep, as on AMD hardware.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _corpus import CASES

# Why files fail today, each cause once (issue list items in brackets; tests/data/published/README.md)
HIPCC_52 = ("hipcc", "the fixture's compile check for gfx90a uses hipcc here (hiprtc cannot take host headers), and "
                     "ROCm 5.2's hipcc rejects the file")

#: what every file meets today, in the order a run meets it
EVERY_FILE: tuple[Any, ...] = ()

#: file (benchmark) -> what it meets beyond EVERY_FILE: a cause in every mode, or (modes, cause) for some (modes
#: are words of "checked unchecked wave64 wave32 hipcc"; a test's mode matches when it has each word; "hipcc": a
#: runner where the fixture's compile check has hipcc)
XFAIL: dict[str, tuple[Any, ...]] = {
    "adam": (),
    "atomicAggregate": (),
    "atomicCAS": (),
    "atomicCost": (),
    "atomicIntrinsics": (),
    "bilateral": (),
    "bitonic-sort": (),
    "bitpermute": (),
    "bscan": (("wave64", "real bug of the HIP port at wave64: warp_scan indexes its __shared__ int sdata[64] (two per "
                         "32-lane warp) at tid + 64 with 64-wide warps, past its end (checked: KernelBoundsError on "
                         "sdata element 64, thread 0; unchecked: wrong sums)"),
              ("wave32 checked", "real (benign) bug: the scan of the warp sums reads sdata[8..31], which no thread "
                                 "of an 8-warp block writes (KernelUninitializedError; no output depends on it)")),
    "bsearch": (),
    "channelShuffle": (),
    "clock": (),
    "complex": (),
    "concat": (),
    "convolution1D": (),
    "cross": (),
    "entropy": (),
    "extrema": (),
    "f16max": (),
    "filter": (),
    "flip": (),
    "gelu": (),
    "glu": (),
    "heat2d": (),
    "hellinger": (),
    "interleave": (),
    "keogh": (),
    "langevin": (),
    "lif": (),
    "lombscargle": (),
    "mask": (),
    "matern": (),
    "matrix-rotate": (),
    "matrixT": (),
    "maxpool3d": (),
    "mcpr": (),
    "michalewicz": (),
    "nlll": ((HIPCC_52[0], HIPCC_52[1] + ": nlll-cuda/reference.h:21 compares a const __half with a __half, for "
                                       "which its amd_hip_fp16.h has no operator"),),
    "overlay": (),
    "pitch": (),
    "pnpoly": (),
    "pointwise": (),
    "pool": (),
    "popcount": (),
    "randomAccess": (),
    "resize": (),
    "reverse": (),
    "rfs": (),
    "rmsnorm": (),
    "rodrigues": (),
    "romberg": (),
    "scan": (),
    "scatterAdd": (),
    "shuffle": (),
    "softmax": ((HIPCC_52[0], HIPCC_52[1] + ": its cooperative_groups::thread_block_tile has no meta_group_size "
                                          "(softMax2)"),),
    "sosfil": (),
    "stddev": (),
    "threadfence": (),
    "vanGenuchten": (),
    "vote": (),
}


def _hipcc() -> bool:
    from pytest_gpuenv.rtc import compilers

    return compilers.get("hipcc").available()


def _causes(name: str, warp: int, check: bool) -> list[str]:
    mode = {f"wave{warp}", "checked" if check else "unchecked"} | ({"hipcc"} if _hipcc() else set())
    out = []
    for cause in EVERY_FILE + XFAIL[name]:
        modes, text = cause if isinstance(cause, tuple) else ("", cause)
        if set(modes.split()) <= mode:
            out.append(text)
    return out


class FixtureRun:
    """One benchmark through ``hip_kernel``: the ``rt`` that tests/_corpus.py's bodies launch through."""

    def __init__(self, hip_kernel: Any, case: Any, warp: int, check: bool) -> None:
        self.hip_kernel, self.case, self.warp, self.check = hip_kernel, case, warp, check
        self.module: Any = None

    def _options(self) -> dict[str, Any]:
        unchecked = {} if self.check else {"check": False}  # checked is the fixture's default
        return dict(include_dirs=list(self.case.include_dirs), options=list(self.case.options), **self.case.extra,
                    **unchecked)

    def kernel(self, name: str) -> Any:
        if self.case.module:
            if self.module is None:
                self.module = self.hip_kernel(self.case.path, names=self.case.names(self.warp), **self._options())
            return self.module.kernel(name)
        return self.hip_kernel(self.case.path, name, **self._options())

    def set_global(self, name: str, values: Any) -> None:
        self.kernel(self.case.names(self.warp)[0])
        view = self.module.get_global(name)
        view[...] = np.asarray(values).reshape(view.shape)

    def launch(self, kernel: Any, grid: Any, block: Any, *args: Any, shared_mem: int = 0, cooperative: bool = False) -> None:
        kernel(grid, block, *args, shared_mem=shared_mem, cooperative=cooperative)


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hecbench(hip_kernel, request, case, check):
    warp = request.node.callspec.params["hip_kernel"]  # the fixture's width: wave64, wave32
    causes = _causes(case.name, warp, check)
    if causes:
        request.applymarker(pytest.mark.xfail(reason="; ".join(causes), strict=True))
    for label, actual, expected in case.body(FixtureRun(hip_kernel, case, warp, check)):
        np.testing.assert_allclose(actual, expected, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name} at wave{warp}: {label}")
