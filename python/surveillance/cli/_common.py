"""Options and helpers shared by the commands: the connection settings and the client, times
and limits, and the registry's :class:`Command`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any, Callable

from .. import _config, _core
from .._time import RELATIVE, relative
from .._writers import (
    _FORMATS,
)
from ..client import Client, Limits
from ..errors import ConfigError

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
                raise ConfigError(f"`{setting.flag}` {e}") from None
        given[setting.name] = value
    return given


def _client(args: argparse.Namespace) -> Client:
    """A :class:`Client` from the options, the environment and the config file, resolved as
    the library resolves them; a missing credential is a :class:`ConfigError` naming the
    option and the variable."""
    profile = getattr(args, "profile", None)
    resolved = _config.resolve(_given(args), profile=profile)
    _config.require_credentials(resolved, path=_config.config_file())
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


_TIMES = "ISO-8601 time or date (UTC if naive), or now, today, yesterday, -7d, -2h, -30m"


def _when(text: str) -> str:
    """A time option's value: a relative time (``now``, ``today``, ``yesterday``, ``-7d``:
    see :func:`._time.relative`) as the ISO-8601 UTC instant it names; other text as it is
    (the library checks it)."""
    try:
        at = relative(text)
    except ValueError as e:  # `main` says it in one line before parsing; here, as argparse does
        raise argparse.ArgumentTypeError(str(e)) from None
    if at is None:
        return text
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _relative_values(argv: list[str]) -> list[str]:
    """``argv`` with each relative time after an option joined to it (``--start -7d`` becomes
    ``--start=-7d``): argparse takes a value that starts with ``-`` for an option.

    Raises:
        ValueError: a relative time before the year 1.
    """
    out: list[str] = []
    for arg in argv:
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if RELATIVE.fullmatch(value):
            relative(value)
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


# --- registry -------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    """A subcommand: its name, one line of help, a function that adds its arguments to its
    parser, and the function that runs it and returns the exit status."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
