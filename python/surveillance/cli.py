"""The ``surveillance`` command line.

Each subcommand is two functions, ``_x_arguments(parser)`` (adds its options) and ``_x(args)``
(runs it and returns the exit status), registered in one place: :data:`COMMANDS`. A command
that talks to the service adds :func:`_client_arguments` to its options and gets its client
from :func:`_client` (credentials from the options or the ``SURVEILLANCE_*`` variables).

Expected errors print one line, ``surveillance: error: ...``, without a traceback: a usage or
configuration error (:class:`ConfigError`, such as a missing credential, or another
``ValueError`` from a bad argument) exits 2, like argparse's own; a failure of the service,
the network or a file (:class:`SurveillanceError`, ``OSError``) exits 1; the day's request
quota (:class:`QuotaExhaustedError`, or a sync stopped by it) exits 75; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime as dt
import itertools
import json
import logging
import math
import os
import re
import shlex
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Optional

from . import __version__, _config, _core, _records, _store, analysis
from ._output import write_parquet
from ._progress import make as _progress_bar
from ._time import RELATIVE, relative, to_ms
from ._writers import (
    _EVENT_COLUMNS,
    _FORMATS,
    _LOCAL_COLUMN,
    _format,
    _print_table,
    _pyarrow,
    _Target,
    _utc,
    _writable,
    _writable_dir,
    _write_rows,
)
from .client import Client, Limits
from .emulator import Emulator
from .errors import ConfigError, QuotaExhaustedError, SurveillanceError

# --- shared options -------------------------------------------------------------------
#: Client settings a command line may give: (option, Client argument, variable, help), from
#: the one table of settings (:data:`surveillance._config.SETTINGS`).
_SETTINGS = [(x.flag, x.name, x.variable, x.help) for x in _config.SETTINGS]
#: Settings without which no request can be made (the others have defaults).
_REQUIRED = ("base_url", "api_key", "client_id", "client_secret")
#: Exit status of a command stopped by the day's request quota (``EX_TEMPFAIL`` of sysexits:
#: run it again later; ``surveillance quota`` says when the quota comes back).
EXIT_QUOTA = 75
#: The exit statuses, in ``--help``.
_EXIT_STATUSES = """exit status:
  0    success
  1    the service, the network or a file failed
  2    a usage or configuration error (a missing credential, a bad time)
  75   stopped by the day's request quota: nothing more could be sent today (a sync resumes
       where it stopped on its next run; `surveillance quota` says when the quota comes back)
  130  interrupted (Ctrl-C)"""


def _connection_arguments(p: argparse.ArgumentParser, *, shown: bool) -> None:
    """Adds ``--profile`` and the option of every setting. The top-level parser shows them
    (``surveillance --profile p sites``); a command accepts them after its name too, without
    showing them in its help and without overriding the ones given before it."""
    if shown:
        group = p.add_argument_group(
            "connection and configuration (before the command)",
            "each option overrides its environment variable, shown in brackets, which "
            "overrides the profile of the config file, then its [default] table "
            "(`surveillance config` shows where each setting comes from)",
        )
        extra: dict[str, Any] = {"default": None}
    else:
        group = p.add_argument_group("connection")
        extra = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
    group.add_argument(
        "--profile",
        metavar="NAME",
        **{"help": f"the profile of the config file to use [{_config.PROFILE_VARIABLE}]", **extra},
    )
    for setting in _config.SETTINGS:
        default = "" if setting.default is None else f" (default {setting.default})"
        if isinstance(setting.default, (int, float)):
            default = f" (default {setting.default:g})"
        help_text = f"{setting.help}{default} [{setting.variable}]"
        # Checked with the other places' values (`_given`): a bad one is one line, exit 2.
        choices = {"choices": _core.REGIONS, "type": str.lower} if setting.name == "region" else {}
        group.add_argument(
            setting.flag,
            dest=setting.name,
            metavar=None if choices else "VALUE",
            **{"help": help_text, **choices, **extra},
        )


def _client_arguments(p: argparse.ArgumentParser, *, publish: bool = False) -> None:
    """Marks a command that talks to the service: it accepts the connection options (given
    before the command, or after it for compatibility)."""
    _connection_arguments(p, shown=False)
    p.epilog = (
        "the connection and configuration options (the profile, the service's address, the "
        "rates) are given before the command: `surveillance --help`; `surveillance config` "
        "shows the settings in effect"
    )


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as options (None: not given), checked as the table says."""
    given = {}
    for setting in _config.SETTINGS:
        value = getattr(args, setting.name, None)
        if value is not None:
            try:
                value = setting.check(value)
            except ValueError as e:
                raise ConfigError(f"{setting.flag} {e}") from None
        given[setting.name] = value
    return given


