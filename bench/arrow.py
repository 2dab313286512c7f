"""Typed-output benchmark: events to pandas and Arrow built in Rust, against baseline (b)
(aiohttp + orjson, exact) followed by ``pandas.json_normalize`` and the same typing, and the
memory of ``event_batches`` streamed to Parquet.

    python bench/arrow.py            # full sizes, prints the section (bench/run.py writes it)
    python bench/arrow.py --quick    # small sizes, a smoke test
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import surveillance as sv

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402

CONCURRENCY = 16
# (sites, days, events_per_day)
SIZES = {
    "full": {"frame": (20, 5, 200_000), "parquet": (50, 10, 200_000)},
    "quick": {"frame": (5, 2, 20_000), "parquet": (10, 2, 50_000)},
}
UNLIMITED = sv.Limits(
    read_per_second=None, read_concurrency=CONCURRENCY, publish_per_second=None,
    publish_concurrency=None, daily_requests=None,
)  # fmt: skip
TIME_COLUMNS = ("startTime", "endTime", "createTime")


def normalized(events: list):
    """What a pandas user writes by hand: json_normalize, then our typing of the times."""
    import pandas as pd

    frame = pd.json_normalize(events)
    for col in TIME_COLUMNS:
        frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601").astype(
            "datetime64[ms, UTC]"
        )
    return frame


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def scenario_frame(size: tuple, repeats: int) -> list:
    """Rows (client, events, seconds, note) for a million events into a typed DataFrame."""
    import pyarrow as pa

    sites, days, per_day = size
    rows = []
    with sv.Emulator(seed=0, sites=sites, days=days, events_per_day=per_day) as emu:
        truth = emu.truth(emu.start, emu.end)
        n = len(truth)
        print(f"frame: {n:,} events, latency 0, {CONCURRENCY} in flight", flush=True)
        client = emu.client(limits=UNLIMITED)
        client.access_token()
        best_pd = best_pa = float("inf")
        for _ in range(repeats):
            frame, s = timed(lambda: client.events(emu.start, emu.end, output="pandas"))
            assert frame["id"].tolist() == truth, "pandas output is not exact"
            best_pd = min(best_pd, s)
            del frame
            table, s = timed(
                lambda: pa.table(client.events(emu.start, emu.end, output="arrow", progress=False))
            )
            assert table.column("id").to_pylist() == truth, "arrow output is not exact"
            best_pa = min(best_pa, s)
            del table
        token = client.access_token()
        fetch_s = norm_s = float("inf")
        for _ in range(repeats):  # (b) gets the best of as many repeats as ours
            events, s = timed(
                lambda: baselines.fetch_events_aiohttp(
                    emu.url, emu.api_key, token, emu.start, emu.end, concurrency=CONCURRENCY
                )
            )
            assert [e["id"] for e in events] == truth, "baseline (b) is not exact"
            fetch_s = min(fetch_s, s)
            t0 = time.perf_counter()
            frame = normalized(events)
            norm_s = min(norm_s, time.perf_counter() - t0)
            del frame
            events.clear()
        base = fetch_s + norm_s
        print(
            f"  ours pandas {best_pd:.2f} s, ours arrow {best_pa:.2f} s, (b) fetch {fetch_s:.2f} s"
            f" + json_normalize {norm_s:.2f} s",
            flush=True,
        )
        rows.append(('ours `output="pandas"`', n, best_pd, f"**{base / best_pd:.1f}× (b)**"))
        rows.append(("ours `output=\"arrow\"` → `pyarrow.table`", n, best_pa,
                     f"**{base / best_pa:.1f}× (b)**"))  # fmt: skip
        rows.append(("(b) aiohttp + orjson, then `json_normalize`", n, base,
                     f"fetch {fetch_s:.2f} s + normalize {norm_s:.2f} s"))  # fmt: skip
    return rows


PARQUET_SCRIPT = r"""
import json, resource, sys, tempfile, time, os
import pyarrow as pa, pyarrow.parquet as pq
import surveillance as sv

