"""Sequential refinement of a verdict, and the one automatic re-measurement of an INCONCLUSIVE one.

A result (``_results.Measurement`` or ``Comparison``) offers ``sampler`` (replaced by the second
attempt), ``attempts`` (summaries, empty until a re-measurement), ``_xs()`` (the judged samples:
times or per-pair ratios), ``_unit`` and ``_settle(raw verdict) -> (verdict, reasons)``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pytest_gpuenv.perf import _stats
from pytest_gpuenv.perf._engine import Sampler

#: the second attempt has this many times the time cap and minimum sample counts of the first
RETRY_SCALE = 2.0


def very_precise(s: Sampler, xs: list[float]) -> bool:
    """An undecided verdict whose interval is already a quarter of the precision target will not be
    decided by more samples: the value sits inside the guard band."""
    if len(xs) < s.opts.min_samples:
        return False
    med, lo, hi = _stats.summarize(xs, s.opts.confidence)
    return _stats.precise_enough(med, lo, hi, s.opts.rel_precision / 4)


def refine(result: Any, decider: Callable[[], Optional[str]]) -> Optional[str]:
    """Sample on while the verdict is undecided, time is left and more samples could decide it."""
    s = result.sampler
    if s.time_left() > 0 and decider() is None and not very_precise(s, result._xs()):
        s.run(lambda _s: decider() is not None or very_precise(s, result._xs()))
    return decider()


def decide(result: Any, decider: Callable[[], Optional[str]]) -> tuple[str, list[str]]:
    """The verdict and its reasons. An INCONCLUSIVE one (other than "nothing enqueued", which more
    samples cannot change) is measured again once, by a fresh sampler with a larger sample and its own
    warm-up; that second verdict stands, and ``result.attempts`` keeps both."""
    verdict, why = result._settle(refine(result, decider))
    if verdict != _stats.INCONCLUSIVE or result.attempts or any("enqueue no GPU work" in p for p in why):
        return verdict, why
    result.attempts.append(summary(result, 1, verdict, why))
    result.sampler = result.sampler.fresh(RETRY_SCALE)
    s = result.sampler
    s.run(lambda _s: decider() is not None or very_precise(s, result._xs()))
    verdict, why = result._settle(decider())
    result.attempts.append(summary(result, 2, verdict, why))
    return verdict, why


def summary(result: Any, k: int, verdict: Optional[str], why: list[str]) -> dict[str, Any]:
    """One attempt as kept in an entry's ``attempts``."""
    s = result.sampler
    value, lo, hi = result._judged()
    return {"attempt": k, "unit": result._unit, "value": value, "ci_low": lo, "ci_high": hi, "n": s.n,
            "verdict": verdict, "problems": list(why), "stop_reason": s.stop_reason, "spent_s": round(s.spent_s, 6)}
