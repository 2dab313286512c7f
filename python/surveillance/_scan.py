"""Events as a polars ``LazyFrame``: :func:`scan_events`, an IO source (``polars.io.plugins``)
that pushes filters on ``startTime``, the projection and ``head(n)`` into the fetch.

Needs ``pip install 'surveillance[polars]'`` (polars 2.0 or later, for ``polars.io.plugins``)."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import re
import signal
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Tuple, cast
from zoneinfo import ZoneInfo

from . import _check, _core
from ._time import to_ms
from .client import Client
from .types import TimeLike

__all__ = ["scan_events"]

if TYPE_CHECKING:
    import polars

    from .client import Client

_log = logging.getLogger("surveillance")

#: Where the fetch's first page does not tell which events come first (a service that does
#: not sort them ascending), a first part of a scanned range is fetched alone: a ``head(n)`` of
#: a few rows finds them there, in one request; the rest of the range is one fetch. The part is
#: sized to hold about this many events at the densest rate the client's fetches have seen (a
#: page holds 100: a denser stretch than that rate still fits one)...
_PROBE_EVENTS = 30
#: ... or the rate of the scan's first page (sorted descending, the range's last 100 events),
#: or is this long, where neither tells one.
_PROBE_MS = 10 * 60_000
#: The first part's rows go to polars in this many frames: its streaming engine pulls a frame
#: or two past the ``head(n)`` it needs before it stops, and those are taken from what was
#: already fetched rather than from the next fetch.
_PROBE_FRAMES = 16

#: The events one query's pages reach (offsets stop at 10,000): a range over it is cut into
#: windows.
_CEILING = 10_000
#: Empty frames given after a part fetched for ``head(n)`` and before the next fetch starts:
#: polars' streaming engine pulls up to 3 frames past what its ``head(n)`` needs before it stops
#: pulling (polars 2.1, with 2 to 64 threads), and a pull that reached the next fetch would have
#: it fetch a whole window in the background, for rows nobody reads.
_PADDING = 16

#: Time units of polars' datetime literals, in units per millisecond.
_PER_MS = {"Milliseconds": 1, "Microseconds": 1_000, "Nanoseconds": 1_000_000}
#: A comparison with the literal on the left, as the same one with the column on the left.
_FLIPPED = {"Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt", "GtEq": "LtEq", "Eq": "Eq"}

Bounds = Tuple[Optional[int], Optional[int]]


def scan_events(
    client: Client,
    start: Optional[TimeLike] = None,
    end: Optional[TimeLike] = None,
    report_id: Optional[str] = None,
) -> polars.LazyFrame:
    """The events as a ``polars.LazyFrame`` that fetches only what the query needs.

    Nothing is requested until the frame is collected. Then:

    - filters on ``startTime`` (``>=``, ``>``, ``<``, ``<=``, ``==``, ``is_between``, joined
      with ``&``) with a time (a ``datetime``, aware or naive (UTC), a ``date``,
      ``pl.datetime(...)``, ``pl.lit(...)``, a string literal's ``.str.to_datetime()``)
      narrow the range fetched, with ``start`` and ``end``; other filters (``|``, other
      columns, ``siteId`` and ``deviceId`` included, which the events endpoint does not
      filter by, expressions of ``startTime``) are applied to the rows fetched, so the result
      is exact whatever the filter; where no lower bound is found, the error names each
      filter that bounds nothing, and why;
    - only the columns the query uses are built;
    - ``head(n)`` stops fetching once it has ``n`` rows. The fetch's first page is asked
      first: on a service that sorts events ascending (or a range of one page) it holds the
      range's first events, so ``head(10)`` costs one request, and a query that reads the
      whole range costs exactly what ``client.events`` of that range costs (the fetch takes
      that page rather than asking it again). On a service in another order, a first part
      is fetched on its own first, sized to hold about 30 events at the densest rate the
      client's fetches have seen (on a first scan, at the rate of the range's last 100
      events where the service sorts descending, else 10 minutes): ``head(10)`` costs
      one request when that part holds 10 to 99 events (two on the client's first scan, whose
      first page showed the order), and the whole range about what ``client.events`` costs
      and the part's request: the rest is fetched as ``events`` fetches it, with the page
      that showed the order (on a later scan of a range under 10,000 events, from the
      part's end). A client with a cache starts from the order and density that the account's
      earlier clients kept there: a client of a later process pays none of this first scan's
      requests, and its ``head(10)`` costs one request in any order;
    - windows flow to polars' streaming engine as they complete, so memory stays bounded as
      with :meth:`Client.iter_events <surveillance.Client.iter_events>`.

    Rows, columns and types are those of ``client.events(start, end, output="polars")``,
    sorted by ``(startTime, id)``; :attr:`Client.last_cost <surveillance.Client.last_cost>`
    tells what a collect spent.

    Args:
        client: a :class:`~surveillance.Client`.
        start: the earliest ``startTime`` (inclusive): aware or naive (UTC) ``datetime``,
            ``date``, pandas ``Timestamp`` or ISO-8601 string; or None, to take it from a
            filter.
        end: the ``startTime`` to stop before (exclusive), as ``start``; None: the filters'
            bound, else the time of the collect.
        report_id: only the events of this report.

    Returns:
        A ``polars.LazyFrame``.

    Raises:
        ValueError: (on collect) no lower bound on ``startTime``, neither ``start`` nor a
            filter: the scan would fetch all of time. ``end`` not after ``start`` (at once).
        TypeError: ``client`` is not a :class:`~surveillance.Client`.
        ImportError: polars is missing, or older than 2.0.

    Example:
        >>> import datetime as dt, polars as pl, surveillance as sv
        >>> with sv.Emulator(sites=12, days=2, events_per_day=3000) as emu:
        ...     client = emu.client()
        ...     day = pl.col("startTime").is_between(
        ...         dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc),
        ...         dt.datetime(2026, 1, 6, tzinfo=dt.timezone.utc), closed="left")
        ...     lf = sv.scan_events(client).filter(day & (pl.col("type") != "x"))
        ...     frame = lf.select("id", "startTime", "siteId").collect()
        ...     first = sv.scan_events(client).filter(day).head(10).collect()
        ...     requests = client.last_cost.requests
        >>> frame.shape, frame.columns, first.height, requests
        ((3000, 3), ['id', 'startTime', 'siteId'], 10, 1)
    """

    pl, register = _require_polars()
    if not isinstance(client, Client):
        raise TypeError(f"`client` must be a surveillance.Client, got {type(client).__name__}")
    lo = None if start is None else to_ms(start, "start")
    hi = None if end is None else to_ms(end, "end")
    if lo is not None and hi is not None and hi <= lo:
        raise ValueError(f"`end` must be after `start`, got [{start}, {end})")
    report_id = _check.text("report_id", report_id, optional=True, longest=100)

    def source(
        with_columns: Optional[List[str]],
        predicate: Any,
        n_rows: Optional[int],
        batch_size: Optional[int],
    ) -> Iterator[Any]:
        pushed, skipped = _pushdown(predicate)
        a, b = _intersect((lo, hi), pushed)
        if a is None:
            told = "".join(f"\n- {term}: {why}" for term, why in skipped)
            raise ValueError(
                "scan_events needs a lower bound on `startTime`, or it would fetch all of "
                "time: pass `start=` to scan_events, or filter on it, e.g. "
                '.filter(pl.col("startTime") >= pl.datetime(2026, 1, 5, time_zone="UTC"))'
                + (
                    f". These filters bound no range (they are applied to the rows fetched):{told}"
                    if told
                    else ""
                )
            )
        for term, why in skipped:
            _log.debug("scan_events: filter %s applied to the rows fetched: %s", term, why)
        if b is None:
            b = time.time_ns() // 1_000_000
        watch = _interrupt_watch()
        return _frames(pl, client, a, b, report_id, with_columns, predicate, n_rows, watch)

    schema = _schema(pl)
    try:
        frame = register(source, schema=schema, explain_name="surveillance.events")
    except TypeError:  # a polars without `explain_name`
        frame = register(source, schema=schema)
    return cast("polars.LazyFrame", frame)


def _require_polars() -> Tuple[Any, Any]:
    try:
        import polars as pl  # optional: polars
    except ImportError:
        raise ImportError("scan_events needs polars: pip install 'surveillance[polars]'") from None
    major = pl.__version__.split(".")[0]
    try:
        if not major.isdigit() or int(major) < 2:
            raise ImportError
        from polars.io.plugins import register_io_source  # optional: polars
    except ImportError:
        # Before 2.0, polars passes its filters to IO plugins in another form, which this does
        # not read: no filter would narrow the fetch.
        raise ImportError(
            f"scan_events needs polars 2.0 or later (its IO plugins), got {pl.__version__}: "
            "pip install -U 'surveillance[polars]'"
        ) from None
    return pl, register_io_source


def _interrupt_watch() -> Any:
    """A watch of Ctrl-C for the fetch of a collect made on the main thread under Python's
    default SIGINT handler, else None.

    Polars runs the source on a thread of its own, where Python runs no signal handler, while
    the main thread waits in ``collect``, where Python raises ``KeyboardInterrupt`` only once
    ``collect`` returns: without the watch, the fetch would go on to the end of its window.
    With it, the fetch stops at the signal and the source ends, so that ``collect`` returns
    at once and the main thread raises. Made here, on the thread of ``collect`` (polars calls
    the source there), which is the only one that can tell."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None  # another handler may not raise: the fetch must not end early
    return _core.InterruptWatch()


