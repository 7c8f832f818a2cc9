"""``--gpuenv-perf-plot=PATH``: a PNG of the run's measurements for CI artifacts (matplotlib, the
optional extra ``plot``, imported only when the plot is drawn).

One panel per test (``nodeid``): each measurement's samples in the order taken (microseconds, one
colour per measurement name), its median as a line, and a time budget as a dashed red line where an
assertion gave one. ``option_problem`` is what the options check at configure time.
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import Optional, Sequence

from pytest_gpuenv.base.paths import output_file_problem, write_atomically
from pytest_gpuenv.perf._entries import PerfEntry

INSTALL_HINT = "pip install 'pytest-gpuenv[plot]'"
_TIME_BUDGET = re.compile(r"^\s*([0-9.]+(?:e-?\d+)?)\s*(ns|us|ms|s)\s*$")
_SCALE_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def option_problem(path: str, invocation_dir: str) -> Optional[str]:
    """Why ``--gpuenv-perf-plot=PATH`` cannot work, or None: matplotlib must be installed, and PATH must
    be a regular file or a new one in a folder that exists or can be created, and writable."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or blocked package (sys.modules entry None)
        found = False
    if not found:
        return f"matplotlib is not installed ({INSTALL_HINT})"
    return output_file_problem(os.path.join(invocation_dir, path), what="the plot")


def budget_us(r: PerfEntry) -> Optional[float]:
    """A time budget ("250 us") in microseconds; None for other budgets (bandwidth, ratio, baseline)."""
    m = _TIME_BUDGET.match(r.budget or "")
    return float(m.group(1)) * _SCALE_US[m.group(2)] if m else None


def panels(entries: Sequence[PerfEntry]) -> dict[str, list[PerfEntry]]:
    """Per test, its entries with samples: one per measurement name (the one with most samples)."""
    out: dict[str, dict[str, PerfEntry]] = {}
    for r in entries:
        if not r.samples_s:
            continue
        per = out.setdefault(r.nodeid or r.name, {})
        old = per.get(r.name)
        if old is None or len(r.samples_s) > len(old.samples_s) or (budget_us(r) and not budget_us(old)):
            per[r.name] = r
    return {k: list(v.values()) for k, v in out.items()}


def write(entries: Sequence[PerfEntry], path: str) -> None:
    """Draw ``panels(entries)`` into the PNG ``path`` (its folder created); nothing measured: one
    panel saying so. Written atomically, as the JSON report is."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = panels(entries)
    fig, axes = plt.subplots(max(1, len(groups)), 1, figsize=(9, 2.6 * max(1, len(groups))), squeeze=False)
    if not groups:
        axes[0][0].text(0.5, 0.5, "no performance measurements in this run", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, (test, recs) in zip((a[0] for a in axes), groups.items()):
        for r in recs:
            ys = [x * 1e6 for x in r.samples_s]
            dots = ax.plot(range(len(ys)), ys, ".", ms=3, label=f"{r.name} [{r.timer}] n={r.n}")[0]
            if r.median_s is not None:
                ax.axhline(r.median_s * 1e6, color=dots.get_color(), lw=1)
            b = budget_us(r)
            if b is not None:
                ax.axhline(b, color="red", ls="--", lw=1, label=f"budget {r.budget} ({r.verdict or '-'})")
        ax.set_title(test, fontsize=9, loc="left")
        ax.set_ylabel("us per call")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1][0].set_xlabel("sample")
    fig.tight_layout()
    try:
        write_atomically(os.path.abspath(path), lambda f: fig.savefig(f, format="png", dpi=100))
    finally:
        plt.close(fig)
