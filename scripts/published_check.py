"""The published kernels of tests/data/published on the GPU against the CPU executor, one line per kernel.

    python3 scripts/published_check.py [case ...]

HeCBench's HIP benchmarks (whole ``main.cu`` files, tests/_corpus.py) run after AMD's files where a copy of
HeCBench's ``src/`` is at hand (tests/corpus/README.md: ``.corpus/hecbench`` or ``GPUENV_HECBENCH``). The CUDA samples of tests/data/cuda_samples (``.cu``, tests/_cuda_samples.py) run too, after the HIP files:
on NVIDIA as CUDA, as written; on AMD through the shipped CUDA-to-HIP headers.

Each case (inputs and launches from tests/_published.py, the same seed on both sides) runs once on the CPU
executor (checked, at the GPU's wavefront width) and once on the GPU through ``compile_kernel`` /
``compile_module`` (NVRTC with the shipped HIP-on-CUDA header on NVIDIA, hiprtc on AMD; where NVRTC cannot
compile a file, e.g. one that includes <iostream>, nvcc). Prints, per kernel,
``name  cpu-vs-gpu: identical``, ``max abs diff X`` (within the case's tolerance) or ``FAILED why``, and
whether the GPU matched the numpy reference. Exit status 1 when any kernel failed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from _corpus import CASES as CORPUS_CASES  # noqa: E402
from _corpus import HECBENCH  # noqa: E402
from _cuda_samples import CASES as CUDA_CASES  # noqa: E402
from _published import CASES, Case, CpuRun, Run  # noqa: E402

from pytest_gpuenv import rtc  # noqa: E402

#: nvcc needs this to call constexpr host functions (std::plus<unsigned>::operator()) from device code
NVCC_OPTIONS = ("--expt-relaxed-constexpr",)


class GpuRun(Run):
    """A case on the GPU: numpy arrays go to the device for the launch and come back into the same arrays."""

    def __init__(self, case: Case, arch: str, warp: int, compiler: Any = None) -> None:
        options = list(case.options) + (list(NVCC_OPTIONS) if compiler == "nvcc" else [])
        dialect = {"dialect": case.extra["dialect"]} if "dialect" in case.extra else {}  # HeCBench's HIP .cu files
        super().__init__(case, warp, arch=arch, compiler=compiler, options=options,
                         include_dirs=list(case.include_dirs), sync=True, **dialect)

    def compile_all(self) -> None:
        for name in self.case.names(self.warp):
            self.kernel(name)

    def set_global(self, name: str, values: Any) -> None:
        import torch

        view = self._module().get_global(name)
        view.copy_(torch.as_tensor(np.asarray(values)).reshape(view.shape))

    def launch(self, kernel: Any, grid: Any, block: Any, *args: Any, shared_mem: int = 0, cooperative: bool = False) -> None:
        import torch

        pairs = []
        dev_args = []
        for a in args:
            if isinstance(a, np.ndarray):
                # torch keeps unsigned 16/32/64-bit data in signed tensors of the same width
                host = a.view(a.dtype.str.replace("u", "i")) if a.dtype.kind == "u" and a.itemsize > 1 else a
                t = torch.from_numpy(np.ascontiguousarray(host)).cuda()
                pairs.append((host, t))
                dev_args.append(t)
            else:
                dev_args.append(a)
        kernel(grid, block, *dev_args, shared_mem=shared_mem, cooperative=cooperative)
        torch.cuda.synchronize()
        for host, t in pairs:
            host[...] = t.cpu().numpy()


def gpu_arch_and_warp() -> tuple[str, int]:
    import torch

    props = torch.cuda.get_device_properties(0)
    if getattr(torch.version, "hip", None):
        return props.gcnArchName.split(":")[0], int(getattr(props, "warp_size", 64))
    return f"sm_{props.major}{props.minor}", 32


#: outputs that differ on NVIDIA for a reason of CUDA's, neither the kernel's nor the executor's: (labels, why)
NVIDIA_DIFFERS = {
    "cg_grid_group": ({"kernel_cg_grid_group_type_via_base_type size", "kernel_cg_grid_group_type_via_base_type thread_rank"},
                      "CUDA 13's thread_group made from this_grid() reads its group type from bits of the grid workspace "
                      "register %envreg2 (nvcc -ptx shows it), so its size() and thread_rank() are not the grid's; HIP's are"),
}


def compare(case: Case, cpu: list, gpu: list) -> tuple[str, bool]:
    worst, failed = 0.0, []
    for (label, c, _), (_, g, _) in zip(cpu, gpu):
        if np.array_equal(c, g, equal_nan=c.dtype.kind == "f"):
            continue
        diff = float(np.max(np.abs(c.astype(np.float64) - g.astype(np.float64))))
        worst = max(worst, diff)
        if not np.allclose(g, c, rtol=case.rtol, atol=case.atol, equal_nan=c.dtype.kind == "f"):
            failed.append(f"{label} max abs diff {diff:.3g}")
    if failed:
        return "FAILED " + "; ".join(failed), False
    return ("identical" if worst == 0 else f"max abs diff {worst:.3g}"), True


def reference_note(case: Case, gpu: list) -> str:
    bad = [label for label, g, want in gpu if not np.allclose(g, want, rtol=case.rtol, atol=case.atol)]
    return "numpy: ok" if not bad else "numpy: differs in " + ", ".join(bad)


def run_case(case: Case, arch: str, warp: int, cache: str) -> tuple[str, bool]:
    try:
        cpu = case.body(CpuRun(case, warp, True, cache))
    except Exception as exc:
        return f"FAILED on the CPU executor: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", False
    try:
        gpu_run = GpuRun(case, arch, warp)
        try:
            gpu_run.compile_all()
            how = gpu_run.kernel(case.names(warp)[0]).compiler
        except rtc.KernelCompileError as exc:
            if not arch.startswith("sm_") or shutil.which("nvcc") is None:
                raise
            first = str(exc).splitlines()[0][:120]
            gpu_run, how = GpuRun(case, arch, warp, compiler="nvcc"), f"nvcc (NVRTC: {first})"
            gpu_run.compile_all()
        gpu = case.body(gpu_run)
    except Exception as exc:
        return f"FAILED on the GPU: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", False
    labels, why = NVIDIA_DIFFERS.get(case.name, (set(), "")) if arch.startswith("sm_") else (set(), "")
    verdict, ok = compare(case, [t for t in cpu if t[0] not in labels], [t for t in gpu if t[0] not in labels])
    differ = [c[0] for c, g in zip(cpu, gpu) if c[0] in labels and not np.array_equal(c[1], g[1])]
    if ok and differ:
        verdict += f"; {', '.join(differ)} differ, as they do on NVIDIA ({why})"
    if not ok and case.extra.get("lockstep") and arch.startswith("sm_"):
        # the CPU ran it in lockstep as AMD hardware does; NVIDIA since Volta gives no such guarantee
        verdict, ok = f"differs, as it may on NVIDIA (relies on wavefront lockstep): {verdict}", True
    return f"{verdict}  [{reference_note(case, gpu)}; {how}]", ok


def main(argv: list[str]) -> int:
    arch, warp = gpu_arch_and_warp()
    print(f"published kernels: GPU {arch} (wave{warp}) against the CPU executor at wave{warp}, checked")
    corpus = CORPUS_CASES if os.path.isdir(HECBENCH) else []
    if not corpus:
        print(f"HeCBench's benchmarks: no copy at {HECBENCH} (tests/corpus/README.md), not run")
    cases = [c for c in CASES + corpus + CUDA_CASES if not argv or c.name in argv]
    cache = tempfile.mkdtemp(prefix="gpuenv-published-")
    failed = 0
    for case in cases:
        line, ok = run_case(case, arch, warp, cache)
        failed += not ok
        print(f"{case.name:<20} cpu-vs-gpu: {line}", flush=True)
    print(f"{len(cases) - failed} of {len(cases)} kernels agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
