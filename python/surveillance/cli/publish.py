"""The ``validate`` and ``publish`` commands."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .. import _records
from .._writers import (
    _writable,
)
from ..publish import PublishInterrupted, PublishReport, validate
from ._common import _client, _client_arguments, _progress

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
        help="write the records not accepted here (JSON Lines), ready to publish again, also "
        "when publishing stops early (an outage, the quota, a refusal of every body, Ctrl-C)",
    )
    p.add_argument(
        "--no-validate", action="store_true", help="send records without checking them first"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")
    _client_arguments(p, publish=True)


def _publish(args: argparse.Namespace) -> int:

    _records.check(args.file)
    if args.failures:
        _writable(args.failures, "--failures")
    client = _client(args)
    status = 0
    stopped: Optional[Exception] = None
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
    except Exception as e:
        # Whatever stopped a publish (the service unreachable past `--max-outage`, the day's
        # quota, credentials refused, a refusal found systematic) hands its partial report on
        # the error: the summary and the failures file come first, then the error's line and
        # its exit status, from main().
        partial = getattr(e, "report", None)
        if not isinstance(partial, PublishReport):
            raise
        report, stopped = partial, e
    # After a stop, the records merely not reached yet are counted, not listed (the reason is
    # said once, below).
    listed = [f for f in report.failures if f.kind not in ("interrupted", "not sent")]
    for failure in listed[:_SHOWN]:
        print(f"{args.file}: {failure}")
    if len(listed) > _SHOWN:
        print(f"... and {len(listed) - _SHOWN:,} more")
    summary = report.summary()
    if stopped is not None and report.error:
        summary = summary.removesuffix(f", stopped: {report.error}")  # the error line says it
    print(summary)
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