sites, days, per_day, concurrency = map(int, sys.argv[1:5])


def peak_mb():  # this process's own peak (ru_maxrss starts from the parent's at the fork)
    with open("/proc/self/status") as f:
        hwm = [int(x.split()[1]) for x in f if x.startswith("VmHWM:")]
    return (hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


with sv.Emulator(seed=0, sites=sites, days=days, events_per_day=per_day) as emu:
    limits = sv.Limits(read_per_second=None, read_concurrency=concurrency,
                       publish_per_second=None, publish_concurrency=None, daily_requests=None)
    client = emu.client(limits=limits)
    client.access_token()
    before = peak_mb()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "events.parquet")
        t0 = time.perf_counter()
        reader = pa.RecordBatchReader.from_stream(client.event_batches(emu.start, emu.end))
        with pq.ParquetWriter(path, reader.schema) as w:
            for batch in reader:
                w.write_batch(batch)
        seconds = time.perf_counter() - t0
        peak = peak_mb()
        size = os.path.getsize(path)
        ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    truth = emu.truth(emu.start, emu.end)
    print(json.dumps({"events": len(ids), "seconds": seconds, "peak_mb": peak,
                      "before_mb": before, "exact": ids == truth, "file_mb": size / 2**20}))
"""


def scenario_parquet(size: tuple) -> list:
    """Rows for event_batches → ParquetWriter in a fresh process (its own emulator)."""
    sites, days, per_day = size
    print(f"parquet: {days * per_day:,} events, own process", flush=True)
    args = [str(v) for v in (sites, days, per_day, CONCURRENCY)]
    proc = subprocess.run(
        [sys.executable, "-c", PARQUET_SCRIPT, *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"parquet run failed:\n{proc.stderr}")
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {m}", flush=True)
    exact = "" if m["exact"] else ", NOT exact"
    note = (
        f"**peak RSS {m['peak_mb']:,.0f} MB** (before fetch {m['before_mb']:,.0f} MB), "
        f"file {m['file_mb']:,.0f} MB{exact}"
    )
    return [("ours `event_batches` → `ParquetWriter`", m["events"], m["seconds"], note)]


NOTES = (
    "- **frame**: latency 0, unlimited, 16 requests in flight for ours and (b); each is the best "
    "of two repeats (fetch and normalize separately for (b)), tokens fetched before timing. "
    "(b) is `bench/baselines.py`'s exact aiohttp + orjson fetch (lists of dicts), then "
    "`pandas.json_normalize` and "
    "`pd.to_datetime(..., utc=True, format='ISO8601').astype('datetime64[ms, UTC]')` of the three "
    "time columns, the typing ours has. Every output is checked against `emu.truth`.\n"
    "- **parquet**: a fresh process (`subprocess`) runs its own emulator (its data, about 70 MB "
    "per million events, is in the peak), streams `event_batches` into "
    "`pyarrow.parquet.ParquetWriter` and prints its peak resident size (`VmHWM`); the file is "
    "read back and checked."
)


def run(quick: bool) -> str:
    """Runs the scenarios; returns the markdown section."""
    mode = "quick" if quick else "full"
    t0 = time.perf_counter()
    rows = scenario_parquet(SIZES[mode]["parquet"])
    rows = scenario_frame(SIZES[mode]["frame"], 1 if quick else 2) + rows
    lines = [
        "| scenario | client | events | time (s) | events/s | result |",
        "|---|---|---|---|---|---|",
    ]
    for name, n, s, note in rows:
        scenario = "parquet, own process" if "Parquet" in name else "frame, latency 0"
        lines.append(f"| {scenario} | {name} | {n:,} | {s:.2f} | {n / s:,.0f} | {note} |")
    return "\n".join(
        [
            "# Typed output benchmark",
            "",
            f"({mode} sizes, took {time.perf_counter() - t0:.0f} s.)",
            "",
            *lines,
            "",
            NOTES,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    print(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
