"""The parser of the command-line reference (reference/cli.md): the CLI's own, with the exit
statuses shown once, at the top of the page, rather than again under each command."""

from __future__ import annotations

import argparse

from surveillance.cli import build_parser


def parser() -> argparse.ArgumentParser:
    """``surveillance.cli.build_parser()``, its commands' epilogs (the exit statuses) left out."""
    p = build_parser()
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.epilog = None
    return p
