"""The ``emulator`` and ``demo`` commands."""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import time
from dataclasses import asdict
from typing import Any, Optional

from .. import __version__, _core, analysis
from .._output import write_parquet
from .._time import to_ms
from .._writers import (
    _EVENT_COLUMNS,
    _format,
    _pyarrow,
    _Target,
    _writable,
    _write_rows,
)
from ..client import Limits
from ..emulator import Emulator
from ._common import _progress
from .plot import _plot


def _emulator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port", type=int, default=8080, help="loopback port (default %(default)s; 0: any port)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the generated sites, cameras and events (default %(default)s)",
    )
    p.add_argument("--sites", type=int, default=20, help="sites to generate (default %(default)s)")
    p.add_argument(
        "--days", type=int, default=14, help="days of events, from 2026-01-05 (default %(default)s)"
    )
    p.add_argument(
        "--events-per-day",
        type=int,
        default=5000,
        help="events a day over all sites (default %(default)s)",
    )
    p.add_argument(
        "--daily-requests",
        type=int,
        default=0,
        metavar="N",
        help="a daily request quota the emulator enforces, as the service does (default 0: "
        "none); SURVEILLANCE_DAILY_REQUESTS, printed with the credentials, gives its clients "
        "the same",
    )
    p.add_argument(
        "--provider-limits",
        action="store_true",
        help="enforce the provider's published limits (1 read/s, 3 in flight, the webhook's "
        "100/s and 200 in flight, 2,400 requests a day unless --daily-requests): the printed "
        "variables then leave the clients at them too; without it they lift the clients' "
        "limits, so that the CLI and Client() are as quick as emu.client()",
    )


