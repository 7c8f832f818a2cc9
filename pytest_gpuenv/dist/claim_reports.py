"""``--dist gpu``, on the controller: what the reports of tests tell the ledger of claims (``dist.ledger``).

The memory a test used (``dist.use``, in its report's ``user_properties``) goes to its GPUs' figures; a test
that failed out of memory gets a section naming the tests that held claims on its GPUs beside it, and what
they claimed (its report arrives before the scheduler hears the test ended, so they are still admitted).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_gpuenv.base.model import format_size
from pytest_gpuenv.dist.use import USE_PROPERTY

#: how the frameworks word an allocation that failed: torch (CUDA and ROCm builds), the CUDA and HIP runtimes,
#: cuBLAS, JAX/XLA
OOM = re.compile(r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|hipErrorOutOfMemory|"
                 r"cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED", re.IGNORECASE)
SECTION = "gpuenv: beside this test"


def on_report(sched: Any, node: Any, report: pytest.TestReport) -> None:
    ledger = sched.ledger
    for key, value in report.user_properties:
        if key == USE_PROPERTY and isinstance(value, dict):
            for gid, figures in value.items():
                used, claimed = (list(figures) + [0, 0])[:2]
                ledger.record_use(str(gid), int(used), int(claimed))
    if report.failed and report.when == "call" and sched.collection is not None and OOM.search(str(report.longrepr)):
        report.sections.append((SECTION, beside_text(sched, node, report.nodeid)))


def beside_text(sched: Any, node: Any, nodeid: str) -> str:
    """What ran on this test's GPUs when it failed, with each claim."""
    index = sched.collection.index(nodeid)
    ledger = sched.ledger
    claim = sched.claim(index)
    gpus = ledger.gpus_of(node, claim)
    head = (f"{nodeid} claimed {claim.text()} on {', '.join(gpus) or 'no GPU'} "
            f"({'requires_memory' if claim.declared else 'the default claim'})")
    others = ledger.beside(node, index)
    if not others:
        return head + "; no other test of this run held a claim on its GPUs"
    lines = [head + "; beside it:"]
    for worker, i, c in others:
        lines.append(f"  {sched.collection[i]} on {worker.gateway.id}: claimed {c.text()}")
    held = [f"{ledger.gpus[g].name} [{g}]: {format_size(ledger.gpus[g].others)} held by other processes"
            for g in gpus if ledger.gpus[g].others]
    return "\n".join(lines + [f"  {h}" for h in held])
