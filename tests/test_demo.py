"""``surveillance demo``'s numbers: the emulator's bursts (over a hundred events of one site
stamped with one millisecond) stay out of its statistics and its chart, and the chart shows
how many events each point rests on."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys

import pytest
from surveillance import cli

from conftest import service_env


def test_the_demo_leaves_bursts_out_of_its_statistics(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "surveillance.cli", "demo", "--plot", "", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=service_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "fetched 35,000 events" in out.stdout
    m = re.search(r"left out of the statistics: ([\d,]+) events in (\d+) bursts", out.stdout)
    assert m, out.stdout
    left_out, bursts = int(m.group(1).replace(",", "")), int(m.group(2))
    assert bursts == 7 and 7 * 101 <= left_out <= 7 * 200  # one burst a day, a week
    header = next(line for line in out.stdout.splitlines() if "median s" in line)
    rows = out.stdout.split(header, 1)[1].strip().splitlines()
    counts = [int(r.split()[-4].replace(",", "")) for r in rows]
    busiest = [int(r.split()[-1].split(":")[0]) for r in rows]
    assert len(rows) == 20 and sum(counts) == 35_000 - left_out
    # Stores follow their opening hours: none is busiest at night once bursts are left out.
    assert all(7 <= hour <= 21 for hour in busiest), busiest
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_metadata(tmp_path / "events.parquet").num_rows == 35_000  # all exported


def test_the_chart_shows_the_events_each_point_rests_on(tmp_path):
    pytest.importorskip("matplotlib")
    brands = ["A"] * 5 + ["B"] * 3
    hours = [9, 9, 9, 10, 12, 9, 12, 12]
    durations = [10, 20, 30, 40, 50, 60, 70, None]
    fig = cli._plot(str(tmp_path / "chart.png"), brands, hours, durations)
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"
    medians, counts = fig.axes
    by_brand = {line.get_label(): line for line in counts.get_lines()}
    a = list(by_brand["A"].get_ydata())
    assert (a[9], a[10], a[12]) == (3, 1, 1)
    assert all(v != v for h, v in enumerate(a) if h not in (9, 10, 12))  # NaN: no point
    b = list(by_brand["B"].get_ydata())
    assert (b[9], b[12]) == (1, 1)  # the event without a duration is on no point
    a_medians = list({line.get_label(): line for line in medians.get_lines()}["A"].get_ydata())
    assert a_medians[9] == statistics.median([10, 20, 30])
    assert "events" in counts.get_ylabel()
