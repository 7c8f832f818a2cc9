"""``--dist gpu``: which host can run which test, worked out where the host is.

Each xdist worker checks every collected test against its own (narrowed) model with the markers' own
evaluation (``skipping.evaluate``): a test whose gpuenv markers its host does not satisfy, or that needs
a GPU through a fixture (``gpu_device``, ``gpu_bench``, the ``gpu`` case of ``torch_device``) where there
is none, is one this worker cannot run (``blocker``). ``routes`` is what the worker sends its controller
before tests are handed out: those tests with their skip, and the ``xdist_group`` of each grouped test.
The controller's scheduler (``dist.scheduler``) sends each test only to workers that can run it; a test no worker
can run is skipped once with ``no_host_reason``, each host and what it lacked. ``--gpuenv-plan`` with
several profiles previews the same routing (``plan_lines``).

``--dist gpu`` is xdist's ``--dist`` with one more choice (``session.options.DistChoice``); ``--gpuenv-dist`` asks for the
same. This module is the xdist side's: a run loads it with pytest-xdist's ``--dist gpu`` or ``--gpuenv-plan``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpuenv.marks import skipping
from pytest_gpuenv.marks import markers
from pytest_gpuenv.marks.claims import Claim, claim_of
from pytest_gpuenv.session.options import DIST
from pytest_gpuenv.marks.skipping import Skip

if TYPE_CHECKING:  # pragma: no cover
    from pytest_gpuenv.base.model import GpuEnv

#: fixtures that skip where no GPU is usable (``hip_kernel`` runs on the CPU executor instead)
_GPU_FIXTURES = ("gpu_device", "gpu_bench")


def wanted(config: pytest.Config) -> bool:
    """Whether this run asked for ``--dist gpu`` (or ``--gpuenv-dist``)."""
    return config.getoption("dist", None) == DIST or bool(config.getoption("gpuenv_dist", False))


def blocker(item: pytest.Item, env: GpuEnv, parents: Optional[dict[Any, Any]] = None) -> Optional[Skip]:
    """Why a host with model ``env`` cannot run ``item`` (the skip its setup would raise), or None.
    ``parents``: as for ``marks.markers.plugin_marks``, over one pass of the collection."""
    marks = markers.plugin_marks(item, parents)
    if marks and not markers.check_marks(marks):  # (a bad marker argument fails the test on any host)
        skip = skipping.evaluate(marks, env)
        if skip is not None:
            return skip
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    if any(f in names for f in _GPU_FIXTURES) or (
            callspec is not None and callspec.params.get("torch_device") == "cuda:none"):
        return skipping.evaluate_mark("requires_gpu", (), {}, env)
    return None


def _group(item: pytest.Item) -> Optional[str]:
    """The ``xdist_group`` name(s) of an item, as ``--dist loadgroup`` joins them; None when it has none."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) if names else None


def routes(items: list[pytest.Item], env: GpuEnv, default_claim: int = 0) -> dict[str, Any]:
    """What a worker tells its controller: ``cannot``: {index: [category, cause, reason, location]} of the
    tests this host cannot run, ``groups``: {index: xdist_group} (indices into the collection), ``claims``:
    {index: ``Claim.to_list()``} of the tests whose claim is not ``default`` (``marks.claims``), ``default``:
    the claim of the others."""
    cannot: dict[int, list[Any]] = {}
    groups: dict[int, str] = {}
    parents: dict[Any, Any] = {}
    default = Claim(1, default_claim)
    claims: dict[int, list[Any]] = {}
    for i, item in enumerate(items):
        skip = blocker(item, env, parents)
        if skip is not None:
            cannot[i] = [skip.category, skip.cause, skip.reason, list(item.location)]
        group = _group(item)
        if group is not None:
            groups[i] = group
        marks = markers.plugin_marks(item, parents)
        if marks and not markers.check_marks(marks):
            claim = claim_of(marks, default_claim)
            if claim != default:
                claims[i] = claim.to_list()
    return {"cannot": cannot, "groups": groups, "claims": claims, "default": default.to_list()}


def gpu_facts(env: GpuEnv, host: str, others: Optional[list[Optional[int]]] = None) -> list[dict[str, Any]]:
    """This worker's GPUs in its device order, for the ledger (``dist.ledger``): ``id`` (the UUID where it names
    one GPU, else the host and the PCI address or index: the same in every worker that sees the GPU), ``name``,
    ``total`` bytes and ``others``: the bytes other processes hold, from ``others`` in the same order (``dist.gpu_memory.held``;
    0 where it says None: NVML or amdsmi could not tell)."""
    out = []
    for i, d in enumerate(env.usable_devices):
        where = d.pci or (d.physical_index if d.physical_index is not None else d.index)
        gid = d.unique_uuid or f"{host}/{where}"
        held = others[i] if others is not None and i < len(others) else None
        out.append({"id": gid, "name": d.name or gid, "total": d.memory_bytes, "others": held or 0})
    return out


def no_host_reason(by_host: dict[str, str]) -> str:
    """One skip reason from each host's: ``requires ROCm: found CUDA (2x ...) on host gpu-b, found no GPU
    on host ci`` (the shared ``requires X:`` said once, hosts with the same reason named together)."""
    heads = {r.partition(": ")[0] for r in by_host.values()}
    shared = len(heads) == 1 and all(": " in r for r in by_host.values())
    tails: dict[str, list[str]] = {}
    for host in sorted(by_host):
        tails.setdefault(by_host[host].partition(": ")[2] if shared else by_host[host], []).append(host)
    parts = [f"{tail} on host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)}" for tail, hosts in tails.items()]
    return (f"{heads.pop()}: " + ", ".join(parts)) if shared else "; ".join(parts)


def plan_lines(items: list[pytest.Item], profiles: list[tuple[str, GpuEnv]]) -> list[str]:
    """``--gpuenv-plan`` over two or more given profiles: where ``--dist gpu`` over hosts like them would
    send each test, and the tests it would skip once, with their reason."""
    if len(profiles) < 2:
        return []
    counts = {label: 0 for label, _env in profiles}
    anywhere = 0
    nowhere: list[str] = []
    for item in items:
        skips = {label: blocker(item, env) for label, env in profiles}
        able = [label for label, skip in skips.items() if skip is None]
        if len(able) == len(profiles):
            anywhere += 1
        elif able:
            for label in able:
                counts[label] += 1
        else:
            reason = no_host_reason({label: skip.reason for label, skip in skips.items() if skip is not None})
            nowhere.append(f"  {item.nodeid}: {reason}")
    lines = ["", f"--dist gpu over {', '.join(counts)}: {anywhere} test(s) to any host, "
             + ", ".join(f"{n} only to hosts like {label}" for label, n in counts.items())
             + f", {len(nowhere)} skipped once (no host can run them)"]
    return lines + nowhere
