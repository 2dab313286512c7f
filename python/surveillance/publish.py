"""Publishing to the webhook: :func:`validate`, :class:`PublishReport`, and the sources that
:meth:`Client.publish <surveillance.Client.publish>` accepts (dicts, iterables, JSON Lines
files; columns: pandas DataFrames, Arrow data, Parquet files). The work is done in Rust
(``surveillance._core.publish``; ``surveillance._core.publish_columns`` for columns)."""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Tuple, Union

from . import _check, _core, _progress, _records
from ._progress import ProgressArg, _wanted
from .errors import Problem, SurveillanceError, ValidationError

if TYPE_CHECKING:
    import pandas

__all__ = ["Problem", "Failure", "PublishReport", "PublishError", "PublishInterrupted", "validate"]

#: DataFrame rows converted to dicts at a time.
_FRAME_CHUNK = 1000

PathLike = Union[str, "os.PathLike[str]"]
#: ``"auto"`` (arrays of 100, one record per request if the service refuses arrays) or 1..100.
BatchSize = Union[str, int]


def validate(record: Any) -> list[Problem]:
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


@dataclass(frozen=True)
class Failure:
    """A record that was not accepted.

    Attributes:
        index: its position in the source (0-based; for a file, counting records, not
            blank lines).
        transaction_id: its ``transactionId``, when it has one.
        status: the HTTP status of the service's refusal; None when it was not sent
            (validation, interruption) or got no answer in the end (network).
        problems: the validation problems that kept it back (list of :class:`Problem`).
        message: what happened; for a refusal, the service's own message.
        line: its line number in a JSON Lines file (1-based), for a file source.
        record_json: the record as JSON text, as :meth:`PublishReport.write_failures` writes
            it.
        kind: why, in one word: ``"invalid"`` (kept back by validation), ``"refused"`` (the
            service answered 4xx, or its answer listed the record as failed), ``"failed"`` (no
            success after every retry), ``"interrupted"`` (Ctrl-C came before the service
            accepted it), ``"not sent"`` (publishing stopped on an error before it left) or
            ``"unconfirmed"`` (sent, but nothing proves whether the service stored it: every
            answer was a page that is not the API's, such as a proxy's or a captive portal's
            HTML, none came before publishing stopped, or its body was refused with the words
            of a refusal found systematic, naming no record, and it was not posted alone;
            publishing it again is safe).
    """

    index: int
    transaction_id: Optional[str]
    status: Optional[int]
    problems: list[Problem]
    message: str
    line: Optional[int] = None
    record_json: Optional[str] = field(default=None, repr=False)
    kind: str = "failed"

    @property
    def record(self) -> Any:
        """The record as a dict (parsed from :attr:`record_json`), or None."""
        return None if self.record_json is None else json.loads(self.record_json)

    def __str__(self) -> str:
        where = f"record {self.index}" + (f" (line {self.line})" if self.line else "")
        tx = f" [{self.transaction_id}]" if self.transaction_id else ""
        status = f" {self.status}" if self.status is not None else ""
        return f"{where}{tx}{status}: {self.message}"


