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

#: The emulator's data defaults, the options' defaults.
_DATA = Emulator.DATA_DEFAULTS


def _data_argument(p: argparse.ArgumentParser, name: str, help: str) -> None:
    """The option of the emulator's data setting ``name``, its default the emulator's."""
    flag = "--" + name.replace("_", "-")
    p.add_argument(flag, type=int, default=_DATA[name], help=f"{help} (default %(default)s)")


def _emulator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--port", type=int, default=8080, help="loopback port (default %(default)s; 0: any port)"
    )
    _data_argument(p, "seed", "seed of the generated sites, cameras and events")
    _data_argument(p, "sites", "sites to generate")
    _data_argument(p, "days", f"days of events, from {_DATA['start']}")
    _data_argument(p, "events_per_day", "events a day over all sites")
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
    _fault_arguments(p)


def _fault_arguments(p: argparse.ArgumentParser) -> None:
    """The faults, limits, clock and dialect that :class:`~surveillance.Emulator`'s methods
    set, as flags, so that a pipeline test can start the emulator as a process of its own."""
    g = p.add_argument_group(
        "faults and behaviour",
        "what sv.Emulator's set_faults, outage, set_limits, set_semantics, set_dialect, "
        "set_webhook, set_token_lifetime and advance_clock set, applied at start",
    )
    g.add_argument("--start", default=_DATA["start"], help="first day of events (%(default)s)")
    g.add_argument("--latency-ms", type=int, default=0, help="added before every answer")
    g.add_argument("--tls", action="store_true", help="serve HTTPS; prints SURVEILLANCE_CA_BUNDLE")
    for name, help in (
        ("error_rate", "probability of a 500 or 503 answer"),
        ("rate_limit_rate", "probability of a 429 whatever the load"),
        ("drop_rate", "probability that a connection is closed without an answer"),
        ("corrupt_rate", "probability that an events page holds a mistyped event"),
    ):
        g.add_argument("--" + name.replace("_", "-"), type=float, default=0.0, help=help)
    g.add_argument(
        "--retry-after", type=int, default=0, metavar="S", help="Retry-After of the injected 429s"
    )
    g.add_argument(
        "--token-endpoint-faults",
        action="store_true",
        help="the injected errors, 429s and drops apply to the token endpoint too",
    )
    g.add_argument(
        "--outage",
        type=float,
        default=0.0,
        metavar="S",
        help="close the port for S seconds once --outage-after requests have come",
    )
    g.add_argument("--outage-after", type=int, default=0, metavar="N", help="(default 0)")
    for name, kind in (
        ("read_per_second", float),
        ("read_concurrency", int),
        ("publish_per_second", float),
        ("publish_concurrency", int),
    ):
        g.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=None,
            help="a limit the emulator enforces with 429s (as set_limits; printed for clients)",
        )
    g.add_argument("--order", choices=("asc", "desc", "shuffled"), default="asc")
    g.add_argument("--bounds", choices=("[)", "[]", "()", "(]"), default="[)")
    g.add_argument(
        "--dialect",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of set_dialect (repeatable): " + ", ".join(sorted(Emulator.DIALECTS)),
    )
    g.add_argument(
        "--no-webhook-arrays",
        action="store_true",
        help="refuse JSON arrays on the webhook (set_webhook(arrays=False))",
    )
    g.add_argument("--token-lifetime", type=int, default=None, metavar="S", help="expires_in")
    g.add_argument(
        "--advance-clock",
        type=float,
        default=0.0,
        metavar="S",
        help="move the emulator's clock by S seconds at start (its Date and its quota's day)",
    )


def _dialect(items: list[str]) -> dict[str, Any]:
    """``["webhook_answer=no_content", "token_requests=3"]`` as set_dialect's keywords."""
    dialect: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in Emulator.DIALECTS:
            raise ValueError(
                f"--dialect takes NAME=VALUE, NAME one of {', '.join(sorted(Emulator.DIALECTS))}; "
                f"got `{item}`"
            )
        dialect[name] = int(value) if name == "token_requests" else value
    return dialect


def _configure(emu: Emulator, args: argparse.Namespace) -> None:
    """Applies the flags of :func:`_fault_arguments` to `emu`."""
    if args.daily_requests < 0:
        raise ValueError("--daily-requests must be 0 (no quota) or more")
    rates = ("read_per_second", "read_concurrency", "publish_per_second", "publish_concurrency")
    limits: dict[str, Any] = {name: getattr(args, name) for name in rates}
    if args.provider_limits:
        published = asdict(Limits(daily_requests=args.daily_requests or Limits.daily_requests))
        limits = {k: published[k] if v is None else v for k, v in {**published, **limits}.items()}
        limits["daily_requests"] = published["daily_requests"]
    elif args.daily_requests:
        limits["daily_requests"] = args.daily_requests
    if any(v is not None for v in limits.values()):
        emu.set_limits(**limits)
    emu.set_faults(
        error_rate=args.error_rate,
        rate_limit_rate=args.rate_limit_rate,
        drop_rate=args.drop_rate,
        corrupt_rate=args.corrupt_rate,
        retry_after=args.retry_after,
        token_endpoint=args.token_endpoint_faults,
    )
    emu.set_semantics(order=args.order, bounds=args.bounds)
    if args.dialect:
        emu.set_dialect(**_dialect(args.dialect))
    if args.no_webhook_arrays:
        emu.set_webhook(arrays=False)
    if args.token_lifetime is not None:
        emu.set_token_lifetime(args.token_lifetime)
    if args.advance_clock:
        emu.advance_clock(args.advance_clock)
    if args.outage:
        emu.outage(args.outage, args.outage_after)


def _emulator(args: argparse.Namespace) -> int:
    emu = Emulator(
        seed=args.seed,
        sites=args.sites,
        days=args.days,
        events_per_day=args.events_per_day,
        latency_ms=args.latency_ms,
        start=args.start,
        port=args.port,
        tls=args.tls,
    )
    try:
        _configure(emu, args)
    except BaseException:
        emu.stop()
        raise
    # Ctrl-C at any point from here on (even while the variables are printed) stops the
    # emulator cleanly: it is how this command is meant to end.
    try:
        # Lines a shell runs as they are: `export`s, the rest comments. The clients' limits
        # and daily quota are the emulator's (`Emulator.env`): none unless it enforces some,
        # so that commands run against it are as quick as `emu.client()` and never stop on
        # the published 2,400 (its requests are counted apart from a real service's, in a
        # ledger of its own base URL).
        print(f"# surveillance emulator {__version__}: serving until Ctrl-C")
        for name, value in emu.env().items():
            print(f"export {name}={shlex.quote(value)}")
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
    _data_argument(p, "sites", "sites in the emulator")
    _data_argument(p, "events_per_day", "events a day")
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
