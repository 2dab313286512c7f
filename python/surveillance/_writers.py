"""The command line's outputs: where a file may be written (a local path or an object store
location), written whole or not at all (:class:`_Target`), the formats by suffix, event rows
for CSV and tables, and the plain table printed on a terminal."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from typing import Any, Optional

from . import _core, _store
from ._time import from_ms, to_ms

#: File formats by file-name suffix.
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl"}
_SUFFIXES.update({".ndjson": "jsonl"})
_FORMATS = ("table", "csv", "jsonl", "parquet")


def _format(args: argparse.Namespace) -> str:
    """The output format: ``--format``, else the suffix of ``-o``, else ``table`` on a
    terminal and ``jsonl`` when stdout is piped; ``-o`` (a file or a URI) is checked
    writable."""
    fmt = _format_of(args)
    if args.output:
        _writable(args.output, "-o", remote=True)
    return fmt


def _format_of(args: argparse.Namespace) -> str:
    if args.format:
        if args.format == "table" and args.output:
            raise ValueError("--format table writes to the terminal: leave out -o")
        if args.format == "parquet" and not args.output:
            raise ValueError("--format parquet needs a file: pass -o FILE.parquet")
        return str(args.format)
    if args.output:
        suffix = _store.suffix(args.output).lower()
        if suffix not in _SUFFIXES:
            raise ValueError(
                f"cannot tell the format of {_store.shown(args.output)!r}: name it .parquet, "
                ".csv or .jsonl, or pass --format"
            )
        return _SUFFIXES[suffix]
    return "table" if sys.stdout.isatty() else "jsonl"


def _writable(path: str, option: str, *, remote: bool = False) -> None:
    """Raises OSError naming ``path`` (as the user gave it) unless a file can be written
    there: called before the first request, so that a mistyped destination costs no quota.
    With ``remote``, ``path`` may be a URI that pyarrow opens (``s3://bucket/key``): its
    bucket must exist (one request to the store), and a scheme pyarrow does not know is a
    :class:`ConfigError`."""
    if _store.is_uri(path):
        if not remote:
            raise ValueError(f"{option} takes a local file, got {_store.shown(path)!r}")
        location = _store.resolve(path, option)
        if location.filesystem is not None:
            _writable_object(location, option)
            return
        path = location.path  # a file:// URI
    if os.path.isdir(path):
        raise OSError(f"cannot write {option} {path!r}: it is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        why = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise OSError(f"cannot write {option} {path!r}: {os.path.dirname(path)!r} {why}")
    try:  # what the file's writer will do: create a file in that directory
        fd, probe = tempfile.mkstemp(prefix=".surveillance-", suffix=".check", dir=parent)
    except OSError as e:
        raise OSError(f"cannot write {option} {path!r}: {e.strerror or e}") from None
    os.close(fd)
    os.remove(probe)


def _writable_object(location: _store.Location, option: str) -> None:
    """As :func:`_writable`, for an object: its bucket exists, and it is no directory."""
    why = _store.unusable(location, file=True)
    if why is not None:
        raise OSError(f"cannot write {option} {location.shown!r}: {why}")


def _writable_dir(path: str, option: str) -> None:
    """As :func:`_writable`, for a directory created when missing (``sync``'s dataset). The
    rule of every destination of the command line: what is written may be created, in a
    folder that exists; a missing folder is refused (a mistyped path creates nothing)."""
    local = _store.local_path(path, option)
    if local is None:
        return  # an object store: sync_events checks it before the first request
    path = local
    existing = os.path.abspath(path)
    parent = os.path.dirname(existing)
    if not os.path.exists(existing) and not os.path.isdir(parent):
        why = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise OSError(
            f"cannot write {option} {path!r}: {os.path.dirname(path)!r} {why} (create it "
            "first: only the dataset's own directory is created)"
        )
    if not os.path.exists(existing):
        existing = parent
    if not os.path.isdir(existing):
        raise OSError(f"cannot write {option} {path!r}: {existing!r} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OSError(f"cannot write {option} {path!r}: {existing!r} is not writable")


class _Target:
    """The file of ``-o`` written under a temporary name and renamed when complete (a run
    that fails half-way leaves no truncated file), or stdout. An object (a URI other than
    ``file://``) is written to a local temporary file, uploaded in one call once complete:
    it appears whole or not at all."""

    def __init__(self, path: Optional[str], binary: bool = False) -> None:
        self._remote: Optional[_store.Location] = None
        if path is not None and _store.is_uri(path):
            location = _store.resolve(path, "-o")
            if location.filesystem is None:
                path = location.path  # a file:// URI
            else:
                self._remote = location
        self.path = path
        self._partial = None if path is None else f"{path}.partial"
        if self._remote is not None:
            fd, self._partial = tempfile.mkstemp(
                prefix="surveillance-", suffix=_store.suffix(self._remote.path)
            )
            os.close(fd)
        self._binary = binary
        #: Whether the object is complete in its store (a Ctrl-C came after it).
        self.committed = False

    def open(self) -> Any:
        if self._partial is None:
            return sys.stdout.buffer if self._binary else sys.stdout
        try:
            if self._binary:
                return open(self._partial, "wb")
            return open(self._partial, "w", encoding="utf-8", newline="")
        except OSError as e:
            # The temporary name is the writer's business: the error names the user's file.
            raise OSError(e.errno, e.strerror, self.path) from None

    @property
    def name(self) -> str:
        """Where a writer that takes a path writes."""
        return self._partial or "-"

    def commit(self) -> None:
        if self._remote is not None and self._partial is not None:
            try:
                _store.upload(self._partial, self._remote)
            except KeyboardInterrupt:
                # pyarrow finishes an upload before Python sees Ctrl-C.
                self.committed = _store.uploaded(self._partial, self._remote)
                raise
            finally:
                os.remove(self._partial)
            self.committed = True
        elif self._partial is not None and self.path is not None:
            os.replace(self._partial, self.path)

    def discard(self) -> None:
        # A file: a directory in the way of the temporary name is not the writer's to remove
        # (and its error would hide the one that says why nothing was written).
        if self._partial is not None and os.path.isfile(self._partial):
            os.remove(self._partial)


def _pyarrow() -> tuple[Any, ...]:
    try:
        import pyarrow as pa  # optional: pyarrow
        import pyarrow.parquet as pq  # optional: pyarrow
    except ImportError:
        raise ImportError(
            "writing Parquet needs pyarrow: pip install 'surveillance[pandas]'"
        ) from None
    return pa, pq


def _cell(value: Any) -> Any:
    """A value as a CSV cell: lists and objects as JSON, None as an empty cell."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "" if value is None else value


#: Columns of events in CSV: the names of the events' Arrow schema (the one definition, in the
#: core), ``details.x`` read from the event's details and ``details`` the whole map as JSON.
_EVENT_COLUMNS = list(_core.events_schema().names)


#: Times of events, written in UTC (the service writes them at each site's UTC offset).
_TIME_COLUMNS = frozenset({"startTime", "endTime", "createTime"})
#: The column ``--local-time`` adds: the start as the service sends it, the wall clock at the
#: site with its UTC offset.
_LOCAL_COLUMN = "localStartTime"


def _utc(value: Any) -> Any:
    """A time of an event as UTC, with milliseconds and ``Z``, as pandas and Arrow read it
    (times at mixed UTC offsets do not make one datetime column).

    >>> _utc("2026-01-04T17:00:15.372-07:00")
    '2026-01-05T00:00:15.372Z'
    """
    if not isinstance(value, str) or not value:
        return value
    try:
        ms = to_ms(value, "time")
    except ValueError:
        return value
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _event_row(event: dict[str, Any], columns: list[Any] = _EVENT_COLUMNS) -> list[Any]:
    details = event.get("details") or {}
    row = []
    for column in columns:
        if column.startswith("details."):
            row.append(_cell(details.get(column[len("details.") :])))
        elif column == "details":
            row.append(_cell(details))
        elif column in _TIME_COLUMNS:
            row.append(_cell(_utc(event.get(column))))
        elif column == _LOCAL_COLUMN:
            row.append(_cell(event.get("startTime")))
        else:
            row.append(_cell(event.get(column)))
    return row


def _write_rows(
    target: _Target,
    fmt: str,
    records: Any,
    header: Optional[list[Any]] = None,
    order: Optional[list[Any]] = None,
) -> int:
    """Writes dicts as JSON Lines or CSV (``header``: the columns of events); returns the
    count. A list of records without ``header`` gets the union of their keys as columns:
    those of ``order`` first, in its order (a list's table's, as Parquet has them), then the
    others as they come."""
    count = 0
    f = target.open()
    try:
        if fmt == "jsonl":
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
        elif header is not None:
            writer = csv.writer(f)
            writer.writerow(header)
            for record in records:
                writer.writerow(_event_row(record, header))
                count += 1
        else:
            records = list(records)
            columns: dict[str, Any] = dict.fromkeys(order or [])
            for record in records:
                columns.update(dict.fromkeys(record))
            writer = csv.writer(f)
            writer.writerow(list(columns))
            for record in records:
                writer.writerow([_cell(record.get(c)) for c in columns])
            count = len(records)
        f.flush()
    finally:
        if f not in (sys.stdout, getattr(sys.stdout, "buffer", None)):
            f.close()
    return count


def _text(value: Any, width: int = 40) -> str:
    if value is None:
        text = ""
    elif isinstance(value, dict):  # localized names: {"en-US": ..., "fr-FR": ...}
        text = str(value.get("en-US", next(iter(value.values()), "")))
    elif isinstance(value, (list, tuple)):
        text = ", ".join(map(str, value))
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_table(rows: list[Any], columns: list[Any]) -> None:
    """Prints ``rows`` (lists of values) under ``columns``, numbers aligned right."""
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [
        bool(rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
        for i in range(len(columns))
    ]

    def line(values: list[Any]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    print("\n".join(out))