def _schema(pl: Any) -> Any:
    """The events' polars schema, read from the extension's Arrow schema."""
    return pl.Schema(_core.events_schema())


# --- the fetch -----------------------------------------------------------------------------
def _frames(
    pl: Any,
    client: Any,
    lo: int,
    hi: int,
    report_id: Optional[str],
    with_columns: Optional[List[str]],
    predicate: Any,
    n_rows: Optional[int],
    watch: Any = None,
) -> Iterator[Any]:
    """The frames of ``[lo, hi)``, filtered by the whole predicate (polars leaves it to the
    source), projected, and cut at ``n_rows``; with a ``watch`` of Ctrl-C (see
    ``_interrupt_watch``) that fires, nothing more.

    First the events that the fetch's first page shows to be the range's first (one request,
    held for the fetch, which does not ask it again: a service that sorts ascending, or a
    range of one page); then the rest in one fetch, a window at a time. Where that page tells
    nothing (another order), a first part (``_probe_ms``) is fetched alone first, so that
    ``head(n)`` still stops after a request."""
    if hi <= lo:
        return
    names = list(_schema(pl).names())
    columns = names if with_columns is None else list(with_columns)
    needed = set(columns) | {"startTime"}
    if predicate is not None:
        needed |= set(predicate.meta.root_names())
    read = [n for n in names if n in needed]
    naive = _naive_times(predicate)
    left = n_rows

    def frames(batch: Any, after: int, count: int) -> Iterator[Any]:
        nonlocal left
        frame = _frame(pl, batch, read)
        if after > lo:  # what an earlier part gave
            frame = frame.filter(pl.col("startTime").dt.epoch("ms") >= after)
        if predicate is not None and naive:
            # Naive times are UTC: the predicate is read of the frame with a naive `startTime`
            # (polars does not compare an aware column with a naive time).
            utc = frame.with_columns(pl.col("startTime").dt.replace_time_zone(None))
            frame = frame.filter(utc.select(predicate.alias("__keep")).to_series())
        elif predicate is not None:
            frame = frame.filter(predicate)
        frame = frame.select(columns)
        if left is not None:
            frame = frame.head(left)
            left -= frame.height
        yield from _pieces(frame, count)

    def padding() -> Iterator[Any]:
        empty = pl.DataFrame(schema=_schema(pl)).select(columns)
        for _ in range(_PADDING):
            yield empty

    # The requests are the call's (each native call that starts some runs in its scope), and
    # what they cost is left in `last_cost` before each frame: polars may never resume, nor
    # close, the source once it has the rows it needs.
    meter = client._meter("scan_events")
    if threading.current_thread() is threading.main_thread():
        watch = None  # polars' in-memory engine: Python sees the signal here itself
    try:
        asked = _event_requests(client)
        with meter:
            first, given, density = client._inner.events_peek(
                _core.EventQuery(lo, hi, report_id), interrupt=watch
            )
        peeked = _event_requests(client) > asked
        yield from frames(first, lo, _PROBE_FRAMES)
        if left == 0 or given >= hi:
            return
        yield from padding()
        rate = client._inner.events_density(report_id) or density
        probe = min(hi, lo + _probe_ms(rate))
        parts = [(lo, hi, given)]  # (from, to, where its new rows start)
        if given == lo and probe < hi:
            # The rest is fetched from `lo` where the peek asked the range's first page (the
            # page is then the rest's own, held for it, not a request more), or where the range
            # will be cut in windows anyway: the whole then costs `events` and the part. Else
            # from the part's end, which saves the part's request when the part holds as many
            # events as the rest's last page.
            wide = rate is not None and rate * (hi - lo) >= _CEILING
            parts = [(lo, probe, lo), (lo if peeked or wide else probe, hi, probe)]
        for i, (a, b, after) in enumerate(parts):
            part = _core.EventQuery(a, b, report_id)
            with meter:
                stream = client._inner.events_stream(part, None, 2, True, interrupt=watch)
            try:
                for batch in stream:
                    meter.settle()
                    count = _PROBE_FRAMES if i == 0 and len(parts) > 1 else 1
                    yield from frames(batch, after, count)
                    if left == 0:
                        return
            finally:
                stream.close()
            if i == 0 and len(parts) > 1:
                yield from padding()
    except KeyboardInterrupt:
        if watch is None or not watch.fired:
            raise
        # Ctrl-C, which the main thread raises as `collect` returns: raised here too, it would
        # be raised twice, the second time inside the caller's handler of the first.
        return
    finally:
        meter.settle()