def _client(args: argparse.Namespace) -> Client:
    """A :class:`Client` from the options, the environment and the config file, resolved as
    the library resolves them; a missing credential is a :class:`ConfigError` naming the
    option and the variable."""
    profile = getattr(args, "profile", None)
    resolved = _config.resolve(_given(args), profile=profile)
    for option, dest, variable, _ in _SETTINGS:
        if dest in _REQUIRED and resolved[dest].value is None:
            raise ConfigError(
                f"{dest.replace('_', ' ')} is missing: set {variable} or pass {option}"
            )
    # 0 is "no limit".
    limits = Limits(**{f.name: resolved[f.name].value or None for f in fields(Limits)})
    given = {k: v for k, v in _given(args).items() if k not in limits.__dict__}
    return Client(limits=limits, profile=profile, **given)


def _progress(args: argparse.Namespace) -> Any:
    """The ``progress`` argument of a long call: ``--no-progress`` turns the bar off; otherwise
    a bar on a terminal, none when stderr is redirected."""
    return False if getattr(args, "no_progress", False) else "auto"


# --- config ---------------------------------------------------------------------------
def _config_arguments(p: argparse.ArgumentParser) -> None:
    _client_arguments(p)


def _config_show(args: argparse.Namespace) -> int:
    """Prints each effective setting, its value (secrets masked) and where it came from, as
    ``aws configure list`` does; sends no request."""
    profile = getattr(args, "profile", None)
    resolved = _config.resolve(_given(args), profile=profile)
    path = _config.config_file()
    origins = {"argument": "option", "environment": "env"}
    rows = []
    for setting in _config.SETTINGS:
        value, origin = resolved[setting.name]
        where = origins.get(origin, origin)
        if origin == "environment":
            where = f"env {setting.variable}"
        elif origin == "argument":
            where = f"option {setting.flag}"
        elif origin != "default":
            where = f"{origin} ({path})"
        shown = _config.shown(setting, value)
        if setting.name == "cache":
            shown = _cache_rule(value, resolved["base_url"].value)
        rows.append((setting.name, shown, where))
    chosen = profile or os.environ.get(_config.PROFILE_VARIABLE) or "-"
    print(f"config file: {path}{'' if os.path.exists(path) else ' (none)'}")
    print(f"profile: {chosen}")
    width = max(len(r[0]) for r in rows)
    value_width = min(40, max(len(r[1]) for r in rows))
    for name, shown, where in rows:
        print(f"  {name:<{width}}  {shown:<{value_width}}  {where}")
    return 0


def _cache_rule(value: Optional[str], base_url: Optional[str]) -> str:
    """Whether the cache is on, in words: the rule of ``Client(cache=...)``."""
    if value is None:
        host = (base_url or "").split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
        if host in ("localhost", "127.0.0.1", "[::1]") or host.startswith("127."):
            return "off (loopback base URL; set cache = 1 to keep one)"
        return "on (the user's cache directory)"
    word = value.strip().lower()
    if word in ("0", "false", "off", "no"):
        return f"off ({value})"
    if word in ("1", "true", "on", "yes"):
        return f"on ({value}: the user's cache directory)"
    return f"on, in {value}"


# --- emulator -------------------------------------------------------------------------
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
def _output_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE, in the format of its suffix: .parquet, .csv or .jsonl; FILE may "
        "be a URI that pyarrow opens, such as s3://bucket/key.parquet "
        "(default: a table on a terminal, JSON Lines when stdout is piped)",
    )
    p.add_argument("--format", choices=_FORMATS, help="the output format, whatever the suffix")


# --- quota ----------------------------------------------------------------------------
def _quota_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object instead of the lines")
    _client_arguments(p)