def _emulator(args: argparse.Namespace) -> int:
    emu = Emulator(
        seed=args.seed,
        sites=args.sites,
        days=args.days,
        events_per_day=args.events_per_day,
        port=args.port,
    )
    if args.daily_requests < 0:
        emu.stop()
        raise ValueError("--daily-requests must be 0 (no quota) or more")
    if args.provider_limits:
        published = Limits(daily_requests=args.daily_requests or Limits.daily_requests)
        emu.set_limits(**asdict(published))
    elif args.daily_requests:
        emu.set_limits(daily_requests=args.daily_requests)
    # Ctrl-C at any point from here on (even while the variables are printed) stops the
    # emulator cleanly: it is how this command is meant to end.
    try:
        # Lines a shell runs as they are: `export`s, the rest comments.
        print(f"# surveillance emulator {__version__}: serving until Ctrl-C")
        print(f"export SURVEILLANCE_BASE_URL={shlex.quote(emu.url)}")
        print(f"export SURVEILLANCE_EU_BASE_URL={shlex.quote(emu.eu_url)}")
        print(f"export SURVEILLANCE_API_KEY={shlex.quote(emu.api_key)}")
        print(f"export SURVEILLANCE_CLIENT_ID={shlex.quote(emu.client_id)}")
        print(f"export SURVEILLANCE_CLIENT_SECRET={shlex.quote(emu.client_secret)}")
        print(f"export SURVEILLANCE_AUDIENCE={shlex.quote(emu.audience)}")
        # The clients' daily quota is the emulator's: none by default, so that commands run
        # against it never stop on the published 2,400 (its requests are counted apart from a
        # real service's, in a ledger removed when it stops).
        # The clients' rates are the emulator's too: none unless it enforces the provider's, as
        # for `emu.client()`.
        if args.provider_limits:
            daily = args.daily_requests or Limits.daily_requests
        else:
            daily = args.daily_requests
            for name in ("read_per_second", "read_concurrency"):
                print(f"export SURVEILLANCE_{name.upper()}=0")
            for name in ("publish_per_second", "publish_concurrency"):
                print(f"export SURVEILLANCE_{name.upper()}=0")
        print(f"export SURVEILLANCE_DAILY_REQUESTS={daily}")
        print(f"# events from {emu.start.isoformat()} to {emu.end.isoformat()}", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    return 0


# --- output ---------------------------------------------------------------------------


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sites", type=int, default=20, help="sites in the emulator (default 20)")
    p.add_argument("--events-per-day", type=int, default=5000, help="events a day (default 5000)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="the export: .parquet (default events.parquet; events.jsonl without pyarrow), "
        ".csv or .jsonl",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        default="dwell.png",
        help="the chart (default dwell.png; '' for none): drawn by matplotlib when it is "
        "installed, else by the package itself",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")


def _read_export(path: str, fmt: str) -> tuple[list[Any], list[Optional[int]], list[int]]:
    """Site ids, durations and start times (epoch ms) of the exported events."""
    if fmt == "parquet":
        pa, pq = _pyarrow()
        table = pq.read_table(path, columns=["siteId", "details.duration_sec", "startTime"])
        return (
            table.column("siteId").to_pylist(),
            table.column("details.duration_sec").to_pylist(),
            table.column("startTime").cast(pa.int64()).to_pylist(),
        )
    site_ids: list[Any] = []
    durations: list[Optional[int]] = []
    starts: list[int] = []
    with open(path, encoding="utf-8", newline="") as f:
        rows: Any = csv.DictReader(f) if fmt == "csv" else map(json.loads, f)
        for row in rows:
            site_ids.append(row["siteId"])
            if fmt == "csv":
                duration = row["details.duration_sec"]
                durations.append(int(duration) if duration else None)
            else:
                durations.append((row.get("details") or {}).get("duration_sec"))
            starts.append(to_ms(row["startTime"], "startTime"))
    return site_ids, durations, starts


def _demo(args: argparse.Namespace) -> int:
    path = args.output or "events.parquet"
    _writable(path, "-o")  # a local file: the demo's Parquet is written in Rust
    fmt = _format(argparse.Namespace(output=args.output, format=None)) if args.output else "parquet"
    if args.plot:
        _writable(args.plot, "--plot")
    with Emulator(seed=0, sites=args.sites, days=7, events_per_day=args.events_per_day) as emu:
        client = emu.client()
        print(f"emulator at {emu.url}: {args.sites} sites, a week from {emu.start:%Y-%m-%d}")
        sites: dict[str, Any] = {s["id"]: s for s in client.sites()}
        started = time.perf_counter()
        # One fetch: the typed table for Parquet (written in Rust, no pyarrow needed), the
        # records as the service sends them for CSV and JSON Lines.
        fetched: Any
        if fmt == "parquet":
            fetched = client.events(emu.start, emu.end, output="arrow", progress=_progress(args))
        else:
            fetched = client.events(emu.start, emu.end, progress=_progress(args))
        elapsed = time.perf_counter() - started
        requests = client.stats()["requests"].get("GET /v2/events", 0)
    if fmt == "parquet":
        count = write_parquet(fetched, path)
        columns = _core.columns(fetched, ["siteId", "details.duration_sec", "startTime"])
        site_ids = columns["siteId"]
        durations = columns["details.duration_sec"]
        starts = columns["startTime"]
    else:
        count = len(fetched)
        target = _Target(path)
        try:
            header = None if fmt == "jsonl" else [*_EVENT_COLUMNS]
            _write_rows(target, fmt, iter(fetched), header)
            target.commit()
        except BaseException:
            target.discard()
            raise
        site_ids = [e["siteId"] for e in fetched]
        durations = [(e.get("details") or {}).get("duration_sec") for e in fetched]
        starts = [to_ms(e["startTime"], "startTime") for e in fetched]
    print(f"fetched {count:,} events in {elapsed:.2f} s with {requests:,} requests")
    print(f"wrote {path}")
    bursts = analysis.bursts(site_ids, starts)
    if bursts:
        # Left out of the statistics and the chart (the export keeps every event).
        kept = [i for i, key in enumerate(zip(site_ids, starts)) if key not in bursts]
        print(
            f"left out of the statistics: {count - len(kept):,} events in {len(bursts):,} "
            f"bursts (over {analysis.BURST} events of a site in one millisecond: a camera "
            "uploading its backlog, whose times are not when the events happened)"
        )
        site_ids = [site_ids[i] for i in kept]
        durations = [durations[i] for i in kept]
        starts = [starts[i] for i in kept]

    zones = {site: s.get("timezone") for site, s in sites.items()}
    hours, local = analysis.local_hours(starts, site_ids, zones)
    hour_label = "busiest hour" if local else "busiest UTC hour"
    print()
    print(f"{'site':<34} {'events':>7} {'median s':>9} {'p90 s':>7} {hour_label:>13}")
    for site, events, median, p90, busiest in analysis.site_rows(site_ids, durations, hours):
        name = str(sites.get(site, {}).get("name", site))[:34]
        print(f"{name:<34} {events:>7,} {median:>9.0f} {p90:>7.0f} {busiest:>10}:00")
    if args.plot:
        brand = {site: analysis.brand_of(s.get("locationTags")) for site, s in sites.items()}
        brands = [brand.get(site, "(no brand)") for site in site_ids]
        print()
        _plot(args.plot, brands, hours, durations)
        print(
            f"wrote {args.plot} (median dwell time by local hour, per brand, over the "
            "events each point rests on)"
        )
    return 0