def _event_requests(client: Any) -> int:
    """``GET /v2/events`` requests the client has sent."""
    return int(client._inner.stats()["requests"].get("GET /v2/events", 0))


def _probe_ms(rate: Optional[float]) -> int:
    """The length of a scan's first part (see ``_PROBE_EVENTS``), in ms, at ``rate`` events a
    ms: the densest the client's fetches have seen, else that of the page the scan asked first
    (a service sorting descending: the range's last 100 events); ``_PROBE_MS`` without one."""
    if not rate:
        return _PROBE_MS
    return max(1, math.ceil(_PROBE_EVENTS / rate))


def _frame(pl: Any, batch: Any, columns: List[str]) -> Any:
    """A polars DataFrame of ``columns`` of an Arrow record batch: only those are converted
    (with pyarrow; without it, all are, then selected)."""
    try:
        import pyarrow as pa  # optional: pyarrow
    except ImportError:
        return pl.DataFrame(batch).select(columns)
    return pl.from_arrow(pa.record_batch(batch).select(columns))


def _pieces(frame: Any, count: int) -> Iterator[Any]:
    """``frame`` cut into at most ``count`` frames of about equal height."""
    if count <= 1 or frame.height <= 1:
        yield frame
        return
    size = -(-frame.height // count)
    for offset in range(0, frame.height, size):
        yield frame.slice(offset, size)


# --- predicate pushdown ----------------------------------------------------------------------
#: What the events endpoint cannot filter by, by column: a filter on it is applied to the rows
#: fetched.
_NOT_PUSHED = {
    "siteId": "the events endpoint filters by time and report only, not by site",
    "deviceId": "the events endpoint filters by time and report only, not by device",
}


def _predicate_bounds(predicate: Any) -> Bounds:
    """``[lo, hi)`` (epoch ms, None: open) on ``startTime`` that every row the predicate keeps
    lies in, from what this reads of it (see :func:`_pushdown`)."""
    return _pushdown(predicate)[0]


def _pushdown(predicate: Any) -> Tuple[Bounds, List[Tuple[str, str]]]:
    """The bounds of :func:`_predicate_bounds`, and each part of the predicate (a term of its
    ``&``) that bounds nothing, with why: all of the predicate is applied to the rows fetched.

    Read: comparisons (``>=``, ``>``, ``<``, ``<=``, ``==``, either side) and ``is_between`` of
    ``startTime`` with a time: a datetime literal (with a time zone or naive, which is UTC), a
    date (its midnight, UTC), ``pl.datetime(...)``, ``pl.lit(...)``, a string literal parsed by
    ``.str.to_datetime()`` / ``.str.strptime()``, or a cast of one; and ``&`` of those."""
    if predicate is None:
        return (None, None), []
    bounds: Bounds = (None, None)
    skipped: List[Tuple[str, str]] = []
    for term in _terms(predicate):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = json.loads(term.meta.serialize(format="json"))
        except Exception:  # a polars whose plan does not serialize so: no pushdown
            skipped.append((str(term), "this polars does not show the filter's form"))
            continue
        got, why = _bounds(tree)
        if why is not None:
            skipped.append((str(term), why))
        bounds = _intersect(bounds, got)
    return bounds, skipped


def _terms(expr: Any) -> List[Any]:
    """The terms of an ``&`` of ``expr`` (itself where it is no ``&``), left to right."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = json.loads(expr.meta.serialize(format="json"))
        if tree.get("BinaryExpr", {}).get("op") == "And":
            right, left = expr.meta.pop()
            return _terms(left) + _terms(right)
    except Exception:
        pass
    return [expr]


def _bounds(node: Any) -> Tuple[Bounds, Optional[str]]:
    """The bounds of one filter, and why it bounds nothing where it does not (else None)."""
    kind, body = _only(node)
    if kind == "BinaryExpr" and isinstance(body, dict):
        op, left, right = body.get("op"), body.get("left"), body.get("right")
        if op == "And":
            (a, why_a), (b, why_b) = _bounds(left), _bounds(right)
            return _intersect(a, b), why_a if why_a and why_b else None
        if op in ("Or", "Xor", "LogicalOr"):
            return (None, None), "an `|` of filters bounds no single range"
        if op in _FLIPPED:
            for column, literal, how in ((left, right, op), (right, left, _FLIPPED[str(op)])):
                name = _column(column)
                if name == "startTime":
                    value = _instant(literal)
                    if value is None:
                        return (None, None), _NOT_A_TIME
                    return _compare(how, value), None
                if name in _NOT_PUSHED:
                    return (None, None), _NOT_PUSHED[name]
        return (None, None), _NOT_START_TIME
    if kind == "Function" and isinstance(body, dict):
        function, inputs = body.get("function"), body.get("input")
        between = function.get("Boolean", {}) if isinstance(function, dict) else None
        between = between.get("IsBetween") if isinstance(between, dict) else None
        if isinstance(between, dict) and isinstance(inputs, list) and len(inputs) == 3:
            if _column(inputs[0]) != "startTime":
                return (None, None), _NOT_START_TIME
            low, high = _instant(inputs[1]), _instant(inputs[2])
            closed = between.get("closed")
            if low is None or high is None or closed not in ("Both", "Left", "Right", "None"):
                return (None, None), _NOT_A_TIME
            return _intersect(
                _compare("GtEq" if closed in ("Both", "Left") else "Gt", low),
                _compare("LtEq" if closed in ("Both", "Right") else "Lt", high),
            ), None
    return (None, None), _NOT_START_TIME


_NOT_A_TIME = (
    "`startTime` is compared with what is not a constant time (a datetime or date literal, "
    "pl.datetime(...), or a string literal's .str.to_datetime())"
)
_NOT_START_TIME = "not a comparison or is_between of `startTime` with a time"


def _only(node: Any) -> Tuple[Optional[str], Any]:
    """The kind and body of a node of the serialized expression: ``{kind: body}``."""
    if isinstance(node, dict) and len(node) == 1:
        ((kind, body),) = node.items()
        return str(kind), body
    return None, None


def _column(node: Any) -> Optional[str]:
    """The column's name where ``node`` is a column (or an alias of one), else None."""
    kind, body = _only(node)
    if kind == "Column" and isinstance(body, str):
        return body
    if kind == "Alias" and isinstance(body, list) and body:
        return _column(body[0])
    return None


def _instant(node: Any) -> Optional[Tuple[int, int]]:
    """``(value, units per ms)`` of a constant time: a datetime literal (naive: UTC), a date
    (midnight UTC), ``pl.datetime(...)``, a parsed string literal, an alias or a cast to a
    datetime of one; else None."""
    kind, body = _only(node)
    if kind == "Alias" and isinstance(body, list) and body:
        return _instant(body[0])
    if kind == "Cast" and isinstance(body, dict):
        inner = _instant(body.get("expr"))
        target, unit = _only(_only(body.get("dtype"))[1])
        if inner is None or target != "Datetime" or not isinstance(unit, list) or not unit:
            return None
        if unit[0] not in _PER_MS:
            return None
        value, per = inner
        to = _PER_MS[unit[0]]
        return value * to // per, to  # a cast to a coarser unit floors
    if kind == "Literal":
        scalar = body.get("Scalar") if isinstance(body, dict) else None
        k, v = _only(scalar)
        if k == "Datetime" and isinstance(v, list) and len(v) == 3:
            value, unit = v[0], v[1]
            if isinstance(value, int) and not isinstance(value, bool) and unit in _PER_MS:
                return value, _PER_MS[unit]
        if k == "Date" and isinstance(v, int) and not isinstance(v, bool):
            return v * 86_400_000, 1
        return None
    if kind == "Function" and isinstance(body, dict):
        return _called_instant(body.get("function"), body.get("input"))
    return None


def _called_instant(function: Any, inputs: Any) -> Optional[Tuple[int, int]]:
    """The time of ``pl.datetime(...)`` of literals, or of a string literal's
    ``.str.to_datetime()`` / ``.str.strptime(pl.Datetime)``."""
    if not isinstance(inputs, list):
        return None
    kind, body = _only(function)
    if kind == "TemporalExpr":
        k, made = _only(body)
        if k != "DatetimeFunction" or not isinstance(made, dict) or len(inputs) < 3:
            return None
        parts = [_int_literal(x) for x in inputs[:7]]
        if any(p is None for p in parts):
            return None
        zone = made.get("time_zone")
        zone = zone.get("inner") if isinstance(zone, dict) else zone
        try:
            at = _dt.datetime(*parts[:6], microsecond=parts[6] if len(parts) > 6 else 0)  # type: ignore[arg-type, misc]
            at = _localized(at, zone)
        except (ValueError, TypeError, OverflowError, KeyError):
            return None
        return _micros(at), 1_000
    if kind == "StringExpr":
        k, made = _only(body)
        if k != "Strptime" or not isinstance(made, list) or len(made) != 2 or not inputs:
            return None
        literal = _only(inputs[0])[1] if _only(inputs[0])[0] == "Literal" else None
        string_kind, text = (
            _only(_only(literal)[1]) if _only(literal)[0] == "Scalar" else (None, None)
        )
        target = _only(made[0])[1] if _only(made[0])[0] == "Literal" else None
        target_kind, target_body = _only(target)
        options = made[1] if isinstance(made[1], dict) else {}
        if string_kind != "String" or not isinstance(text, str):
            return None
        if target_kind not in ("Datetime", "Date"):
            return None
        try:
            fmt = options.get("format")
            if fmt:
                at = _dt.datetime.strptime(text, fmt)
            else:
                at = _dt.datetime.fromisoformat(text)
        except (ValueError, TypeError):
            return None
        if target_kind == "Date":
            return _micros(_dt.datetime(at.year, at.month, at.day)), 1_000
        zone = target_body[1] if isinstance(target_body, list) and len(target_body) == 2 else None
        zone = zone.get("inner") if isinstance(zone, dict) else zone
        try:
            if at.tzinfo is None:
                at = _localized(at, zone)
        except (ValueError, KeyError):
            return None
        return _micros(at), 1_000
    return None


def _int_literal(node: Any) -> Optional[int]:
    """The value of an integer literal (``dyn int`` or a typed one), else None."""
    kind, body = _only(node)
    if kind != "Literal":
        return None
    for key in ("Dyn", "Scalar"):
        inner = body.get(key) if isinstance(body, dict) else None
        if isinstance(inner, dict) and len(inner) == 1:
            (value,) = inner.values()
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _localized(at: _dt.datetime, zone: Any) -> _dt.datetime:
    """``at``, naive, as a time of ``zone`` (None: UTC)."""
    if not zone or zone == "UTC":
        return at.replace(tzinfo=_dt.timezone.utc)

    return at.replace(tzinfo=ZoneInfo(str(zone)))


def _micros(at: _dt.datetime) -> int:
    """Microseconds since the epoch of ``at`` (naive: UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=_dt.timezone.utc)
    delta = at - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _naive_times(predicate: Any) -> bool:
    """Whether the predicate compares times without a time zone (and none with one)."""
    if predicate is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = predicate.meta.serialize(format="json")
    except Exception:
        return False
    text = re.sub(r"\s", "", text)
    naive = re.search(r'"Datetime":\[(-?\d+,)?"\w+",null\]|"time_zone":null', text)
    aware = re.search(r'"Datetime":\[(-?\d+,)?"\w+",\{|"time_zone":\{', text)
    return naive is not None and aware is None


def _compare(op: str, literal: Optional[Tuple[int, int]]) -> Bounds:
    """The ``[lo, hi)`` in whole ms of ``startTime OP literal``."""
    if literal is None:
        return None, None
    value, per = literal
    floor, ceil = value // per, -(-value // per)
    if op == "GtEq":
        return ceil, None
    if op == "Gt":
        return floor + 1, None
    if op == "Lt":
        return None, ceil
    if op == "LtEq":
        return None, floor + 1
    if op == "Eq":
        return ceil, floor + 1
    return None, None


def _intersect(a: Bounds, b: Bounds) -> Bounds:
    lo = a[0] if b[0] is None else b[0] if a[0] is None else max(a[0], b[0])
    hi = a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])
    return lo, hi
