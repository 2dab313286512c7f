"""The ``surveillance`` command line: ``demo``, ``emulator``, and ``--version``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections import defaultdict
from typing import Optional

from . import __version__
from .emulator import Emulator
from .errors import SurveillanceError


def _emulator(args: argparse.Namespace) -> int:
    emu = Emulator(
        seed=args.seed,
        sites=args.sites,
        days=args.days,
        events_per_day=args.events_per_day,
        port=args.port,
    )
    print(f"surveillance emulator {__version__}: serving until Ctrl-C")
    print(f"SURVEILLANCE_BASE_URL={emu.url}")
    print(f"SURVEILLANCE_EU_BASE_URL={emu.eu_url}")
    print(f"SURVEILLANCE_API_KEY={emu.api_key}")
    print(f"SURVEILLANCE_CLIENT_ID={emu.client_id}")
    print(f"SURVEILLANCE_CLIENT_SECRET={emu.client_secret}")
    print(f"SURVEILLANCE_AUDIENCE={emu.audience}")
    print(f"events from {emu.start.isoformat()} to {emu.end.isoformat()}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    return 0


def _percentile(values: list, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _demo(args: argparse.Namespace) -> int:
    with Emulator(seed=0, sites=args.sites, days=7, events_per_day=args.events_per_day) as emu:
        client = emu.client()
        print(f"emulator at {emu.url}: {args.sites} sites, a week from {emu.start:%Y-%m-%d}")
        started = time.perf_counter()
        events = client.events(emu.start, emu.end)
        elapsed = time.perf_counter() - started
        requests = client.stats()["requests"].get("GET /v2/events", 0)
        print(f"fetched {len(events):,} events in {elapsed:.2f} s with {requests:,} requests")
        sites = {s["id"]: s for s in client.sites()}
        path = _export(events, args.output)
        print(f"wrote {path}")

    durations: dict = defaultdict(list)
    hours: dict = defaultdict(lambda: defaultdict(int))
    for e in events:
        durations[e["siteId"]].append(e["details"]["duration_sec"])
        # startTime carries the site's own UTC offset: its hour is the local hour.
        hours[e["siteId"]][int(e["startTime"][11:13])] += 1
    print()
    print(f"{'site':<34} {'events':>7} {'median s':>9} {'p90 s':>7} {'busiest hour':>13}")
    for site_id, values in sorted(durations.items(), key=lambda kv: -len(kv[1])):
        name = sites.get(site_id, {}).get("name", site_id)[:34]
        busiest = max(hours[site_id].items(), key=lambda kv: kv[1])[0]
        print(
            f"{name:<34} {len(values):>7,} {statistics.median(values):>9.0f} "
            f"{_percentile(values, 0.9):>7.0f} {busiest:>10}:00"
        )
    return 0


def _export(events: list, output: Optional[str]) -> str:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        path = output or "events.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for e in events:
                f.write(json.dumps(e) + "\n")
        hint = "install pyarrow, or pip install 'surveillance[pandas]', for Parquet"
        return f"{path} (JSON Lines; {hint})"
    path = output or "events.parquet"
    rows = [
        {
            **{k: v for k, v in e.items() if k not in ("details", "startTime", "endTime")},
            "startTime": dt.datetime.fromisoformat(e["startTime"]),
            "endTime": dt.datetime.fromisoformat(e["endTime"]),
            "duration_sec": e["details"].get("duration_sec"),
            "details": json.dumps(e["details"]),
        }
        for e in events
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def main(argv: Optional[list] = None) -> int:
    """Entry point of the ``surveillance`` console script."""
    parser = argparse.ArgumentParser(
        prog="surveillance",
        description="Client for a video-surveillance cloud API, and a local emulator of it.",
    )
    parser.add_argument("--version", action="version", version=f"surveillance {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="start an emulator, export a week of events, summarise")
    demo.add_argument("--sites", type=int, default=20)
    demo.add_argument("--events-per-day", type=int, default=5000)
    demo.add_argument("-o", "--output", help="file to write (default events.parquet)")
    demo.set_defaults(run=_demo)

    emu = sub.add_parser("emulator", help="run the emulator and print its credentials")
    emu.add_argument("--port", type=int, default=8080, help="loopback port (0: any free one)")
    emu.add_argument("--seed", type=int, default=0)
    emu.add_argument("--sites", type=int, default=20)
    emu.add_argument("--days", type=int, default=14)
    emu.add_argument("--events-per-day", type=int, default=5000)
    emu.set_defaults(run=_emulator)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (SurveillanceError, ValueError, OSError) as e:
        print(f"surveillance: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
