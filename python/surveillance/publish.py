"""Publishing to the webhook: :func:`validate`, :class:`PublishReport`, and the sources that
:meth:`Client.publish <surveillance.Client.publish>` accepts (dicts, iterables, JSON Lines
files; columns: pandas DataFrames, Arrow data, Parquet files). The work is done in Rust
(``surveillance._core.publish``, with ``columns=True`` for columns)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypedDict, Union

from . import _check, _core, _frames, _progress, _records
from ._core import Failure, PublishReport
from ._progress import _wanted
from .errors import Problem, PublishError, arg, worded
from .types import BatchSize, Progress

__all__ = ["Problem", "Failure", "PublishReport", "PublishError", "PublishInterrupted", "validate"]

PathLike = Union[str, "os.PathLike[str]"]


class PublishOptions(TypedDict, total=False):
    """The options of :meth:`Client.publish <surveillance.Client.publish>`, by keyword, which
    :meth:`AsyncClient.publish <surveillance.AsyncClient.publish>` takes too (typed with
    ``Unpack``)."""

    region: Optional[str]
    batch_size: BatchSize
    validate: bool
    progress: Progress


#: The defaults of the options, written once: :meth:`Client.publish
#: <surveillance.Client.publish>`'s, which the async client and the Airflow operator take too.
OPTION_DEFAULTS: PublishOptions = {
    "region": None,
    "batch_size": "auto",
    "validate": True,
    "progress": "auto",
}


def validate(record: Mapping[str, Any]) -> list[Problem]:
    """The problems of ``record`` under its webhook standard model (``retail``,
    ``restaurant`` or ``other``, from its ``dataType``); an empty list when it conforms.

    Errors: unknown fields (with "did you mean" for near misses and the current name of
    legacy ones such as ``storeId``), missing required fields, wrong types, times that are
    neither epoch milliseconds nor ISO-8601. Warnings: a ``status`` or item ``type`` outside
    the published values, epoch values that look like seconds. Implemented in Rust; the same
    rules decide what :meth:`Client.publish <surveillance.Client.publish>` keeps back.

    Args:
        record: a dict as it would be posted (datetimes count as epoch milliseconds).

    Returns:
        A list of :class:`Problem` (``path``, ``message``, ``severity``).

    Raises:
        TypeError: ``record`` is not a dict (a mapping of field names).

    Example:
        >>> import surveillance as sv
        >>> record = {"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000,
        ...           "storeId": "s-1", "dataSourceId": "pos-1", "eventUniqueId": "e-1",
        ...           "eventType": "door", "eventDetails": 3}
        >>> for p in sv.validate(record):  # doctest: +ELLIPSIS
        ...     print(p.severity, p)
        error locationId: missing required field `locationId`
        error eventDetails: expected a string, found number `3`
        error storeId: unknown field `storeId`: it is the legacy name of `locationId`; use ...
    """
    return [Problem(**p) for p in _core.validate(record)]


class PublishInterrupted(KeyboardInterrupt):
    """Ctrl-C (or another ``KeyboardInterrupt``) stopped :meth:`Client.publish
    <surveillance.Client.publish>`. A ``KeyboardInterrupt``, so code that stops on Ctrl-C
    still stops; it carries what was done.

    Attributes:
        report: the partial :class:`~surveillance.PublishReport`: every record taken from the
            source is accepted, in ``report.rejected`` (those not yet accepted with
            ``status`` None) or, when its request was in flight (the service may have stored
            it), in ``report.unconfirmed``; ``report.write_failures(path)`` writes every
            record not yet accepted (with the unread rest of a list, DataFrame or file
            source), ready to publish again.

    >>> import surveillance as sv
    >>> issubclass(sv.PublishInterrupted, KeyboardInterrupt)
    True
    """

    def __init__(self, report: Optional[PublishReport] = None) -> None:
        accepted = getattr(report, "accepted", 0)
        total = getattr(report, "total", 0)
        super().__init__(
            f"publishing interrupted: {accepted:,} of {total:,} records read were accepted; "
            "`.report.write_failures(path)` writes the rest, ready to publish again"
        )
        self.report: Optional[PublishReport] = report

    def __reduce__(self) -> Any:
        return (type(self), (None,))


def _is_arrow(obj: Any) -> bool:
    return hasattr(obj, "__arrow_c_stream__") or hasattr(obj, "__arrow_c_array__")


def _rereadable(obj: Any) -> bool:
    """Arrow data that can be exported again (a table, not a one-shot stream): the rows that a
    stopped publish did not read can then be written by ``write_failures``."""
    kind = type(obj)
    return (kind.__module__.split(".")[0], kind.__name__) in {
        ("pyarrow", "Table"),
        ("pyarrow", "RecordBatch"),
        ("polars", "DataFrame"),
    }


def _is_parquet(path: PathLike) -> bool:
    name = os.fspath(path)
    return isinstance(name, str) and name.lower().endswith(".parquet")


class _Bar(_progress._Bar):
    """Records done (accepted or rejected), on tqdm when installed, else a plain stderr line
    (closed as the events bar is). With the input's length known (a list, a DataFrame, Arrow
    data, a file) it shows the total, the share done and the time left at the rate so far;
    with an iterator, the records done alone. A wait (an outage, a 429) shows after its name.
    """

    def __init__(self, total: Optional[int]) -> None:
        self._started = time.monotonic()
        self._open("publish", total, " records")

    def __call__(self, update: dict[str, Any]) -> None:
        done = int(update.get("accepted", 0)) + int(update.get("rejected", 0))
        rejected, requests = update.get("rejected", 0), update.get("requests", 0)
        head = self._head(update)
        words = f"{done:,} records"
        if self._total:
            pct = min(100, 100 * done // self._total)
            words = f"{pct:3d}% ({done:,}/{self._total:,} records"
            elapsed = time.monotonic() - self._started
            if 0 < done < self._total:
                left = elapsed * (self._total - done) / done
                words += f", ~{_progress._duration(left)} left"
        else:
            words = f"({words}"
        line = f"{head}: {words}, {rejected:,} rejected, {requests:,} requests)"
        self._show(done, f"rejected={rejected}, requests={requests}", line)


def _wanted_bar(progress: Progress) -> bool:
    """Whether ``progress`` draws a bar (whose total is worth counting)."""
    return not callable(progress) and _wanted(progress)


def _lines(path: str) -> int:
    """The records of a JSON Lines file: its lines that are not blank (read once more, at
    the speed of the disk: far faster than they are posted)."""
    with open(path, "rb") as f:
        return sum(1 for line in f if not line.isspace())


def _parquet_rows(path: str) -> Optional[int]:
    """The rows of a Parquet file, from its footer (None without pyarrow)."""
    try:
        import pyarrow.parquet as pq  # optional: pyarrow

        return int(pq.ParquetFile(path).metadata.num_rows)
    except Exception:
        return None


def _progress_of(progress: Progress, total: Optional[int]) -> tuple[Any, ...]:
    if callable(progress) and not isinstance(progress, bool):
        return progress, lambda: None
    if not _wanted(progress):
        return None, lambda: None
    bar = _Bar(total)
    return bar, bar.close


def publish(
    inner: Any,
    records: Any,
    *,
    region: Optional[str] = OPTION_DEFAULTS["region"],
    batch_size: BatchSize = OPTION_DEFAULTS["batch_size"],
    validate: bool = OPTION_DEFAULTS["validate"],
    progress: Progress = OPTION_DEFAULTS["progress"],
    cancelled: Optional[Callable[[], bool]] = None,
) -> PublishReport:
    """The body of :meth:`Client.publish <surveillance.Client.publish>` (and, in a worker
    thread, of :meth:`AsyncClient.publish <surveillance.AsyncClient.publish>`: ``cancelled``
    is asked between waits whether the caller gave up)."""
    if batch_size != "auto" and (isinstance(batch_size, bool) or not isinstance(batch_size, int)):
        raise worded(
            TypeError,
            arg("batch_size"),
            f' must be "auto" or an int from 1 to 100, got {type(batch_size).__name__}',
        )
    path: Optional[PathLike] = None
    source: Any = None
    # Sources read again from their first row not read, for the report of a publish that
    # stops early: a sequence of records, or Arrow data that can be exported again.
    rereadable = False
    # Columns: Arrow data, or the path of a Parquet file.
    arrow: Any = None
    loose: list[str] = []  # a DataFrame's columns made lists of structs by frame_table
    parquet: Optional[str] = None
    size: Optional[int] = None
    _check.text("region", region, optional=True, config=True)
    _check.flag("validate", validate)
    if isinstance(records, (str, os.PathLike)):
        path = _check.path("records", records)
        if not os.path.isfile(path):
            raise worded(
                ValueError,
                arg("records"),
                f" is a path, but no file {_check.shown(path)} exists: give the path of a JSON "
                "Lines, Parquet or CSV file, or the records (a dict, a list or iterable of "
                "dicts, a DataFrame, Arrow data)",
            )
        with open(path, "rb"):  # an unreadable file fails here, as OSError
            pass
        if _is_parquet(path):
            parquet, path = os.fspath(path), None
            size = _parquet_rows(parquet) if _wanted_bar(progress) else None
        elif _records.file_format(os.fspath(path), strict=False) == "csv":
            rows = _records.csv_records(os.fspath(path))
            path, source, size, rereadable = None, rows, len(rows), True
        elif _wanted_bar(progress):
            size = _lines(os.fspath(path))
    elif isinstance(records, Mapping):
        source, size = iter([records]), 1
    elif _frames.is_frame(records):
        table, loose = _frames.frame_table(records)
        size = len(records)
        if table is not None:
            arrow, rereadable = table, True
        else:
            source, rereadable = _frames.FrameRows(records), True
    elif _is_arrow(records):
        arrow = records
        if _rereadable(records):
            size, rereadable = len(records), True
    elif isinstance(records, (list, tuple)):
        source, size, rereadable = records, len(records), True
    elif isinstance(records, (bytes, bytearray)) or not hasattr(records, "__iter__"):
        raise worded(
            TypeError,
            arg("records"),
            " must be a dict, an iterable of dicts, a pandas DataFrame, Arrow data "
            "(`__arrow_c_stream__`), or the path of a JSON Lines or Parquet file, got "
            f"{type(records).__name__}",
        )
    else:
        source = iter(records)
    callback, close = _progress_of(progress, size)
    options: dict[str, Any] = dict(
        region=region,
        batch_size=None if batch_size == "auto" else batch_size,
        validate=validate,
        progress=callback,
        cancelled=cancelled,
        rereadable=rereadable,
    )
    try:
        if arrow is not None or parquet is not None:
            report, error = _core.publish(
                inner, arrow, parquet, columns=True, loose=loose, **options
            )
        else:
            report, error = _core.publish(
                inner, source, None if path is None else os.fspath(path), **options
            )
    finally:
        close()
    if error is None:
        return report

    if isinstance(error, KeyboardInterrupt) and not isinstance(error, PublishInterrupted):
        raise PublishInterrupted(report) from None
    try:
        error.report = report  # type: ignore[attr-defined]
    except AttributeError:
        pass
    raise error
