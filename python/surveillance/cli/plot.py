"""The demo's chart (matplotlib)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any


def _plot(path: str, brands: list[Any], hours: list[Any], durations: list[Any]) -> Any:
    """Draws the median dwell time by local hour, one line per brand, above the number of
    events each point rests on; returns the figure, or None without matplotlib."""
    try:
        from matplotlib.figure import Figure  # optional: matplotlib
    except ImportError:
        return None
    by: dict[Any, Any] = defaultdict(lambda: defaultdict(list))
    for brand, hour, seconds in zip(brands, hours, durations):
        if seconds is not None:
            by[brand][hour].append(seconds)
    fig = Figure(figsize=(9, 7), layout="constrained")
    ax, counts = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    for brand in sorted(by):
        # An hour without events is a gap in the line, not a straight segment across it.
        ys = [statistics.median(by[brand][h]) if by[brand][h] else math.nan for h in range(24)]
        ns = [len(by[brand][h]) or math.nan for h in range(24)]
        (line,) = ax.plot(range(24), ys, marker="o", label=brand)
        counts.plot(range(24), ns, marker=".", color=line.get_color(), label=brand)
    ax.set_ylabel("median dwell time (s)")
    ax.set_title("Dwell time by local hour, per brand")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    counts.set_ylabel("events per point")
    counts.set_ylim(bottom=0)
    counts.set_xlabel("local hour of day")
    counts.set_xticks(range(0, 24, 2))
    counts.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    return fig
