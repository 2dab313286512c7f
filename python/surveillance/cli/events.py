"""The ``events`` and ``plan`` commands and the export of events to files."""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
import sys
from typing import Any, Optional

from .. import _store
from .._output import write_parquet
from .._progress import make as _progress_bar
from .._writers import (
    _EVENT_COLUMNS,
    _LOCAL_COLUMN,
    _format,
    _print_table,
    _pyarrow,
    _Target,
    _utc,
    _write_rows,
)
from ..client import Client
from ..errors import SurveillanceError
from ._common import (
    _TIMES,
    _client,
    _client_arguments,
    _limit_argument,
    _output_arguments,
    _progress,
    _when,
)


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
    with client._meter("events"):
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
