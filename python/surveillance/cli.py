"""The ``surveillance`` command line.

Each subcommand is two functions, ``_x_arguments(parser)`` (its options) and ``_x(args)``
(runs it, returns the exit status), registered in one place: :data:`COMMANDS`.
Expected errors (:class:`SurveillanceError`, ``ValueError``, ``OSError``) print one line,
``surveillance: error: ...``, and exit non-zero without a traceback; a missing or wrong
setting (:class:`ConfigError`) exits 2, like a usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import __version__
from .client import Client
from .emulator import Emulator
from .errors import ConfigError, SurveillanceError

# --- shared options -------------------------------------------------------------------
#: Client settings a command line may give: (option, Client argument, variable, help).
_SETTINGS = [
    ("--base-url", "base_url", "SURVEILLANCE_BASE_URL", "the service's address, without /v2"),
    ("--api-key", "api_key", "SURVEILLANCE_API_KEY", "the organization's API key"),
    ("--client-id", "client_id", "SURVEILLANCE_CLIENT_ID", "OAuth client id"),
    ("--client-secret", "client_secret", "SURVEILLANCE_CLIENT_SECRET", "OAuth client secret"),
    ("--eu-base-url", "eu_base_url", "SURVEILLANCE_EU_BASE_URL", "the EU webhook's address"),
    ("--region", "region", "SURVEILLANCE_REGION", "us or eu: where publish posts"),
    ("--audience", "audience", "SURVEILLANCE_AUDIENCE", "the token audience"),
]
#: Settings without which no request can be made (the others have defaults).
_REQUIRED = ("base_url", "api_key", "client_id", "client_secret")


def _client_arguments(p: argparse.ArgumentParser) -> None:
    """Adds the connection options; each defaults to its SURVEILLANCE_* variable."""
    group = p.add_argument_group(
        "connection", "each option defaults to its environment variable, shown in brackets"
    )
    for option, dest, variable, text in _SETTINGS:
        group.add_argument(option, dest=dest, metavar="VALUE", help=f"{text} [{variable}]")
    group.add_argument("--ca-bundle", metavar="PEM", help="extra trusted certificates")
    group.add_argument("--timeout", type=float, default=30.0, help="seconds per request")


def _client(args: argparse.Namespace) -> Client:
    """A :class:`Client` from the connection options and the environment; a missing
    credential is a :class:`ConfigError` naming the option and the variable."""
    for option, dest, variable, _ in _SETTINGS:
        if dest in _REQUIRED and not getattr(args, dest) and not os.environ.get(variable):
            raise ConfigError(
                f"{dest.replace('_', ' ')} is missing: set {variable} or pass {option}"
            )
    settings = {dest: getattr(args, dest) for _, dest, _, _ in _SETTINGS}
    return Client(ca_bundle=args.ca_bundle, timeout=args.timeout, **settings)


def _progress(args: argparse.Namespace) -> Any:
    """The ``progress`` argument of a long call: ``--no-progress`` turns the bar off; otherwise
    a bar on a terminal, none when stderr is redirected."""
    return False if getattr(args, "no_progress", False) else "auto"


# --- emulator -------------------------------------------------------------------------
def _emulator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8080, help="loopback port (0: any free one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sites", type=int, default=20)
    p.add_argument("--days", type=int, default=14)
    p.add_argument("--events-per-day", type=int, default=5000)


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


# --- demo -----------------------------------------------------------------------------
def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sites", type=int, default=20)
    p.add_argument("--events-per-day", type=int, default=5000)
    p.add_argument("-o", "--output", help="file to write (default events.parquet)")


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


# --- registry -------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """A subcommand: its name, one line of help, a function that adds its arguments to its
    parser, and the function that runs it and returns the exit status."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: Every subcommand, in the order ``surveillance --help`` lists them.
COMMANDS = [
    Command(
        "demo", "start an emulator, export a week of events, summarise", _demo_arguments, _demo
    ),
    Command(
        "emulator", "run the emulator and print its credentials", _emulator_arguments, _emulator
    ),
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="surveillance",
        description="Client for a video-surveillance cloud API, and a local emulator of it.",
    )
    parser.add_argument("--version", action="version", version=f"surveillance {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: Optional[list] = None) -> int:
    """Entry point of the ``surveillance`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as e:  # ConfigError, or a bad argument: a usage error
        print(f"surveillance: error: {e}", file=sys.stderr)
        return 2
    except (SurveillanceError, OSError) as e:
        print(f"surveillance: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("surveillance: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
