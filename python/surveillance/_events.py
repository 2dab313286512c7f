"""The event reads of both clients (``events``, ``iter_events``, ``event_batches``): the core
splits the range into windows and fetches them; here they become the output asked for, as
the windows complete. :meth:`~surveillance.Client.plan_events` and
:meth:`~surveillance.Client.sync_events` are the clients' own."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator, Optional, Union

from . import _check, _core, _output, _overloads, _progress
from ._batches import EventBatches
from ._gcpause import paused
from ._meter import Meter, ametered, metered
from ._raises import DENSE, RANGE, REQUEST, raises
from ._time import time_range
from .types import Event, Output, Progress, TimeLike

if TYPE_CHECKING:
    # The results of ``output=`` and of the Arrow streams, for the signatures shown.
    import pandas
    import polars
    import pyarrow

#: Completed windows that may wait for the Python thread in :meth:`Client.events`.
_EVENTS_BUFFER = 64
#: Events converted to dicts per step of the event loop (a few milliseconds of work).
_CHUNK = 500
#: How often an ``async for`` over a fetch hands its progress to the callback, seconds.
_TICK = 0.2


def query(
    start: TimeLike, end: TimeLike, report_id: object, refresh: object = False
) -> _core.EventQuery:
    """The checked query of a read of the events of ``[start, end)`` (of the report)."""
    _check.flag("refresh", refresh)
    lo, hi, report = time_range(start, end, report_id)
    return _core.EventQuery(lo, hi, report, refresh=bool(refresh))


#: A table that ``output=`` gives (``"arrow"``, ``"pandas"``, ``"polars"``).
_Converted = Union["pyarrow.Table", "pandas.DataFrame", "polars.DataFrame"]


class Events:
    """The event reads of :class:`~surveillance.Client`."""

    _inner: Any
    _meter: Callable[..., Meter]

    @_overloads.EVENTS.sync
    @metered
    @raises(RANGE, DENSE, REQUEST)
    def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        output: Output = "dicts",
        progress: Progress = "auto",
        refresh: bool = False,
    ) -> Union[list[Event], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every event whose ``startTime`` is in ``[start, end)``, exactly once, sorted by
        ``(startTime, id)``, however many there are.

        The service pages 100 at a time and refuses offsets past 10,000; the client splits
        the range into windows itself, in close to the fewest requests possible, whatever
        order and bound inclusivity the service uses. With a cache (see the ``cache``
        argument of :class:`Client`), the settled parts of the range that earlier reads kept
        are served from disk and only the rest is fetched: a re-run costs no request.

        Args:
            start: aware or naive (UTC) ``datetime``, ``date``, pandas ``Timestamp`` or
                ISO-8601 string.
            end: as ``start``; must be after it.
            report_id: only the events of this report (see :meth:`reports`).
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"`` (a ``pyarrow.Table`` when pyarrow is installed; without it, an
                object with ``__arrow_c_stream__`` that ``polars.DataFrame`` and duckdb read
                without a copy), ``"pandas"`` or ``"polars"``; the typed schema is the same on
                every call (see README).
            progress: ``"auto"`` (a bar in Jupyter and on a terminal, none otherwise),
                ``True``, ``False``, or a callable that receives update dicts: ``events``
                (emitted, in whole windows), ``fetched`` (received, page by page),
                ``requests``, ``done_ms``, ``total_ms``, ``windows``, and what the pages read
                so far let the client expect, None until they tell anything:
                ``expected_events``, ``expected_requests`` and ``eta_s`` (seconds left at the
                read rate), ``saved`` (requests not sent: windows served from the cache),
                and ``waiting``: while the service is unreachable or a 429's wait lasts, what
                the client waits for in words (the next try, the ``max_outage`` left), else
                None; ``waiting_brief``: the same in a bar's few columns. The bar shows these
                from the first request on.
            refresh: read the whole range again, past the cache, and replace what it held.

        Returns:
            A list of :class:`~surveillance.types.Event` for ``output="dicts"``; for the
            others, one row per event in the events' typed schema (nested fields as columns
            such as ``details.duration_sec``): a ``pyarrow.Table``, a ``pandas.DataFrame``
            or a ``polars.DataFrame``.

        Example:
            >>> events = client.events(emu.start, emu.end)
            >>> len(events), sorted(events[0])[:4]
            (200, ['cameras', 'createTime', 'details', 'deviceId'])
            >>> morning = client.events("2026-01-05", "2026-01-05T12:00Z", output="pandas")
            >>> len(morning) == len(client.events("2026-01-05", "2026-01-05T12:00Z"))
            True
            >>> str(morning["startTime"].dtype)
            'datetime64[ms, UTC]'
        """
        _output.check(output)
        asked = query(start, end, report_id, refresh)
        callback, close = _progress.make(progress, "events", self._inner.quota()["limit"])
        if output != "dicts":
            try:
                table = self._inner.events_arrow(asked, callback)
            finally:
                close()
            converted: _Converted = _output.convert(table, output)
            return converted
        # Each window becomes dicts here while the next ones are fetched in Rust. The cyclic
        # garbage collector is paused meanwhile: events are trees (no cycles), and collecting
        # while a million containers are created would traverse them again and again.
        stream = self._inner.events_stream(asked, callback, _EVENTS_BUFFER)
        events: list[Any] = []
        try:
            with paused():
                for window in stream:
                    events.extend(window)
            return events
        finally:
            stream.close()
            close()

    @raises(RANGE, DENSE, REQUEST)
    def iter_events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        progress: Progress = False,
        refresh: bool = False,
    ) -> Iterator[Event]:
        """The events of :meth:`events`, one dict at a time, in the same order, with bounded
        memory: windows are yielded as they complete, while the next ones are fetched. An
        error ends the iteration: what was fetched before it has been yielded.

        Args:
            start, end, report_id, refresh: as for :meth:`events`.
            progress: as for :meth:`events`, but ``False`` by default.

        Yields:
            Each :class:`~surveillance.types.Event`, a dict as the service sends it.

        Example:
            >>> sum(1 for _ in client.iter_events(emu.start, emu.end))
            200
            >>> first = next(client.iter_events(emu.start, emu.end))
            >>> first["id"] == emu.truth(emu.start, emu.end)[0]
            True
        """
        asked = query(start, end, report_id, refresh)
        callback, close = _progress.make(progress, "events", self._inner.quota()["limit"])
        # The stream's requests are the call's: it starts them at once, in the call's scope,
        # which is left before the first yield (the caller's code between events is not the
        # call's); what it spent is in `last_cost` once the iteration ends or is closed.
        meter = self._meter("iter_events", streaming=True)
        with meter:
            stream = self._inner.events_stream(asked, callback)
        try:
            for window in stream:
                yield from window
        finally:
            stream.close()
            close()
            meter.settle()

    @raises(RANGE, DENSE, REQUEST)
    def event_batches(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        refresh: bool = False,
    ) -> EventBatches:
        """The events of :meth:`events` as a stream of Arrow record batches (one per window),
        produced as windows complete, with bounded memory.

        Args:
            start, end, report_id, refresh: as for :meth:`events`.
            progress: a callable that receives the update dicts of :meth:`events` while the
                first window is fetched and whenever the consumer waits for the next (its
                exception ends the stream), or None.

        Returns:
            :class:`~surveillance.types.EventBatches`: an object with
            ``__arrow_c_stream__`` (read it once), e.g. for
            ``pyarrow.RecordBatchReader.from_stream``, ``pyarrow.parquet.ParquetWriter`` or
            :func:`~surveillance.write_parquet`. Iterated, it yields the batches (arro3's with
            ``arro3-core`` installed, else ``pyarrow.RecordBatch``).

        Example:
            >>> import pyarrow as pa
            >>> reader = pa.RecordBatchReader.from_stream(client.event_batches(emu.start, emu.end))
            >>> reader.read_all().num_rows
            200

        Raises:
            ImportError: pyarrow's reader is asked for and pyarrow is not installed.
        """
        asked = query(start, end, report_id, refresh)
        if progress is not None and not callable(progress):
            raise TypeError(f"`progress` must be a callable or None, got {type(progress).__name__}")
        return EventBatches(self._inner.events_arrow(asked, progress, stream=True))


