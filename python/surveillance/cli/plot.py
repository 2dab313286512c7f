"""The demo's chart: drawn by matplotlib when it is installed, else by the package's own PNG
writer (``_png``), so that the demo draws it whatever the extras."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from . import _png


def _series(
    brands: list[Any], hours: list[Any], durations: list[Any]
) -> tuple[_png.Series, _png.Series]:
    """The median dwell time of each brand by local hour, and the events each rests on (None
    for an hour without events)."""
    by: dict[Any, Any] = defaultdict(lambda: defaultdict(list))
    for brand, hour, seconds in zip(brands, hours, durations):
        if seconds is not None:
            by[brand][hour].append(seconds)
    medians: _png.Series = {}
    counts: _png.Series = {}
    for brand in sorted(by, key=str):
        at = by[brand]
        medians[str(brand)] = [statistics.median(at[h]) if at[h] else None for h in range(24)]
        counts[str(brand)] = [len(at[h]) or None for h in range(24)]
    return medians, counts


def _plot(path: str, brands: list[Any], hours: list[Any], durations: list[Any]) -> Any:
    """Draws the median dwell time by local hour, one line per brand, above the number of
    events each point rests on; returns matplotlib's figure, or None when it is not installed
    (the chart is then drawn without it)."""
    medians, counts = _series(brands, hours, durations)
    try:
        from matplotlib.figure import Figure  # optional: matplotlib
    except ImportError:
        _png.draw(path, medians, counts)
        return None
    fig = Figure(figsize=(9, 7), layout="constrained")
    ax, axes_counts = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.5]})
    for brand in medians:
        # An hour without events is a gap in the line, not a straight segment across it.
        ys = [math.nan if y is None else y for y in medians[brand]]
        ns = [math.nan if n is None else n for n in counts[brand]]
        (line,) = ax.plot(range(24), ys, marker="o", label=brand)
        axes_counts.plot(range(24), ns, marker=".", color=line.get_color(), label=brand)
    ax.set_ylabel("median dwell time (s)")
    ax.set_title("Dwell time by local hour, per brand")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    axes_counts.set_ylabel("events per point")
    axes_counts.set_ylim(bottom=0)
    axes_counts.set_xlabel("local hour of day")
    axes_counts.set_xticks(range(0, 24, 2))
    axes_counts.grid(alpha=0.3)
    fig.savefig(path, dpi=100)
    return fig
