"""Events as a polars ``LazyFrame``: :func:`scan_events`, an IO source (``polars.io.plugins``)
that pushes filters on ``startTime``, the projection and ``head(n)`` into the fetch.

Needs ``pip install 'surveillance[polars]'`` (polars 2.0 or later, for ``polars.io.plugins``)."""

from __future__ import annotations

import json
import math
import signal
import threading
import time
import warnings
from typing import Any, Iterator, List, Optional, Tuple

from . import _core
from ._time import TimeLike, to_ms

__all__ = ["scan_events"]

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
    client: Any,
    start: Optional[TimeLike] = None,
    end: Optional[TimeLike] = None,
    report_id: Optional[str] = None,
) -> Any:
    """The events as a ``polars.LazyFrame`` that fetches only what the query needs.

    Nothing is requested until the frame is collected. Then:

    - filters on ``startTime`` (``>=``, ``>``, ``<``, ``<=``, ``==``, ``is_between``, joined
      with ``&``) narrow the range fetched, with ``start`` and ``end``; other filters (``|``,
      other columns, expressions of ``startTime``) are applied to the rows fetched, so the
      result is exact whatever the filter;
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
    from . import _check
    from .client import Client

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
        a, b = _intersect((lo, hi), _predicate_bounds(predicate))
        if a is None:
            raise ValueError(
                "scan_events needs a lower bound on `startTime`, or it would fetch all of "
                "time: pass `start=` to scan_events, or filter on it, e.g. "
                '.filter(pl.col("startTime") >= datetime(2026, 1, 5, tzinfo=timezone.utc))'
            )
        if b is None:
            b = time.time_ns() // 1_000_000
        watch = _interrupt_watch()
        return _frames(pl, client, a, b, report_id, with_columns, predicate, n_rows, watch)

    schema = _schema(pl)
    try:
        return register(source, schema=schema, explain_name="surveillance.events")
    except TypeError:  # a polars without `explain_name`
        return register(source, schema=schema)


def _require_polars() -> Tuple[Any, Any]:
    try:
        import polars as pl
    except ImportError:
        raise ImportError("scan_events needs polars: pip install 'surveillance[polars]'") from None
    major = pl.__version__.split(".")[0]
    try:
        if not major.isdigit() or int(major) < 2:
            raise ImportError
        from polars.io.plugins import register_io_source
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
    left = n_rows

    def frames(batch: Any, after: int, count: int) -> Iterator[Any]:
        nonlocal left
        frame = _frame(pl, batch, read)
        if after > lo:  # what an earlier part gave
            frame = frame.filter(pl.col("startTime").dt.epoch("ms") >= after)
        if predicate is not None:
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

    # Counted from before the first request, and left in `last_cost` before each frame:
    # polars may never resume, nor close, the source once it has the rows it needs.
    before = client._sent()
    if threading.current_thread() is threading.main_thread():
        watch = None  # polars' in-memory engine: Python sees the signal here itself
    try:
        asked = _event_requests(client)
        first, given, density = client._inner.events_peek(lo, hi, report_id, interrupt=watch)
        peeked = _event_requests(client) > asked
        client._settle_cost(before)
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
            stream = client._inner.events_stream(
                a, b, report_id, None, 2, True, False, interrupt=watch
            )
            try:
                for batch in stream:
                    client._settle_cost(before)
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
        client._settle_cost(before)


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
        import pyarrow as pa
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
def _predicate_bounds(predicate: Any) -> Bounds:
    """``[lo, hi)`` (epoch ms, None: open) on ``startTime`` that every row the predicate keeps
    lies in, from what this reads of it (comparisons of ``startTime`` with datetime literals,
    ``is_between``, joined by ``&``); what it does not understand bounds nothing."""
    if predicate is None:
        return None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # a polars whose plan does not serialize so: no pushdown
        return None, None
    return _bounds(tree)


def _bounds(node: Any) -> Bounds:
    if not isinstance(node, dict) or len(node) != 1:
        return None, None
    ((kind, body),) = node.items()
    if kind == "BinaryExpr" and isinstance(body, dict):
        op, left, right = body.get("op"), body.get("left"), body.get("right")
        if op == "And":
            return _intersect(_bounds(left), _bounds(right))
        if op in _FLIPPED:
            if _is_start_time(left):
                return _compare(op, _datetime_ms(right))
            if _is_start_time(right):
                return _compare(_FLIPPED[op], _datetime_ms(left))
        return None, None
    if kind == "Function" and isinstance(body, dict):
        function, inputs = body.get("function"), body.get("input")
        between = function.get("Boolean", {}) if isinstance(function, dict) else None
        between = between.get("IsBetween") if isinstance(between, dict) else None
        if isinstance(between, dict) and isinstance(inputs, list) and len(inputs) == 3:
            if not _is_start_time(inputs[0]):
                return None, None
            low, high = _datetime_ms(inputs[1]), _datetime_ms(inputs[2])
            closed = between.get("closed")
            if closed not in ("Both", "Left", "Right", "None"):
                return None, None
            return _intersect(
                _compare("GtEq" if closed in ("Both", "Left") else "Gt", low),
                _compare("LtEq" if closed in ("Both", "Right") else "Lt", high),
            )
    return None, None


def _is_start_time(node: Any) -> bool:
    return node == {"Column": "startTime"}


def _datetime_ms(node: Any) -> Optional[Tuple[int, int]]:
    """``(value, units per ms)`` of a datetime literal with a time zone (an instant), else
    None (a naive one does not compare with ``startTime`` in polars)."""
    try:
        value, unit, zone = node["Literal"]["Scalar"]["Datetime"]
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(value, int) or isinstance(value, bool) or unit not in _PER_MS or not zone:
        return None
    return value, _PER_MS[unit]


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