class AsyncEvents:
    """The event reads of :class:`~surveillance.AsyncClient`, as coroutines and async
    iterators."""

    _inner: Any
    _meter: Callable[..., Meter]

    @_overloads.EVENTS.awaited
    @ametered
    @raises(RANGE, DENSE, REQUEST)
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        output: Output = "dicts",
        progress: Progress = "auto",
        refresh: bool = False,
    ) -> Union[list[Event], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every event whose ``startTime`` is in ``[start, end)``, exactly once, sorted by
        ``(startTime, id)`` (see :meth:`Client.events` for the cache and the outputs).

        Args:
            start, end, report_id, output, progress, refresh: as for :meth:`Client.events`.

        Returns:
            A coroutine of what :meth:`Client.events` returns.

        Example:
            >>> import asyncio
            >>> len(asyncio.run(async_client.events(emu.start, emu.end, output="arrow")))
            200
        """
        _output.check(output)
        asked = query(start, end, report_id, refresh)
        if output != "dicts":
            table = await self._inner.events_arrow(asked, awaitable=True)
            converted: _Converted = _output.convert(table, output)
            return converted
        callback, close = _progress.make(progress, "events", self._inner.quota()["limit"])
        events: list[Any] = []
        try:
            # The collector is paused while the list grows (see _gcpause): its full passes over
            # the events already held would stall the event loop.
            with paused():
                async for chunk in self._chunks(asked, callback):
                    events.extend(chunk)
            return events
        finally:
            close()

    async def _chunks(
        self,
        asked: _core.EventQuery,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        meter: Optional[Meter] = None,
    ) -> AsyncIterator[list[Any]]:
        # The stream starts its requests in `meter`'s call when given (else in the caller's).
        with meter if meter is not None else contextlib.nullcontext():
            stream = self._inner.events_stream(asked, progress)
        async for chunk in _pulled(stream, progress, lambda: stream.next_async(_CHUNK)):
            yield chunk

    @raises(RANGE, DENSE, REQUEST)
    async def iter_events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        refresh: bool = False,
    ) -> AsyncIterator[Event]:
        """The events of :meth:`events`, one dict at a time, in the same order, with bounded
        memory (``async for event in client.iter_events(start, end)``).

        Args:
            start, end, report_id, refresh: as for :meth:`Client.events`.

        Yields:
            Each :class:`~surveillance.types.Event`, a dict as the service sends it.

        Example:
            >>> import asyncio
            >>> async def count():
            ...     return sum([1 async for _ in async_client.iter_events(emu.start, emu.end)])
            >>> asyncio.run(count())
            200
        """
        asked = query(start, end, report_id, refresh)
        # What the iteration spent is in ``last_cost`` once it ends or is closed.
        meter = self._meter("iter_events", streaming=True)
        try:
            async for chunk in self._chunks(asked, meter=meter):
                for event in chunk:
                    yield event
        finally:
            meter.settle()

    @raises(RANGE, DENSE, REQUEST)
    async def event_batches(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        refresh: bool = False,
    ) -> AsyncIterator[pyarrow.RecordBatch]:
        """The events of :meth:`events` as Arrow record batches (one per window), produced as
        windows complete, with bounded memory (``async for batch in ...``).

        Args:
            start, end, report_id, refresh: as for :meth:`Client.events`.
            progress: a callable that receives the update dicts of :meth:`Client.events` (on
                the event loop, about every 0.2 s while the fetch moves, and once at the end;
                its exception ends the iteration), or None.

        Yields:
            Each window's events as a record batch with ``__arrow_c_array__`` (an arro3
            ``RecordBatch``, which ``pyarrow.record_batch`` takes without a copy; its
            interface is ``pyarrow.RecordBatch``'s).

        Example:
            >>> import asyncio, pyarrow as pa
            >>> async def rows():
            ...     batches = async_client.event_batches(emu.start, emu.end)
            ...     return sum([pa.record_batch(b).num_rows async for b in batches])
            >>> asyncio.run(rows())
            200
        """
        asked = query(start, end, report_id, refresh)
        if progress is not None and not callable(progress):
            raise TypeError(f"`progress` must be a callable or None, got {type(progress).__name__}")
        # What the iteration spent is in ``last_cost`` once it ends or is closed (the stream
        # starts its requests in the call's scope, left before the first yield).
        meter = self._meter("event_batches", streaming=True)
        with meter:
            stream = self._inner.events_arrow(asked, progress, stream=True, awaitable=True)
        try:
            async for batch in _pulled(stream, progress, stream.next_async):
                yield batch
        finally:
            meter.settle()


async def _pulled(
    stream: Any, progress: Optional[Callable[[dict[str, Any]], Any]], pull: Callable[[], Any]
) -> AsyncIterator[Any]:
    """What ``await pull()`` gives until it gives None, handing the fetch's progress to
    ``progress`` meanwhile (see :class:`_Reporter`); the stream is closed on the way out."""
    reporter = _Reporter(stream, progress)
    try:
        while True:
            item = await pull()
            reporter.check()
            if item is None:
                reporter.finish()
                return
            yield item
    finally:
        reporter.stop()
        stream.close()


class _Reporter:
    """Hands a fetch's progress to its callback every :data:`_TICK` seconds while an ``async
    for`` over the fetch runs (the awaiting thread cannot call it), and once at the end. The
    callback's exception stops the fetch and is raised by :meth:`check`."""

    def __init__(self, stream: Any, callback: Optional[Callable[[dict[str, Any]], Any]]) -> None:
        self._stream = stream
        self._error: Optional[BaseException] = None
        self._task = None if callback is None else asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(_TICK)
            try:
                self._stream.report()
            except Exception as e:  # the callback's: it ends the iteration
                self._error = e
                self._stream.close()
                return

    def check(self) -> None:
        """Raises the callback's exception, if it raised one."""
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """The fetch is done: the last update is handed over."""
        self.stop()
        if self._task is not None:
            self._stream.report()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
