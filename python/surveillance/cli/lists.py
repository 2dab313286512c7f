"""The list commands (sites, cameras, ...)."""

from __future__ import annotations

import argparse
from typing import Any

from .. import _store
from .._writers import (
    _format,
    _print_table,
    _pyarrow,
    _Target,
    _write_rows,
)
from ._common import Command, _client, _client_arguments, _limit_argument, _output_arguments

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
