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
import logging
import os
import sys
from typing import Any, Optional

from .. import __version__, _core
from ..errors import QuotaExhaustedError, SurveillanceError, wording
from ._common import (
    _EXIT_STATUSES,
    _SETTINGS,
    EXIT_QUOTA,
    Command,
    _connection_arguments,
    _relative_values,
)
from .config import (
    _cache,
    _cache_arguments,
    _config_arguments,
    _config_show,
    _quota,
    _quota_arguments,
)
from .emulator import _demo, _demo_arguments, _emulator, _emulator_arguments
from .events import _events, _events_arguments, _plan, _plan_arguments
from .lists import _list_command
from .plot import _plot as _plot
from .publish import _publish, _publish_arguments, _validate, _validate_arguments
from .sync import _sync, _sync_arguments

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
    # The library's way to sync is the command's.
    "sync_events": "surveillance sync",
}
_COMMAND_FLAGS = {"sync": {"path": "DIR"}, "events": {"path": "-o"}}


def _cli_words(e: BaseException, args: argparse.Namespace) -> str:
    """What ``e`` says, in the CLI's words: each setting, argument or call it names (its
    :class:`~surveillance.errors.Wording`) said as the option, the operand or the command
    that gives it here; the rest of its text as it is."""
    words = {**_FLAGS, **_COMMAND_FLAGS.get(args.command, {})}
    return wording(e).say(lambda key: f"`{words[key]}`" if key in words else None)


class _LogLines(logging.Filter):
    """Lines of the `surveillance` logger on the terminal, prefixed as errors are. Without
    ``debug``, the warning of a request given up on is left out: the error line that follows
    says it."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        record.level = record.levelname.lower()
        return self.debug or "giving up after " not in record.getMessage()


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
    try:
        given = _relative_values(sys.argv[1:] if argv is None else argv)
    except ValueError as e:  # a relative time out of the calendar: a usage error
        print(f"surveillance: error: {e}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(given)
    _logging(args.debug)
    try:
        status: int = args.run(args)
        return status
    except ValueError as e:  # ConfigError, or a bad argument: a usage error
        print(f"surveillance: error: {_cli_words(e, args)}", file=sys.stderr)
        return 2
    except QuotaExhaustedError as e:  # nothing more can be sent today: try again later
        print(f"surveillance: error: {_cli_words(e, args)}", file=sys.stderr)
        return EXIT_QUOTA
    except BrokenPipeError:  # `surveillance events ... | head`: the reader has had enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 0
    except (SurveillanceError, OSError, ImportError) as e:
        print(f"surveillance: error: {_cli_words(e, args)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        # An export says what Ctrl-C threw away, and how not to lose it next time.
        said = f": {e.args[0]}" if e.args and isinstance(e.args[0], str) else ""
        print(f"surveillance: interrupted{said}", file=sys.stderr)
        return 130
