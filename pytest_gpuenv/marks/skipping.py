"""The GPU markers applied to an environment model: skip, xfail, or run.

``evaluate(marks, env)`` returns the first ``Skip`` of a test's marks (each checked by its row in
``marks.markers.MARKERS``) or ``None``; ``xfail_for(marks, env)`` returns ``(reason, strict)`` when an
``xfail_on`` condition holds; ``require_failure`` is ``--gpuenv-require``'s check. Pure functions of the
marks and the model, so ``--gpuenv-plan`` runs them against profiles of other machines.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from pytest_gpuenv.base.model import GpuEnv
from pytest_gpuenv.marks.markers import BY_NAME, PluginMark, validate
from pytest_gpuenv.marks.requirements import Skip, cond_text, condition_holds, missing_gpu

__all__ = ["Skip", "evaluate", "evaluate_mark", "missing_gpu", "require_failure", "xfail_for"]


def evaluate_mark(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], env: GpuEnv) -> Optional[Skip]:
    """The Skip for one marker (``marks.markers.MarkerArgumentError`` for a bad argument), or None."""
    value = validate(name, args, kwargs)
    check = BY_NAME[name].check
    return check(env, value, args, kwargs) if check is not None else None


def evaluate(marks: Iterable[PluginMark], env: GpuEnv) -> Optional[Skip]:
    """The first Skip among an item's GPU markers, or None when it may run."""
    for m in marks:
        skip = evaluate_mark(m.name, m.args, m.kwargs, env)
        if skip is not None:
            return skip
    return None


def xfail_for(marks: Iterable[PluginMark], env: GpuEnv) -> Optional[tuple[str, bool]]:
    """(reason, strict) when an ``xfail_on`` condition holds."""
    for m in marks:
        if m.name != "xfail_on":
            continue
        for cond in validate(m.name, m.args, m.kwargs):
            if condition_holds(cond, env):
                why = m.kwargs.get("reason")
                text = f"xfail_on({cond_text(cond)!r}): expected to fail here, found {env.describe()}"
                if why:
                    text += f": {why}"
                return text, bool(m.kwargs.get("strict", False))
    return None


#: ``--gpuenv-require`` value -> the marker whose check it is, and the backend's name for people
_REQUIRED = {"gpu": ("requires_gpu", "a GPU"), "cuda": ("requires_cuda", "CUDA"), "rocm": ("requires_rocm", "ROCm")}


def require_failure(env: GpuEnv, want: str, summary: str) -> Optional[str]:
    """``--gpuenv-require``: None when ``want`` (``gpu``, ``cuda``, ``rocm``; ``off``) is usable, else the
    message that stops the run: what was found (``summary``: the header's text), why not, and every problem
    of the model with its fix (informational notes too: on a runner that lost its GPU they are the clues)."""
    if want == "off":
        return None
    if want.startswith("devices>="):  # (one line: the count is all that is missing)
        n = int(want[len("devices>="):])
        have = [d for d in env.devices if d.usable]
        if len(have) >= n:
            return None
        return (f"gpuenv: --gpuenv-require={want}: this run needs at least {n} GPU(s) and {len(have)} "
                f"{'is' if len(have) == 1 else 'are'} usable here ({summary}), so no test was run")
    if want in _REQUIRED:
        marker, label = _REQUIRED[want]
        skip = evaluate_mark(marker, (), {}, env)
    else:  # capabilities, comma-separated (checked by the option parser)
        label = want
        skip = evaluate_mark("requires_capability", tuple(want.split(",")), {}, env)
    if skip is None:
        return None
    lines = [f"gpuenv: --gpuenv-require={want}: {label} is not usable here, so no test was run.",
             f"  found: {summary}", f"  {skip.reason}"]
    for p in env.problems:
        if f"[{p.code}]" not in skip.reason:
            lines.append(f"  [{p.code}] {p.message.rstrip('.')}" + (f"; fix: {p.fix}" if p.fix else ""))
    return "\n".join(lines)