def _quota(args: argparse.Namespace) -> int:
    """Prints where the day's request quota of the key and service stands, read from this
    machine's ledger: no request is sent."""
    client = _client(args)
    q = client.quota()
    resets = q["resets_at"].astimezone(dt.timezone.utc)
    if args.json:
        shown = dict(q, resets_at=resets.strftime("%Y-%m-%dT%H:%M:%SZ"))
        print(json.dumps(shown))
        return 0
    left = max(0, int((resets - dt.datetime.now(dt.timezone.utc)).total_seconds()) // 60)
    limit = q["limit"]
    rows = [
        ("limit", "none (--daily-requests 0)" if limit is None else f"{limit:,} requests a day"),
        ("used", f"{q['used']:,} today (the service's UTC day)"),
        ("remaining", "no limit" if q["remaining"] is None else f"{q['remaining']:,}"),
        ("resets at", f"{resets:%Y-%m-%d %H:%M} UTC (in {left // 60} h {left % 60:02d} min)"),
    ]
    print(f"daily request quota of this API key at {client._inner.base_url.rstrip('/')}")
    for name, value in rows:
        print(f"  {name:<10} {value}")
    print("  counted by every client of this machine (other machines with the key count apart)")
    return 0


# --- events ---------------------------------------------------------------------------
#: The forms of a time option, in its help.
_TIMES = "ISO-8601 time or date (UTC if naive), or now, today, yesterday, -7d, -2h, -30m"


def _when(text: str) -> str:
    """A time option's value: a relative time (``now``, ``today``, ``yesterday``, ``-7d``:
    see :func:`._time.relative`) as the ISO-8601 UTC instant it names; other text as it is
    (the library checks it)."""
    at = relative(text)
    if at is None:
        return text
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _relative_values(argv: list[str]) -> list[str]:
    """``argv`` with each relative time after an option joined to it (``--start -7d`` becomes
    ``--start=-7d``): argparse takes a value that starts with ``-`` for an option."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in ("--start", "--end", "--until") and RELATIVE.fullmatch(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _limit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--limit",
        type=_limit,
        metavar="N",
        help="at most N rows, the first ones (events: in time order; the fetch stops there)",
    )


def _limit(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a number of rows, 1 or more, got {text!r}")
    return n


def _events_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start", required=True, type=_when, help=f"{_TIMES}; inclusive")
    p.add_argument("--end", required=True, type=_when, help=f"{_TIMES}; exclusive")
    p.add_argument("--report", metavar="ID", help="only the events of this report")
    _output_arguments(p)
    _limit_argument(p)
    p.add_argument(
        "--local-time",
        action="store_true",
        help=f"CSV and the table: add {_LOCAL_COLUMN}, the start at the site's wall clock with "
        "its UTC offset (times are otherwise in UTC, ending in Z)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    _client_arguments(p)


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start", required=True, type=_when, help=f"{_TIMES}; inclusive")
    p.add_argument("--end", required=True, type=_when, help=f"{_TIMES}; exclusive")
    p.add_argument("--report", metavar="ID", help="only the events of this report")
    p.add_argument(
        "--no-progress", action="store_true", help="no bar of the count, even on a terminal"
    )
    _client_arguments(p)


def _plan(args: argparse.Namespace) -> int:
    """Prints what fetching the events of the range would cost, in one line (with a bar of
    the count's requests on a terminal while it counts)."""
    client = _client(args)
    print(client.plan_events(args.start, args.end, args.report, progress=_progress(args)))
    quota = client.quota()
    if quota["limit"] is not None:
        print(
            f"quota today: {quota['used']:,} of {quota['limit']:,} requests used, "
            f"{quota['remaining']:,} left, back at {quota['resets_at']:%Y-%m-%d %H:%M} UTC"
        )
    return 0


def _write_events_parquet(
    client: Client,
    start: Any,
    end: Any,
    report: Optional[str],
    target: _Target,
    progress: Any,
    written: Optional[list[int]] = None,
    limit: Optional[int] = None,
) -> int:
    """Streams the events to Parquet, one row group per window, with bounded memory (through
    pyarrow when it is installed; in Rust otherwise), the progress bar drawn before the first
    request and moved by the fetch itself; ``written[0]`` follows the events written so far."""
    callback, close = _progress_bar(progress, "events", client.quota()["limit"])
    try:
        pa, pq = _pyarrow()
    except ImportError:
        if limit:
            close()
            raise ImportError("--limit with Parquet needs pyarrow: pip install pyarrow") from None
        try:
            return write_parquet(client.event_batches(start, end, report, callback), target.name)
        finally:
            close()
    count = 0
    try:
        reader = pa.RecordBatchReader.from_stream(
            client.event_batches(start, end, report, callback)
        )
        with pq.ParquetWriter(target.name, reader.schema) as writer:
            for batch in reader:
                if limit is not None and count + batch.num_rows >= limit:
                    batch = batch.slice(0, limit - count)
                writer.write_batch(batch)
                count += batch.num_rows
                if written is not None:
                    written[0] = count
                if limit is not None and count >= limit:
                    break  # the first `limit`: the fetch stops with its reader
    except pa.ArrowException as e:
        # An error of the client (refused request, network ...) reaches here through the
        # Arrow C stream, which keeps its message but not its type.
        message = re.sub(r"^(internal|external) error: ", "", str(e), flags=re.I)
        raise SurveillanceError(message) from None
    finally:
        close()
    return count


def _export_events(
    client: Client,
    start: Any,
    end: Any,
    report: Optional[str],
    fmt: str,
    path: Optional[str],
    progress: Any,
    local: bool = False,
    limit: Optional[int] = None,
) -> int:
    """Writes the events of ``[start, end)`` to ``path`` (or stdout) as ``fmt`` (CSV with
    ``localStartTime`` when ``local``; the first ``limit`` alone when given)."""
    target = _Target(path, binary=fmt == "parquet")
    written = [0]
    before = client._sent()
    try:
        if fmt == "parquet":
            count = _write_events_parquet(
                client, start, end, report, target, progress, written, limit
            )
        else:
            header = None if fmt == "jsonl" else [*_EVENT_COLUMNS]
            if header is not None and local:
                header.append(_LOCAL_COLUMN)
            events = client.iter_events(start, end, report, progress=progress)
            if limit:
                events = itertools.islice(events, limit)
            count = _write_rows(target, fmt, _counted(events, written), header)
        target.commit()
    except KeyboardInterrupt:
        target.discard()
        if path is None:
            raise
        if target.committed:
            raise KeyboardInterrupt(f"{_store.shown(path)} was written whole before it") from None
        spent = client._sent() - before
        raise KeyboardInterrupt(_thrown_away(path, written[0], spent, start, end, report)) from None
    except BaseException:
        target.discard()
        raise
    return count


def _counted(records: Any, count: list[int]) -> Any:
    """``records``, counting in ``count[0]`` those taken."""
    for record in records:
        count[0] += 1
        yield record


def _thrown_away(
    path: str, events: int, requests: int, start: Any, end: Any, report: Optional[str]
) -> str:
    """What Ctrl-C during an export to ``path`` threw away, and the command that keeps what
    it fetches."""
    spent = f" ({requests:,} requests)" if requests else ""
    fetched = f"the {events:,} events fetched{spent}" if events else f"what was fetched{spent}"
    again = " ".join(
        ["surveillance sync DIR --start", shlex.quote(str(start)), "--until", shlex.quote(str(end))]
        + (["--report", shlex.quote(report)] if report else [])
    )
    return (
        f"{_store.shown(path)} not written, {fetched} thrown away; `{again}` keeps each part "
        "it fetches and resumes where it stopped"
    )


def _events(args: argparse.Namespace) -> int:
    fmt = _format(args)
    if args.local_time and fmt not in ("csv", "table"):
        raise ValueError(f"--local-time adds a column to CSV and the table, not to {fmt}")
    client = _client(args)
    progress = _progress(args)
    if fmt == "table":
        sites = {s["id"]: s.get("name") for s in client.sites()}
        if args.limit:
            # The first ones: the fetch stops once it has them.
            found = client.iter_events(args.start, args.end, args.report, progress=progress)
            events = list(itertools.islice(found, args.limit))
        else:
            events = client.events(args.start, args.end, args.report, progress=progress)
        local = [_LOCAL_COLUMN] if args.local_time else []
        rows = [
            [
                _utc(e.get("startTime")),
                *[e.get("startTime") for _ in local],
                (e.get("details") or {}).get("duration_sec"),
                e.get("title"),
                e.get("subtitle"),
                sites.get(e.get("siteId"), e.get("siteId")),
            ]
            for e in events
        ]
        _print_table(rows, ["startTime", *local, "duration_sec", "title", "subtitle", "site"])
        return 0
    with client._meter():
        count = _export_events(
            client,
            args.start,
            args.end,
            args.report,
            fmt,
            args.output,
            progress,
            args.local_time,
            args.limit,
        )
    if args.output:
        print(f"wrote {count:,} events to {_store.shown(args.output)}: {client.last_cost}")
    elif sys.stderr.isatty():
        # Piped data goes to stdout alone; the cost is said where a person reads it.
        print(f"surveillance: {count:,} events: {client.last_cost}", file=sys.stderr)
    return 0


# --- sync -----------------------------------------------------------------------------
def _sync_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        metavar="DIR",
        help="the dataset directory (created if needed), or a URI that pyarrow opens, such as "
        "s3://bucket/prefix",
    )
    p.add_argument(
        "--start", required=True, type=_when, help=f"first instant of the dataset: {_TIMES}"
    )
    p.add_argument(
        "--until", type=_when, help="end of the range, exclusive, as --start (default: now)"
    )
    p.add_argument("--report", metavar="ID", help="only the events of this report")
    p.add_argument(
        "--settle",
        default="1h",
        help="how long after its start an event may still be created, fetched again on each "
        "run: 1h, 30m, 2d or seconds (default 1h)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    _client_arguments(p)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _EXIT_STATUSES


def _sync(args: argparse.Namespace) -> int:
    _writable_dir(args.dir, "DIR")
    client = _client(args)
    result = client.sync_events(
        args.dir,
        args.start,
        report_id=args.report,
        until=args.until,
        settle=args.settle,
        progress=_progress(args),
    )
    print(f"{_store.shown(args.dir)}: {result}")
    print(f"cost: {client.last_cost}")
    if not result.complete:
        # A cron job tells "stopped by the quota" from "done" by the status.
        print(
            f"surveillance: stopped by the day's request quota (exit status {EXIT_QUOTA}): "
            "the next run goes on from there",
            file=sys.stderr,
        )
        return EXIT_QUOTA
    return 0


# --- validate, publish ----------------------------------------------------------------
#: Problems (or failures) listed on the terminal before "... and N more".
_SHOWN = 50


#: The FILE argument of the commands that read records (one reader: :mod:`._records`).
_RECORDS_FILE = (
    f"a file of records: {_records.ACCEPTED} (a header of field names, one record a row; "
    "nested fields such as items as JSON)"
)


def _validate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=_RECORDS_FILE)
    p.add_argument("--strict", action="store_true", help="warnings fail too (exit status 1)")


def _validate(args: argparse.Namespace) -> int:
    from .publish import validate

    records = errors = warnings = bad = 0
    shown = 0
    for number, record in _records.read(args.file):
        records += 1
        if isinstance(record, ValueError):
            problems = [("error", "", str(record))]
        else:
            problems = [(p.severity, p.path, p.message) for p in validate(record)]
        found_error = False
        for severity, path, message in problems:
            if severity == "error":
                errors += 1
                found_error = True
            else:
                warnings += 1
            if shown < _SHOWN:
                where = f"{path}: " if path else ""
                print(f"{args.file}: {number}: {severity}: {where}{message}")
            shown += 1
        if found_error or (args.strict and problems):
            bad += 1
    if shown > _SHOWN:
        print(f"... and {shown - _SHOWN:,} more problems")
    print(
        f"{records:,} records: {records - bad:,} valid, {bad:,} not "
        f"({errors:,} errors, {warnings:,} warnings)"
    )
    return 1 if bad else 0


def _batch_size(text: str) -> Any:
    """``auto`` or an int (the client checks its range)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be auto or a number, got {text!r}") from None


def _publish_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=_RECORDS_FILE)
    p.add_argument(
        "--batch-size",
        type=_batch_size,
        default="auto",
        metavar="N",
        help="records per request: auto (default: arrays of 100, one per request if the "
        "service refuses arrays), 1 (one object per body) or 2 to 100 (arrays)",
    )
    p.add_argument(
        "--failures",
        metavar="PATH",
        help="write the records not accepted here (JSON Lines), ready to publish again",
    )
    p.add_argument(
        "--no-validate", action="store_true", help="send records without checking them first"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    _client_arguments(p, publish=True)


def _publish(args: argparse.Namespace) -> int:
    from .publish import PublishInterrupted, PublishReport

    _records.check(args.file)
    if args.failures:
        _writable(args.failures, "--failures")
    client = _client(args)
    status = 0
    stopped: Optional[QuotaExhaustedError] = None
    try:
        report = client.publish(
            args.file,
            batch_size=args.batch_size,
            validate=not args.no_validate,
            progress=_progress(args),
        )
    except PublishInterrupted as e:
        if e.report is None:
            raise
        report, status = e.report, 130
    except QuotaExhaustedError as e:
        # A publish the quota stopped hands its partial report on the error.
        partial: Optional[PublishReport] = getattr(e, "report", None)
        if partial is None:
            raise
        report, stopped = partial, e
    # After Ctrl-C or the quota, the records merely not reached yet are counted, not listed
    # (the reason is said once, below).
    listed = [f for f in report.failures if f.kind not in ("interrupted", "not sent")]
    for failure in listed[:_SHOWN]:
        print(f"{args.file}: {failure}")
    if len(listed) > _SHOWN:
        print(f"... and {len(listed) - _SHOWN:,} more")
    if stopped is not None:
        shown = copy.copy(report)
        shown.error = None  # the error line below says it
        print(shown.summary())
    else:
        print(report.summary())
    print(f"cost: {client.last_cost}")
    if args.failures and (report.failures or report.interrupted or report.unread):
        n = report.write_failures(args.failures)
        print(f"wrote {n:,} records not accepted to {args.failures}")
    if stopped is not None:
        raise stopped  # one line, and its exit status, from main()
    if status:
        print("surveillance: interrupted", file=sys.stderr)
        return status
    return 0 if report.ok else 1


# --- sites, devices, cameras, reports ---------------------------------------------------
#: The columns of the terminal table of each list.
_LIST_COLUMNS = {
    "sites": ["id", "name", "timezone", "locationTags", "deviceCount", "cameraCount", "status"],
    "devices": ["id", "name", "siteId", "status", "totalCameras"],
    "cameras": ["id", "name", "siteId", "deviceId", "status", "manufacturer", "model"],
    "reports": ["id", "name", "description"],
}


def _list_arguments(p: argparse.ArgumentParser) -> None:
    _output_arguments(p)
    _limit_argument(p)
    _client_arguments(p)


def _filter_option(keyword: str) -> str:
    """The option of a list's filter: ``site_id`` is ``--site``."""
    return keyword.removesuffix("_id")


def _list_command(spec: dict[str, Any]) -> Command:
    """The command of one list of the core's table (``_core.LISTS``)."""
    kind = spec["name"]

    def arguments(p: argparse.ArgumentParser) -> None:
        for keyword in spec["filters"]:
            thing = _filter_option(keyword)
            p.add_argument(f"--{thing}", metavar="ID", help=f"only the {kind} of this {thing}")
        _list_arguments(p)

    def run(args: argparse.Namespace) -> int:
        return _list(kind, spec["filters"], args, spec["columns"])

    return Command(kind, spec["about"], arguments, run)


def _list(kind: str, filters: list[str], args: argparse.Namespace, order: list[str]) -> int:
    """Writes a list (``order``: the columns of its table, which CSV keeps)."""
    fmt = _format(args)
    client = _client(args)
    extra = tuple(getattr(args, _filter_option(k)) for k in filters)
    fetch = getattr(client, kind)
    if fmt == "parquet":
        _, pq = _pyarrow()
        table = fetch(*extra, output="arrow")  # a pyarrow.Table: pyarrow is installed
        if args.limit:
            table = table.slice(0, args.limit)
        target = _Target(args.output, binary=True)
        try:
            pq.write_table(table, target.name)
            target.commit()
        except BaseException:
            target.discard()
            raise
        count = table.num_rows
    elif fmt == "table":
        records = fetch(*extra)[: args.limit]
        columns = _LIST_COLUMNS.get(kind) or list(dict.fromkeys(k for r in records for k in r))
        _print_table([[r.get(c) for c in columns] for r in records], columns)
        return 0
    else:
        target = _Target(args.output)
        try:
            count = _write_rows(target, fmt, fetch(*extra)[: args.limit], order=order)
            target.commit()
        except BaseException:
            target.discard()
            raise
    if args.output:
        print(f"wrote {count:,} {kind} to {_store.shown(args.output)}: {client.last_cost}")
    return 0


# --- demo -----------------------------------------------------------------------------
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
        help="the chart, when matplotlib is installed (default dwell.png; '' for none)",
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


def _plot(path: str, brands: list[Any], hours: list[Any], durations: list[Any]) -> Any:
    """Draws the median dwell time by local hour, one line per brand, above the number of
    events each point rests on; returns the figure, or None without matplotlib."""
    try:
        from matplotlib.figure import Figure
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
        if _plot(args.plot, brands, hours, durations):
            print(
                f"wrote {args.plot} (median dwell time by local hour, per brand, over the "
                "events each point rests on)"
            )
        else:
            print(f"pip install 'surveillance[plot]' to also draw {args.plot}")
    return 0


# --- cache ----------------------------------------------------------------------------
def _cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("info", "clear"),
        help="info: what the cache of settled events holds; clear: empty it",
    )
    p.add_argument(
        "--dir",
        metavar="DIR",
        help="the cache directory, as `cache=` names it (default: SURVEILLANCE_CACHE when it "
        "names one, else the user's cache directory's); clear refuses one that the cache did "
        "not mark as its own (CACHEDIR.TAG)",
    )
    p.add_argument("--json", action="store_true", help="info: one JSON object instead of lines")


