"""The ``sync`` command."""

from __future__ import annotations

import argparse
import sys

from .. import _store
from .._progress import _duration
from .._writers import (
    _writable_dir,
)
from ..sync import DEFAULT_SETTLE
from ._common import (
    _EXIT_STATUSES,
    _TIMES,
    EXIT_QUOTA,
    _client,
    _client_arguments,
    _progress,
    _when,
)

#: ``--settle``'s default, the readers' one, as the option reads it (``1h00m``).
_SETTLE = _duration(DEFAULT_SETTLE.total_seconds())


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
        default=_SETTLE,
        help="how long after its start an event may still be created, fetched again on each "
        f"run: 1h, 30m, 2d or seconds (default {_SETTLE})",
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
