"""``surveillance demo``'s numbers: the emulator's bursts (over a hundred events of one site
stamped with one millisecond) stay out of its statistics and its chart, and the chart shows
how many events each point rests on, drawn by matplotlib or, without it, by the package."""

from __future__ import annotations

import re
import statistics
import struct
import subprocess
import sys
import zlib

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


def test_without_matplotlib_the_chart_is_drawn_by_the_package(tmp_path, monkeypatch):
    # matplotlib cannot be imported, as after `pip install .` alone.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    brands = ["A"] * 5 + ["B"] * 3
    hours = [9, 9, 9, 10, 12, 9, 12, 12]
    durations = [10, 20, 30, 40, 50, 60, 70, None]
    medians, counts = cli.plot._series(brands, hours, durations)
    assert medians["A"][9] == statistics.median([10, 20, 30]) and medians["A"][11] is None
    assert (counts["A"][9], counts["A"][10], counts["B"][12]) == (3, 1, 1)
    path = tmp_path / "chart.png"
    assert cli._plot(str(path), brands, hours, durations) is None
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + size]
        (crc,) = struct.unpack(">I", png[at + 8 + size : at + 12 + size])
        assert crc == zlib.crc32(kind + data)
        chunks[kind] = data
        at += 12 + size
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (width, height, depth, color) == (900, 700, 8, 2)  # 8-bit RGB
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == height * (1 + 3 * width)
    # Each brand's line is drawn in its colour (matplotlib's first two).
    stride = 1 + 3 * width
    pixels = b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))
    colours = {pixels[i : i + 3] for i in range(0, len(pixels), 3)}
    assert {bytes((31, 119, 180)), bytes((255, 127, 14))} <= colours