class PublishReport:
    """What :meth:`Client.publish <surveillance.Client.publish>` did. Every record taken
    from the source is accounted for: ``total == accepted + len(rejected) +
    len(unconfirmed)``.

    What the service's answers prove decides: a 2xx whose body is JSON of any shape, or empty
    (or a plain ``OK``), accepts every record posted, unless the body counts fewer accepted or
    lists records as failed; a 2xx that is plainly not the API's (an HTML page from a proxy or
    a captive portal) proves nothing, and its records end ``unconfirmed`` after the retries.

    Attributes:
        total: records taken from the source.
        sent: records that left the machine at least once.
        accepted: records the service accepted.
        rejected: the records not accepted, in source order (list of :class:`Failure`).
        unconfirmed: the records sent whose fate no answer proves (list of :class:`Failure`
            of kind ``"unconfirmed"``): neither accepted nor refused.
        requests: requests that left the machine, retries included (each one of the day's
            quota).
        retries: this publish's requests sent again (not those of other calls on the client).
        rate_limited: 429 answers to this publish's requests.
        elapsed: wall time in seconds.
        interrupted: stopped by Ctrl-C; records taken but not yet accepted are in
            ``rejected``.
        error: the message of an error that stopped publishing (e.g. refused credentials),
            or None.
        unread: records of the source not read when publishing stopped early (None when
            unknown, e.g. for a generator, which resumes at the next record).
    """

    def __init__(
        self,
        data: dict[str, Any],
        *,
        region: Optional[str] = None,
        batch_size: BatchSize = "auto",
        unread: Optional[int] = None,
        rest: Optional[Callable[[], Iterator[str]]] = None,
    ) -> None:
        self.total: int = data["total"]
        self.sent: int = data["sent"]
        self.accepted: int = data["accepted"]
        self.requests: int = data["requests"]
        self.retries: int = data["retries"]
        self.rate_limited: int = data["rate_limited"]
        self.elapsed: float = data["elapsed"]
        self.interrupted: bool = data["interrupted"]
        self.error: Optional[str] = data["error"]
        self.region = region
        self.batch_size = batch_size
        self.unread = unread
        self._rest = rest
        failures = [
            Failure(
                index=f["index"],
                transaction_id=f["transactionId"],
                status=f["status"],
                problems=[Problem(**p) for p in f["problems"]],
                message=f["message"],
                line=f["line"],
                record_json=f["record"],
                kind=f["kind"],
            )
            for f in data["failures"]
        ]
        self.rejected: list[Failure] = [f for f in failures if f.kind != "unconfirmed"]
        self.unconfirmed: list[Failure] = [f for f in failures if f.kind == "unconfirmed"]

    @classmethod
    def _empty(cls, **counts: Any) -> PublishReport:
        data: dict[str, Any] = {
            "total": 0,
            "sent": 0,
            "accepted": 0,
            "requests": 0,
            "retries": 0,
            "rate_limited": 0,
            "elapsed": 0.0,
            "interrupted": False,
            "error": None,
            "failures": [],
        }
        data.update(counts)
        return cls(data)

    def __getstate__(self) -> dict[str, Any]:
        # The unread rest of a source stays with the process that read it.
        state = dict(self.__dict__)
        state["_rest"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("unconfirmed", [])  # reports pickled before the list existed
        self.__dict__.update(state)

    @property
    def ok(self) -> bool:
        """True when every record of the source was accepted."""
        return (
            not self.rejected and not self.unconfirmed and not self.interrupted and not self.unread
        )

    @property
    def failures(self) -> list[Failure]:
        """Every record not accepted, rejected or unconfirmed, in source order."""
        return sorted(self.rejected + self.unconfirmed, key=lambda f: f.index)

    @property
    def rate(self) -> float:
        """Records accepted per second."""
        return self.accepted / self.elapsed if self.elapsed > 0 else 0.0

    @classmethod
    def combine(
        cls,
        reports: Iterable[PublishReport],
        *,
        sizes: Optional[Iterable[int]] = None,
        elapsed: Optional[float] = None,
    ) -> PublishReport:
        """One report for the publishes of consecutive parts of one source (e.g. the
        partitions of a Dask collection, published in parallel by
        :func:`surveillance.dask.publish`): counts added up, failures in part order with their
        ``index`` shifted by the sizes of the parts before theirs (so that it is the record's
        position in the whole source), ``write_failures`` covering every part.

        Args:
            reports: the parts' reports, in source order.
            sizes: the number of records of each part (default: each report's ``total``
                plus its ``unread``).
            elapsed: the wall time of the whole (default: the longest part's).

        >>> empty = {"total": 0, "sent": 0, "accepted": 0, "requests": 0, "retries": 0,
        ...          "rate_limited": 0, "elapsed": 0.0, "interrupted": False, "error": None,
        ...          "failures": []}
        >>> one = PublishReport(dict(empty, total=2, accepted=2, elapsed=1.0))
        >>> both = PublishReport.combine([one, one], elapsed=1.5)
        >>> both.total, both.accepted, both.elapsed, both.ok
        (4, 4, 1.5, True)

        Raises:
            ValueError: ``sizes`` does not give one size per report.
        """
        import dataclasses
        import itertools

        parts = list(reports)
        counts = [p.total + (p.unread or 0) for p in parts] if sizes is None else list(sizes)
        if len(counts) != len(parts):
            raise ValueError(f"{len(parts)} reports but {len(counts)} sizes")
        first = parts[0] if parts else None
        data = {
            key: sum(getattr(p, key) for p in parts)
            for key in ("total", "sent", "accepted", "requests", "retries", "rate_limited")
        }
        data.update(
            elapsed=max((p.elapsed for p in parts), default=0.0) if elapsed is None else elapsed,
            interrupted=any(p.interrupted for p in parts),
            error=next((p.error for p in parts if p.error is not None), None),
            failures=[],
        )
        unread = [p.unread for p in parts if p.unread is not None]
        rests = [p._rest for p in parts if p._rest is not None]
        out = cls(
            data,
            region=None if first is None else first.region,
            batch_size="auto" if first is None else first.batch_size,
            unread=sum(unread) if unread else None,
            rest=(lambda: itertools.chain.from_iterable(r() for r in rests)) if rests else None,
        )
        offset = 0
        for part, count in zip(parts, counts):
            out.rejected.extend(
                dataclasses.replace(f, index=f.index + offset) for f in part.rejected
            )
            out.unconfirmed.extend(
                dataclasses.replace(f, index=f.index + offset) for f in part.unconfirmed
            )
            offset += count
        return out

    def to_pandas(self) -> pandas.DataFrame:
        """The records not accepted (rejected and unconfirmed) as a pandas DataFrame, one row
        each in source order, with why: ``index`` (position in the source), ``line`` (in a
        JSON Lines file, else <NA>), ``transaction_id``, ``kind`` (see :attr:`Failure.kind`),
        ``status`` (the HTTP status of a refusal, else <NA>), ``message``, ``problems`` (the
        validation problems, ``"error path: message"`` joined by ``"; "``) and ``record`` (the
        record as JSON text, as :meth:`write_failures` writes it). Needs pandas.

        >>> import surveillance as sv
        >>> sale = {"dataType": "retail", "schemaVersion": "1", "startTime": 1794891600000,
        ...         "endTime": 1794891660000, "locationId": "store-1", "dataSourceId": "pos-1",
        ...         "transactionId": "t-1", "status": "sale", "items": []}
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     report = emu.client().publish(
        ...         [sale, dict(sale, transactionId="t-2", startTime="noon")], progress=False
        ...     )
        >>> df = report.to_pandas()
        >>> [(int(r.index), r.transaction_id, r.kind) for r in df.itertuples()]
        [(1, 't-2', 'invalid')]
        >>> df.at[0, "problems"].split(":")[0]
        'error startTime'
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "PublishReport.to_pandas() needs pandas: pip install 'surveillance[pandas]'"
            ) from None
        failures = self.failures
        columns = {
            "index": pd.array([f.index for f in failures], dtype="int64"),
            "line": pd.array([f.line for f in failures], dtype="Int64"),
            "transaction_id": pd.array([f.transaction_id for f in failures], dtype="object"),
            "kind": pd.array([f.kind for f in failures], dtype="object"),
            "status": pd.array([f.status for f in failures], dtype="Int64"),
            "message": pd.array([f.message for f in failures], dtype="object"),
            "problems": pd.array(
                [
                    "; ".join(
                        f"{p.severity} {p.path}: {p.message}" if p.path else p.message
                        for p in f.problems
                    )
                    for f in failures
                ],
                dtype="object",
            ),
            "record": pd.array([f.record_json for f in failures], dtype="object"),
        }
        return pd.DataFrame(columns)

    def counts(self) -> dict[str, int]:
        """Records not accepted by kind (see :attr:`Failure.kind`)."""
        out: dict[str, int] = {}
        for f in self.failures:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def raise_on_failure(self) -> PublishReport:
        """Raises :class:`~surveillance.PublishError` (with this report as ``.report``) when
        any record was not accepted; returns the report otherwise, so it chains:
        ``client.publish(rows).raise_on_failure()``."""
        if self.ok:
            return self

        failures = self.failures
        first = "; ".join(str(f) for f in failures[:3])
        more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
        unread = f"; {self.unread:,} records not read" if self.unread else ""
        reason = " (interrupted)" if self.interrupted else ""
        raise PublishError(
            f"{len(failures):,} of {self.total:,} records not accepted{reason}{unread}: "
            f"{first}{more}; see `report.rejected` and `report.unconfirmed`, or "
            f"`report.write_failures(path)` to publish them again",
            report=self,
        )

    def write_failures(self, path: PathLike) -> int:
        """Writes the records not accepted (rejected and unconfirmed) to ``path`` as JSON
        Lines, ready to publish again (``client.publish(path)``); returns how many lines were
        written.

        After an interruption it also writes the records of a list, DataFrame or file source
        that were not read yet, so that publishing the file completes the job.

        Raises:
            OSError: the file cannot be written.
        """
        n = 0
        with open(path, "w", encoding="utf-8") as out:
            for f in self.failures:
                text = f.record_json if f.record_json is not None else json.dumps(None)
                out.write(text)
                out.write("\n")
                n += 1
            if self._rest is not None:
                for text in self._rest():
                    out.write(text)
                    out.write("\n")
                    n += 1
        return n

    def summary(self) -> str:
        """One line: records, accepted, rejected by kind, interrupted or not sent (apart:
        the service refused none of them), unconfirmed, requests, retries, time."""
        counts = self.counts()
        counts.pop("unconfirmed", None)
        stopped = {k: counts.pop(k) for k in ("interrupted", "not sent") if k in counts}
        kinds = ", ".join(f"{v:,} {k}" for k, v in sorted(counts.items()))
        rejected = f"{sum(counts.values()):,} rejected" + (f" ({kinds})" if kinds else "")
        parts = [
            f"{self.total:,} records",
            f"{self.accepted:,} accepted",
            rejected,
        ]
        parts += [f"{v:,} {k}" for k, v in stopped.items()]
        if self.unconfirmed:
            parts.append(f"{len(self.unconfirmed):,} unconfirmed")
        parts += [
            f"{self.requests:,} requests",
            f"{self.retries:,} retries",
            f"{self.elapsed:.2f} s",
        ]
        if self.interrupted and "interrupted" not in stopped:
            parts.append("interrupted")
        if self.unread:
            parts.append(f"{self.unread:,} not read")
        if self.error:
            parts.append(f"stopped: {self.error}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"<PublishReport: {self.summary()}>"

    def __str__(self) -> str:
        lines = [f"PublishReport: {self.summary()}"]
        failures = self.failures
        for f in failures[:10]:
            lines.append(f"  {f}")
        if len(failures) > 10:
            lines.append(f"  ... and {len(failures) - 10:,} more")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        state = "interrupted" if self.interrupted else ("ok" if self.ok else "with failures")
        counts = self.counts()
        stopped = [(k, f"{counts.pop(k):,}") for k in ("interrupted", "not sent") if k in counts]
        counts.pop("unconfirmed", None)
        rows = [
            ("records", f"{self.total:,}"),
            ("accepted", f"{self.accepted:,}"),
            ("rejected", f"{sum(counts.values()):,}"),
            *stopped,
            ("unconfirmed", f"{len(self.unconfirmed):,}"),
            (
                "requests / retries / 429s",
                f"{self.requests:,} / {self.retries:,} / {self.rate_limited:,}",
            ),
            ("elapsed", f"{self.elapsed:.2f} s ({self.rate:,.0f} records/s)"),
        ]
        if self.unread:
            rows.append(("not read", f"{self.unread:,}"))
        if self.error:
            rows.append(("stopped", self.error))
        head = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows
        )
        out = [f"<b>PublishReport</b> ({esc(state)})<table>{head}</table>"]
        failures = self.failures
        if failures:
            body = "".join(
                "<tr>"
                + "".join(
                    f"<td>{esc(str(c))}</td>"
                    for c in (
                        f.index,
                        f.transaction_id or "",
                        "" if f.status is None else f.status,
                        f.kind,
                        f.message,
                    )
                )
                + "</tr>"
                for f in failures[:20]
            )
            more = f"<p>... and {len(failures) - 20:,} more</p>" if len(failures) > 20 else ""
            out.append(
                "<table><tr><th>index</th><th>transactionId</th><th>status</th>"
                f"<th>kind</th><th>message</th></tr>{body}</table>{more}"
            )
        return "".join(out)


# --- sources ----------------------------------------------------------------------------------
class PublishError(SurveillanceError):
    """Raised by :meth:`PublishReport.raise_on_failure
    <surveillance.PublishReport.raise_on_failure>` when records were not accepted.

    Attributes:
        report: the :class:`~surveillance.PublishReport`; ``report.rejected`` lists the
            records and why, ``report.write_failures(path)`` writes them to publish again.
    """

    def __init__(self, message: str, report: Optional[PublishReport] = None) -> None:
        super().__init__(message)
        self.report: Optional[PublishReport] = report

    def __reduce__(self) -> Any:
        return (type(self), (str(self), None))


class PublishInterrupted(KeyboardInterrupt):
    """Ctrl-C (or another ``KeyboardInterrupt``) stopped :meth:`Client.publish
    <surveillance.Client.publish>`. A ``KeyboardInterrupt``, so code that stops on Ctrl-C
    still stops; it carries what was done.

    Attributes:
        report: the partial :class:`~surveillance.PublishReport`: every record taken from the
            source is accepted or in ``report.rejected`` (those not yet accepted with
            ``status`` None), and ``report.write_failures(path)`` writes every record not yet
            accepted (with the unread rest of a list, DataFrame or file source), ready to
            publish again.

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


def _missing(value: Any) -> bool:
    """Absent in a DataFrame row: None, NaN, NaT, pandas.NA."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    kind = type(value).__name__
    return kind in ("NaTType", "NAType")


def _frame_rows(frame: Any) -> Iterator[dict[str, Any]]:
    """The rows of a DataFrame as records: missing values left out (a column that does not
    apply to a row), numpy scalars as Python ones, Timestamps kept (sent as epoch ms)."""
    columns = list(frame.columns)
    bad = [c for c in columns if not isinstance(c, str)]
    if bad:
        raise TypeError(f"DataFrame column names must be strings, found {bad[:3]!r}")
    for start in range(0, len(frame), _FRAME_CHUNK):
        chunk = frame.iloc[start : start + _FRAME_CHUNK]
        for row in chunk.to_dict("records"):
            yield {k: v for k, v in row.items() if not _missing(v)}


def _is_frame(obj: Any) -> bool:
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "iloc")


def _frame_table(frame: Any, structs: bool = True) -> Tuple[Any, bool]:
    """A pandas DataFrame as a pyarrow Table (its index left out), to be published from its
    columns, and whether a column of it was made a list of structs here; None for the table
    when pyarrow is missing or cannot type a column (e.g. one that mixes numbers and strings),
    which leaves the DataFrame to the row-by-row path.

    A column of Python lists and dicts (``items``) is converted by the extension, not by
    pyarrow, whose conversion of such a column costs about as much as all the rest of
    publishing. With ``structs``, lists of flat dicts of one shape become a list<struct>
    column (``_core.struct_list_column``), which the core writes and checks as a Table's
    ``items``; other such columns become JSON text (Arrow's ``arrow.json`` extension type,
    ``_core.json_column``), written by the record writer of the dict path."""
    bad = [c for c in frame.columns if not isinstance(c, str)]
    if bad:
        raise TypeError(f"DataFrame column names must be strings, found {bad[:3]!r}")
    try:
        import pyarrow as pa
    except ImportError:
        return None, False
    unique = frame.columns.is_unique  # (pyarrow refuses a name twice: the row path says so)
    nested = [c for c in frame.columns if unique and _holds_containers(frame[c])]
    try:
        table = pa.Table.from_pandas(frame.drop(columns=nested), preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None, False
    made_structs = False
    for name in nested:
        values = frame[name].tolist()
        shaped = _core.struct_list_column(values) if structs else None
        if shaped is not None:
            column = pa.array(shaped)
            field = pa.field(name, column.type)
            made_structs = True
        else:
            try:
                column = pa.array(_core.json_column(values))
            except ValueError:  # a value with no JSON form: pyarrow's types say where
                try:
                    column = pa.Array.from_pandas(frame[name])
                except (pa.ArrowException, TypeError, ValueError):
                    return None, False
                field = pa.field(name, column.type)
            else:
                field = pa.field(name, column.type, metadata={_JSON_EXTENSION: b"arrow.json"})
        table = table.add_column(list(frame.columns).index(name), field, column)
    return table, made_structs


#: The field metadata key that names an Arrow extension type.
_JSON_EXTENSION = b"ARROW:extension:name"


def _holds_containers(column: Any) -> bool:
    """Whether a DataFrame column is one of Python objects whose first present value is a
    list, a tuple or a dict."""
    if column.dtype != object:
        return False
    for value in column:
        if not _missing(value):
            return isinstance(value, (list, tuple, dict))
    return False


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


def _json_lines(records: Iterable[Any]) -> Iterator[str]:
    for r in records:
        try:
            yield _core.to_json(r)
        except ValueError:
            yield json.dumps(r, default=str)


class _Bar(_progress._Bar):
    """Records read and accepted, on tqdm when installed, else a plain stderr line (closed as
    the events bar is)."""

    def __init__(self, total: Optional[int]) -> None:
        self._open("publish", total, " records")

    def __call__(self, update: dict[str, Any]) -> None:
        done = int(update.get("accepted", 0)) + int(update.get("rejected", 0))
        rejected, requests = update.get("rejected", 0), update.get("requests", 0)
        total = f"/{self._total:,}" if self._total else ""
        postfix, line = self._waiting(
            update,
            f"rejected={rejected}, requests={requests}",
            f"publish: {done:,}{total} records ({rejected:,} rejected)",
        )
        self._show(done, postfix, line)


def _progress_of(progress: ProgressArg, total: Optional[int]) -> tuple[Any, ...]:
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
    region: Optional[str],
    batch_size: BatchSize,
    validate: bool,
    progress: ProgressArg,
    cancelled: Optional[Callable[[], bool]] = None,
) -> PublishReport:
    """The body of :meth:`Client.publish <surveillance.Client.publish>` (and, in a worker
    thread, of :meth:`AsyncClient.publish <surveillance.AsyncClient.publish>`: ``cancelled``
    is asked between waits whether the caller gave up)."""
    if batch_size != "auto" and (isinstance(batch_size, bool) or not isinstance(batch_size, int)):
        raise TypeError(
            f'`batch_size` must be "auto" or an int from 1 to 100, got {type(batch_size).__name__}'
        )
    path: Optional[PathLike] = None
    source: Any = None
    # Columns: Arrow data, or the path of a Parquet file.
    arrow: Any = None
    made_structs = False  # a DataFrame's column made a list of structs by _frame_table
    parquet: Optional[str] = None
    size: Optional[int] = None
    rest: Optional[Callable[[int], Iterator[str]]] = None
    _check.text("region", region, optional=True, config=True)
    _check.flag("validate", validate)
    if isinstance(records, (str, os.PathLike)):
        path = _check.path("records", records)
        if not os.path.isfile(path):
            raise ValueError(
                f"`records` is a path, but no file {_check.shown(path)} exists: give the path "
                "of a JSON Lines, Parquet or CSV file, or the records (a dict, a list or "
                "iterable of dicts, a DataFrame, Arrow data)"
            )
        with open(path, "rb"):  # an unreadable file fails here, as OSError
            pass
        if _is_parquet(path):
            parquet, path = path, None
            rest = lambda n: _core.columns_json(None, parquet, skip=n)  # noqa: E731
        elif _records.file_format(os.fspath(path), strict=False) == "csv":
            rows = _records.csv_records(os.fspath(path))
            path, source, size = None, iter(rows), len(rows)
            rest = lambda n: _json_lines(rows[n:])  # noqa: E731
        else:
            rest = lambda n: _core.jsonl_rest(path, skip=n)  # noqa: E731
    elif isinstance(records, Mapping):
        source, size = iter([records]), 1
    elif _is_frame(records):
        frame = records
        table, made_structs = _frame_table(frame)
        size = len(frame)
        if table is not None:
            arrow = table
            rest = lambda n: _core.columns_json(table, skip=n)  # noqa: E731
        else:
            source = _frame_rows(frame)
            rest = lambda n: _json_lines(_frame_rows(frame.iloc[n:]))  # noqa: E731
    elif _is_arrow(records):
        arrow = records
        if _rereadable(records):
            size = len(records)
            rest = lambda n: _core.columns_json(records, skip=n)  # noqa: E731
    elif isinstance(records, (list, tuple)):
        seq = records
        source, size = iter(seq), len(seq)
        rest = lambda n: _json_lines(seq[n:])  # noqa: E731
    elif isinstance(records, (bytes, bytearray)) or not hasattr(records, "__iter__"):
        raise TypeError(
            "`records` must be a dict, an iterable of dicts, a pandas DataFrame, Arrow data "
            "(`__arrow_c_stream__`), or the path of a JSON Lines or Parquet file, got "
            f"{type(records).__name__}"
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
    )
    try:
        if arrow is not None or parquet is not None:
            try:
                data, error = _core.publish_columns(inner, arrow, parquet, **options)
            except ValidationError:
                if not made_structs:
                    raise
                # The columns were refused before anything was sent; a list of structs made
                # here is refused as a whole where its rows as JSON text are judged one by one,
                # as the dict path judges them.
                # (`rest` reads `table`, the one now published.)
                table, made_structs = _frame_table(frame, structs=False)
                arrow = table
                data, error = _core.publish_columns(inner, arrow, parquet, **options)
            if size is None:
                size = data["rows"]
        else:
            data, error = _core.publish(
                inner, source, None if path is None else os.fspath(path), **options
            )
    finally:
        close()
    stopped = data["interrupted"] or data["error"] is not None or error is not None
    unread: Optional[int] = None
    rest_of: Optional[Callable[[], Iterator[str]]] = None
    if stopped and rest is not None:
        taken = data["total"]
        if size is not None:
            unread = max(size - taken, 0)
        rest_of = (lambda: rest(taken)) if unread != 0 else None
    report = PublishReport(data, region=region, batch_size=batch_size, unread=unread, rest=rest_of)
    if error is None:
        return report

    if isinstance(error, KeyboardInterrupt) and not isinstance(error, PublishInterrupted):
        raise PublishInterrupted(report) from None
    try:
        error.report = report  # type: ignore[attr-defined]
    except AttributeError:
        pass
    raise error
