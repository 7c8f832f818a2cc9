"""The sample schedule every real backend enqueues, and the event timer's zero.

One timed sample in cold mode: [flush, then the device settles] start fn end; a batch of samples sits
behind one "head" delay long enough for the host to enqueue it (the event timer's figures would otherwise
hold host time; CUPTI's do not, so its backend passes no head delay).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from pytest_gpuenv.perf import _stats


def enqueue_samples(
    pairs: Sequence[tuple[Any, Any]], record: Callable[[Any], None], flush: Optional[Callable[[], None]],
    delay: Callable[[float], None], fns: Sequence[Callable[[], Any]], schedule: Sequence[int], *,
    head_delay_s: float, repeat: int,
) -> Sequence[tuple[Any, Any]]:
    """The sample schedule every real backend runs, with its own events, flush and delay.

    One head delay (so the host has queued the batch before the device reaches it), then per sample:
    ``flush`` (the backend's ``flush_fn``: the cache flush and what lets it settle, both outside the
    interval), start event, ``fn`` ``repeat`` times, end event.
    """
    delay(head_delay_s)
    for (start, end), i in zip(pairs, schedule):
        if flush is not None:
            flush()
        record(start)
        f = fns[i]
        for _ in range(repeat):
            f()
        record(end)
    return pairs


def event_floor(backend: Any, samples: int = 30) -> float:
    """Median time of an empty start/stop pair, timed like a cold sample (the timer's zero)."""

    def noop() -> None:
        return None

    backend.sync()
    vals: list[float] = []
    for _ in range(max(1, samples // 10)):
        h = backend.enqueue([noop], [0] * 10, flush=True, delay_s=2e-6,
                            head_delay_s=200e-6 if backend.can_delay else 0.0, repeat=1)
        vals.extend(backend.collect(h))
    return _stats.median(vals)