def _cache(args: argparse.Namespace) -> int:
    """Shows or empties the cache of settled events; no request is sent."""
    from . import _core

    where = args.dir if args.dir else _core.cache_location()
    if where is None:
        raise ValueError("no cache directory: pass --dir DIR or set SURVEILLANCE_CACHE")
    # The cache's root: `where`, or the cache's own folder in it (a file is refused).
    info = _core.cache_info_at(where)
    if args.action == "clear":
        removed = _core.clear_cache_at(where)
        print(f"removed {removed:,} cached window{'' if removed == 1 else 's'} from {info['path']}")
        return 0
    if args.json:
        print(json.dumps(info))
        return 0

    def when(ms: int) -> str:
        return f"{dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc):%Y-%m-%d %H:%M:%S}"

    print(
        f"cache of settled events at {info['path']}: {info['files']:,} files, "
        f"{info['bytes']:,} bytes"
    )
    for e in info["entries"]:
        report = f" report {e['report_id']}" if e["report_id"] else ""
        print(
            f"  {e['base_url'] or '(unknown service)'} account {e['account'][:12]}"
            f" {e['endpoint']}{report}: {e['events']:,} events, {e['bytes']:,} bytes"
        )
        for lo, hi in e["ranges"]:
            print(f"    {when(lo)} to {when(hi)} UTC")
    return 0


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
        "events",
        "events of a time range: a table, or .parquet/.csv/.jsonl",
        _events_arguments,
        _events,
    ),
    Command(
        "plan",
        "what fetching the events of a range would cost (events, requests, time, quota)",
        _plan_arguments,
        _plan,
    ),
    Command(
        "quota",
        "where the day's request quota stands (limit, used, remaining, reset), sending nothing",
        _quota_arguments,
        _quota,
    ),
    Command(
        "sync",
        "bring a Parquet dataset of events up to date, fetching only what it lacks",
        _sync_arguments,
        _sync,
    ),
    Command(
        "validate",
        "check a file of webhook records (.jsonl, .parquet, .csv) against their standard models",
        _validate_arguments,
        _validate,
    ),
    Command(
        "publish",
        "post a file of records (.jsonl, .parquet, .csv) to the webhook, fast, reporting "
        "every failure",
        _publish_arguments,
        _publish,
    ),
    *(_list_command(spec) for spec in _core.LISTS),
    Command(
        "cache",
        "show (info) or empty (clear) the cache of settled events",
        _cache_arguments,
        _cache,
    ),
    Command(
        "emulator", "run the emulator and print its credentials", _emulator_arguments, _emulator
    ),
    Command(
        "config",
        "show each effective setting and where it comes from (secrets masked)",
        _config_arguments,
        _config_show,
    ),
    Command(
        "demo",
        "start an emulator, export a week of events, summarise dwell time",
        _demo_arguments,
        _demo,
    ),
]


