"""The asyncio client: :class:`AsyncClient`, the same calls as :class:`~surveillance.Client` as
coroutines, over the same Rust core and runtime. Nothing blocks the event loop: requests run on
the core's own threads, and results are handed over in small chunks."""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Literal,
    Optional,
    Union,
    overload,
)

from . import _check, _output, _progress
from . import publish as _publish
from ._gcpause import paused
from ._lists import AsyncLists
from ._meter import ametered
from ._progress import ProgressArg
from ._time import TimeLike, time_range
from .client import EventPlan, _BaseClient
from .publish import PublishReport
from .types import Event

if TYPE_CHECKING:
    # For the return types of ``output=`` only: none of them is needed at run time.
    import pandas
    import polars
    import pyarrow

__all__ = ["AsyncClient"]

#: Events converted to dicts per step of the event loop (a few milliseconds of work).
_CHUNK = 500
#: How often an ``async for`` over a fetch hands its progress to the callback, seconds.
_TICK = 0.2


class AsyncClient(AsyncLists, _BaseClient):
    """The client for asyncio applications and notebooks: every call is a coroutine (or an
    async iterator) that never blocks the event loop.

    Same constructor (see :class:`~surveillance.Client` for its arguments), methods and
    outputs as :class:`~surveillance.Client`, on the same base; it is a context manager with
    ``async with``. Cancelling a call (``task.cancel()``, ``asyncio.wait_for``
    timing out) stops its requests at once and closes their connections. It can be used from
    several event loops in turn (``asyncio.run`` twice): the work runs on the core's own
    threads, not on a loop.

    Example:
        >>> import asyncio, surveillance as sv
        >>> async def main(emu):
        ...     async with emu.async_client() as client:
        ...         sites, events = await asyncio.gather(
        ...             client.sites(), client.events(emu.start, emu.end))
        ...         return len(sites), len(events)
        >>> with sv.Emulator(sites=3, days=1, events_per_day=100) as emu:
        ...     asyncio.run(main(emu))
        (3, 100)
    """

    # --- events -------------------------------------------------------------------------
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Literal["dicts"] = ...,
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> list[Event]: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str],
        output: Literal["arrow"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> pyarrow.Table: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        *,
        output: Literal["arrow"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> pyarrow.Table: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str],
        output: Literal["pandas"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> pandas.DataFrame: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        *,
        output: Literal["pandas"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> pandas.DataFrame: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str],
        output: Literal["polars"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> polars.DataFrame: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        *,
        output: Literal["polars"],
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> polars.DataFrame: ...
    @overload
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: str = ...,
        progress: ProgressArg = ...,
        refresh: bool = ...,
    ) -> Union[list[Event], pyarrow.Table, pandas.DataFrame, polars.DataFrame]: ...
    @ametered
    async def events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        output: str = "dicts",
        progress: ProgressArg = "auto",
        refresh: bool = False,
    ) -> Any:
        """Every event whose ``startTime`` is in ``[start, end)``, exactly once, sorted by
        ``(startTime, id)`` (see :meth:`Client.events` for the arguments, the cache and the
        outputs).

        >>> import asyncio, surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=80) as emu:
        ...     client = emu.async_client()
        ...     len(asyncio.run(client.events(emu.start, emu.end, output="arrow")))
        80

        Raises:
            ValueError: ``end`` is not after ``start``, a time cannot be read, or ``report_id`` is
                not a UUID (``TypeError`` for a value of the wrong type).
            DenseWindowError: more than 10,000 events share one millisecond.
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        _output.check(output)
        _check.flag("refresh", refresh)
        lo, hi, report_id = time_range(start, end, report_id)
        if output != "dicts":
            table = await self._inner.events_arrow_async(lo, hi, report_id, refresh)
            return _output.convert(table, output)
        callback, close = _progress.make(progress, "events", self.quota()["limit"])
        events: list[Any] = []
        try:
            # The collector is paused while the list grows (see _gcpause): its full passes over
            # the events already held would stall the event loop.
            with paused():
                async for chunk in self._chunks(lo, hi, report_id, refresh, callback):
                    events.extend(chunk)
            return events
        finally:
            close()

    async def _chunks(
        self,
        lo: int,
        hi: int,
        report_id: Optional[str],
        refresh: bool = False,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
    ) -> AsyncIterator[list[Any]]:
        stream = self._inner.events_stream(lo, hi, report_id, progress, 2, refresh=refresh)
        async for chunk in _pulled(stream, progress, lambda: stream.next_async(_CHUNK)):
            yield chunk

    async def iter_events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        refresh: bool = False,
    ) -> AsyncIterator[Event]:
        """The events of :meth:`events`, one dict at a time, in the same order, with bounded
        memory (``async for event in client.iter_events(start, end)``); ``refresh`` as for
        :meth:`Client.events`.

        >>> import asyncio, surveillance as sv
        >>> async def count(client, emu):
        ...     return sum([1 async for _ in client.iter_events(emu.start, emu.end)])
        >>> with sv.Emulator(sites=2, days=1, events_per_day=50) as emu:
        ...     asyncio.run(count(emu.async_client(), emu))
        50

        Raises:
            ValueError: ``end`` is not after ``start``, a time cannot be read, or ``report_id`` is
                not a UUID (``TypeError`` for a value of the wrong type).
            DenseWindowError: more than 10,000 events share one millisecond.
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        _check.flag("refresh", refresh)
        lo, hi, report_id = time_range(start, end, report_id)
        # What the iteration spent is in ``last_cost`` once it ends or is closed.
        with self._meter():
            async for chunk in self._chunks(lo, hi, report_id, refresh):
                for event in chunk:
                    yield event

    @ametered
    async def plan_events(
        self, start: TimeLike, end: TimeLike, report_id: Optional[str] = None
    ) -> EventPlan:
        """What :meth:`events` would cost, found with a few requests (see
        :meth:`Client.plan_events`).

        Raises:
            ValueError: ``end`` is not after ``start``, a time cannot be read, or ``report_id`` is
                not a UUID (``TypeError`` for a value of the wrong type).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        lo, hi, report_id = time_range(start, end, report_id)
        plan: EventPlan = await self._inner.plan_async(lo, hi, report_id)
        return plan

    async def event_batches(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        refresh: bool = False,
    ) -> AsyncIterator[Any]:
        """The events of :meth:`events` as Arrow record batches (one per window, each an
        object with ``__arrow_c_array__``, e.g. for ``pyarrow.record_batch``), produced as
        windows complete, with bounded memory (``async for batch in ...``).

        ``progress``: a callable that receives the update dicts of :meth:`Client.events`
        (on the event loop, about every 0.2 s while the fetch moves, and once at the end; its
        exception ends the iteration). ``refresh``: as for :meth:`Client.events`.

        Raises:
            ValueError: ``end`` is not after ``start``, a time cannot be read, or ``report_id`` is
                not a UUID (``TypeError`` for a value of the wrong type).
            DenseWindowError: more than 10,000 events share one millisecond.
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        _check.flag("refresh", refresh)
        lo, hi, report_id = time_range(start, end, report_id)
        if progress is not None and not callable(progress):
            raise TypeError(f"`progress` must be a callable or None, got {type(progress).__name__}")
        # What the iteration spent is in ``last_cost`` once it ends or is closed (counted from
        # before the stream starts its requests).
        with self._meter():
            stream = self._inner.events_reader_async(lo, hi, report_id, refresh, progress)
            async for batch in _pulled(stream, progress, stream.next_async):
                yield batch

    # --- publishing ---------------------------------------------------------------------
    @ametered
    async def publish(
        self,
        records: Any,
        *,
        region: Optional[str] = None,
        batch_size: _publish.BatchSize = "auto",
        validate: bool = True,
        progress: ProgressArg = "auto",
    ) -> PublishReport:
        """Posts records to the webhook (see :meth:`Client.publish`): the same sources,
        options and :class:`~surveillance.PublishReport`.

        The records are read and posted by a worker thread, so a generator of millions never
        blocks the event loop; cancelling the call stops publishing within 50 ms and aborts
        the requests in flight (the service upserts on ``transactionId``: publishing the same
        records again is safe).

        >>> import asyncio, surveillance as sv
        >>> rows = [{"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000,
        ...          "locationId": "store-1", "dataSourceId": "door-1",
        ...          "eventUniqueId": f"e-{i}", "eventType": "door open"} for i in range(5)]
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     report = asyncio.run(emu.async_client().publish(rows, progress=False))
        ...     report.accepted, len(emu.published())
        (5, 5)

        Raises:
            ValueError: ``batch_size`` outside 1..100, or ``records`` a path where no file is.
            ValidationError: columns that do not fit the models (``.problems``): nothing was sent.
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota ran out (``.report`` attached: the records
                not sent are in it).
            asyncio.CancelledError: the task was cancelled; the posts in flight are abandoned.
        """
        stop = threading.Event()
        work = asyncio.get_running_loop().run_in_executor(
            None,
            functools.partial(
                _publish.publish,
                self._inner,
                records,
                region=region,
                batch_size=batch_size,
                validate=validate,
                progress=progress,
                cancelled=stop.is_set,
            ),
        )
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            # Nobody awaits the worker now: its outcome is read so that none is reported lost.
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    # --- utilities ----------------------------------------------------------------------
    async def access_token(self) -> str:
        """A valid bearer token (fetched or reused), for debugging with curl.

        Raises:
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return str(await self._inner.access_token_async())

    async def diagnose(self) -> None:
        """Prints the effective settings and whether a token can be had, without secrets."""
        print(await self._inner.diagnose_async(), end="")

    async def aclose(self) -> None:
        """Stops requests in flight; later calls raise :class:`~surveillance.TransportError`."""
        self._inner.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


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
