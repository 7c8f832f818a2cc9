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
HOST_HEADERS = "host headers: the fixture's hiprtc compile check fails in /usr/include (stdint-intn.h, type_traits) [1]"
HOST_API = ("host code: the CPU executor build does not declare the HIP runtime API that main and its helpers use "
            "(hipMalloc, hipMemcpy, hipError_t, hipDeviceGetAttribute, <<<>>> in host code)")
CHECK = ("unchecked", "hip_kernel refuses check= [12]")
INCLUDED = "kernels in an #included file are not found [2]"
BARRIER = "barriers after exited threads: KernelBarrierError in every mode [10]"

#: what every file meets today, in the order a run meets it
EVERY_FILE: tuple[Any, ...] = (HOST_HEADERS, HOST_API, CHECK)

#: file (benchmark) -> what it meets beyond EVERY_FILE: a cause in every mode, or (modes, cause) for some (modes
#: are words of "checked unchecked wave64 wave32"; a test's mode matches when it has each word)
XFAIL: dict[str, tuple[Any, ...]] = {
    "adam": (),
    "atomicAggregate": (),
    "atomicCAS": (INCLUDED,),
    "atomicCost": (),
    "atomicIntrinsics": (INCLUDED,),
    "bilateral": (),
    "bitonic-sort": (),
    "bitpermute": (INCLUDED, "missing device API: __brevll [4]"),
    "bscan": (("wave64", "real bug of the HIP port at wave64: warp_scan indexes its __shared__ int sdata[64] (two per "
                         "32-lane warp) at tid + 64 with 64-wide warps, past its end"),
              ("wave32 checked", "real (benign) bug: the scan of the warp sums reads sdata[8..31], which no thread "
                                 "of an 8-warp block writes (KernelUninitializedError; no output depends on it)")),
    "bsearch": (BARRIER,),
    "channelShuffle": ("missing device API: __ldg [4]",),
    "clock": ("missing device API: clock() [4]",),
    "complex": (INCLUDED,),
    "concat": (),
    "convolution1D": ("get_global('mask<float>') of a __constant__ variable template gives raw bytes (uint8, 40), "
                      "not float[10] [5]",),
    "cross": (),
    "entropy": (),
    "extrema": (INCLUDED,),
    "f16max": ("missing device API: __hsub2, __byte_perm [4]",),
    "filter": (),
    "flip": (),
    "gelu": ("missing device API: __half22float2 (called by reference.h's host function too), __float22half2_rn [4]",),
    "glu": (),
    "heat2d": (),
    "hellinger": (),
    "interleave": (),
    "keogh": (),
    "langevin": (),
    "lif": (),
    "lombscargle": (),
    "mask": (),
    "matern": (BARRIER,),
    "matrix-rotate": (),
    "matrixT": (),
    "maxpool3d": (),
    "mcpr": (INCLUDED,),
    "michalewicz": (),
    "nlll": (),
    "overlay": (),
    "pitch": ("hipPitchedPtr, the by-value parameter type of parallelPitched3DAccess (hip_runtime_api.h), is not "
              "declared for the CPU executor",),
    "pnpoly": (INCLUDED,),
    "pointwise": (),
    "pool": (),
    "popcount": (),
    "randomAccess": (),
    "resize": (),
    "reverse": (),
    "rfs": (),
    "rmsnorm": (),
    "rodrigues": (),
    "romberg": ("names the executor uses itself: the file's #define A 0 (and B 15) expand inside the executor's "
                "generated lowering template (<gpuenv>:3, template parameter A) [7]",),
    "scan": ("static __shared__ summed over every kernel in the file: main instantiates scan and scan_bcao for "
             "char, short, int, long at N = 128 ... 2048 [3] (expected once the host code builds)",),
    "scatterAdd": (INCLUDED,),
    "shuffle": (),
    "softmax": (),
    "sosfil": (),
    "stddev": (),
    "threadfence": (),
    "vanGenuchten": (),
    "vote": (INCLUDED,),
}


def _causes(name: str, warp: int, check: bool) -> list[str]:
    mode = {f"wave{warp}", "checked" if check else "unchecked"}
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