_DEBUG_HELP = "log the requests, retries and token renewals on stderr (the `surveillance` logger)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="surveillance",
        description="Client for a video-surveillance cloud API, and a local emulator of it.",
        epilog=_EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"surveillance {__version__}")
    parser.add_argument("-v", "--debug", action="store_true", help=_DEBUG_HELP)
    _connection_arguments(parser, shown=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(p)
        # Also after the command; SUPPRESS keeps a -v given before it.
        p.add_argument(
            "-v", "--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP
        )
        p.set_defaults(run=command.run)
    return parser


#: Python arguments named in the messages of the library, and the CLI's words for them (a
#: command's own words first).
_FLAGS = {
    **{dest: option for option, dest, _, _ in _SETTINGS},
    "report_id": "--report",
    "site_id": "--site",
    "device_id": "--device",
    "start": "--start",
    "end": "--end",
    "until": "--until",
    "settle": "--settle",
    "records": "FILE",
    "batch_size": "--batch-size",
    "timeout": "--timeout",
    "max_outage": "--max-outage",
    "ca_bundle": "--ca-bundle",
}
_COMMAND_FLAGS = {"sync": {"path": "DIR"}, "events": {"path": "-o"}}


def _cli_words(message: str, args: argparse.Namespace) -> str:
    """``message`` with the CLI's words: the option (or, when the value came from it, the
    variable) in place of each Python argument it names."""
    flags = {**_FLAGS, **_COMMAND_FLAGS.get(args.command, {})}

    def word(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"`{flags[name]}`" if name in flags else m.group(0)

    # The library's way to sync is the command's: `surveillance sync`.
    message = message.replace("`sync_events`, `surveillance sync`", "`surveillance sync`")
    message = message.replace("`sync_events`", "`surveillance sync`")
    message = re.sub(r"`([a-z_]+)=?`", word, message)
    message = re.sub(r"`Limits\(([a-z_]+)=\.\.\.\)`", word, message)  # the quota's
    # A file's temporary name is the writer's business: say the user's.
    return re.sub(r"\.partial\b", "", message)


class _LogLines(logging.Filter):
    """Lines of the `surveillance` logger on the terminal, prefixed as errors are. Without
    ``debug``, a "giving up" warning is left out: the error line that follows says it."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        record.level = record.levelname.lower()
        return self.debug or not record.getMessage().startswith("giving up")


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]  # generic in the stubs only
    """A handler that writes to ``sys.stderr`` as it is when a line comes (as Python's own
    last-resort handler does), so that ``main()`` called in a process that swaps it (a test)
    never writes to a stream closed since."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


#: The handler :func:`_logging` gave the `surveillance` logger (one, however often ``main``
#: runs in a process).
_HANDLER: Optional[logging.Handler] = None


def _logging(debug: bool) -> None:
    """Sends the `surveillance` logger to stderr: every line from DEBUG with ``-v``, with the
    time; warnings otherwise (the logger's level is left as it is then)."""
    global _HANDLER
    logger = logging.getLogger("surveillance")
    if _HANDLER is not None:
        logger.removeHandler(_HANDLER)
    _HANDLER = _Stderr()
    _HANDLER.addFilter(_LogLines(debug))
    if debug:
        fmt = "%(asctime)s surveillance: %(level)s: %(message)s"
        logger.setLevel(logging.DEBUG)
    else:
        fmt = "surveillance: %(level)s: %(message)s"
        _HANDLER.setLevel(logging.WARNING)
    _HANDLER.setFormatter(logging.Formatter(fmt))
    logger.addHandler(_HANDLER)


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of the ``surveillance`` console script (and ``python -m surveillance``);
    returns the exit status."""
    args = build_parser().parse_args(_relative_values(sys.argv[1:] if argv is None else argv))
    _logging(args.debug)
    try:
        status: int = args.run(args)
        return status
    except ValueError as e:  # ConfigError, or a bad argument: a usage error
        print(f"surveillance: error: {_cli_words(str(e), args)}", file=sys.stderr)
        return 2
    except QuotaExhaustedError as e:  # nothing more can be sent today: try again later
        print(f"surveillance: error: {_cli_words(str(e), args)}", file=sys.stderr)
        return EXIT_QUOTA
    except BrokenPipeError:  # `surveillance events ... | head`: the reader has had enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 0
    except (SurveillanceError, OSError, ImportError) as e:
        print(f"surveillance: error: {_cli_words(str(e), args)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        # An export says what Ctrl-C threw away, and how not to lose it next time.
        said = f": {e.args[0]}" if e.args and isinstance(e.args[0], str) else ""
        print(f"surveillance: interrupted{said}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
