"""Files of webhook records, read the same way by every command that takes one (``validate``,
``publish``): JSON Lines, Parquet or CSV, told apart by the file's suffix.

A CSV file holds one record per row under a header of field names; an empty cell is a field
left out, a cell that holds a JSON array or object (``items``) is parsed, and the fields the
models type as numbers (and times written as epoch milliseconds) are read as numbers: every
other cell stays text, as the models want their ids and codes.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
from typing import Any, Iterator

from . import _core

#: Formats of a file of records, by suffix.
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv"}
#: The suffixes accepted, as help texts and messages say them.
ACCEPTED = ".jsonl (JSON Lines), .parquet or .csv"

# What the webhook's models (src/webhook/models.rs) type as numbers, and as times (epoch
# milliseconds or ISO-8601 text). A CSV cell of any other field stays text.
_NUMBERS = frozenset({"quantity", "unitPrice", "guestCount"})
_TIMES = frozenset({"startTime", "endTime", "time"})
_EPOCH = re.compile(r"-?\d+(\.0*)?")


def file_format(path: str, *, strict: bool = True) -> str:
    """The format of the file of records at ``path`` (``"jsonl"``, ``"parquet"`` or
    ``"csv"``), from its suffix; any other suffix is a ValueError, or with ``strict=False``
    JSON Lines (what :meth:`Client.publish <surveillance.Client.publish>` has always read).

    >>> file_format("pos.CSV")
    'csv'
    >>> file_format("pos.txt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot read records from 'pos.txt': name the file .jsonl (JSON Lines), ...
    """
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS and not strict:
        return "jsonl"
    if suffix not in FORMATS:
        raise ValueError(f"cannot read records from {path!r}: name the file {ACCEPTED}")
    return FORMATS[suffix]


def check(path: str) -> str:
    """:func:`file_format`, and that the file exists and can be read (OSError otherwise)."""
    fmt = file_format(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no file {path!r}")
    with open(path, "rb"):  # an unreadable file fails here, naming it
        pass
    return fmt


def read(path: str) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` for each record of the file at ``path``: ``where`` is ``"line N"``
    (JSON Lines, CSV) or ``"row N"`` (Parquet); a record that cannot be read is a ValueError
    in its place, so that a reader can report it and go on."""
    fmt = check(path)
    if fmt == "parquet":
        for number, text in enumerate(_core.columns_json(None, path), 1):
            yield f"row {number}", json.loads(text)
    elif fmt == "csv":
        yield from _csv(path)
    else:
        with open(path, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, 1):
                text = line.strip()
                if not text:
                    continue
                try:
                    record: Any = json.loads(text)
                except ValueError as e:
                    record = ValueError(f"not valid JSON: {e}")
                yield f"line {number}", record


def csv_records(path: str) -> list[Any]:
    """Every record of the CSV file at ``path``, as dicts; a ValueError naming the line of the
    first row that cannot be read."""
    out = []
    for where, record in _csv(path):
        if isinstance(record, ValueError):
            raise ValueError(f"{path}: {where}: {record}")
        out.append(record)
    return out


def _csv(path: str) -> Iterator[tuple[str, Any]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None:
                return
            for row in reader:
                if not any(row):
                    continue
                where = f"line {reader.line_num}"
                if len(row) > len(header):
                    yield where, ValueError(f"{len(row)} cells under {len(header)} columns")
                    continue
                yield where, {k: _cell(k, v) for k, v in zip(header, row) if v != ""}
        except csv.Error as e:
            raise ValueError(f"{path}: line {reader.line_num}: not valid CSV: {e}") from None


def _cell(name: str, text: str) -> Any:
    """A CSV cell as the value of field ``name``."""
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            try:  # pandas' to_csv writes lists of dicts as Python reprs
                return ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return text
    if name in _NUMBERS:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return text
    if name in _TIMES and _EPOCH.fullmatch(text):
        return int(float(text)) if "." in text else int(text)
    return text
