"""The asyncio client: :class:`AsyncClient`, the same calls as :class:`~surveillance.Client` as
coroutines, over the same Rust core and runtime. Nothing blocks the event loop: requests run on
the core's own threads, and results are handed over in small chunks."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from . import _events, _overloads
from . import publish as _publish
from ._events import AsyncEvents
from ._lists import AsyncLists
from ._meter import ametered
from ._raises import RANGE, REQUEST, raises
from .client import Client, EventPlan, _BaseClient
from .publish import PublishReport
from .types import Records, TimeLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AsyncClient"]

_T = TypeVar("_T")


def _in_daemon_thread(call: Callable[[], _T]) -> asyncio.Future[_T]:
    """A future of the running loop for ``call()``, run by a daemon thread of its own.

    Not the loop's default executor: the interpreter's exit joins its threads, so a program
    that ends (``sys.exit``) while a publish runs would wait for the whole publish. A daemon
    thread inside the binding is held once the exit begins, as the sync client's threads are,
    and the program ends at once with its own status. ``call`` runs in a copy of the caller's
    context, so that its requests count in the caller's call (``last_cost``)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], Any]) -> None:
        if not future.done():  # a cancelled caller no longer waits for it
            outcome()

    def run() -> None:
        try:
            result = context.run(call)
        except BaseException as e:  # handed to the caller, whatever it is
            outcome = functools.partial(future.set_exception, e)
        else:
            outcome = functools.partial(future.set_result, result)
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop is closed: nobody awaits the outcome any more
            pass

    threading.Thread(target=run, name="surveillance-publish", daemon=True).start()
    return future


class AsyncClient(AsyncEvents, AsyncLists, _BaseClient):
    """The client for asyncio applications and notebooks: every call is a coroutine (or an
    async iterator) that never blocks the event loop.

    Same constructor (see :class:`~surveillance.Client` for its arguments), methods and
    outputs as :class:`~surveillance.Client`, on the same base; it is a context manager with
    ``async with``. Cancelling a call (``task.cancel()``, ``asyncio.wait_for``
    timing out) stops its requests at once and closes their connections. It can be used from
    several event loops in turn (``asyncio.run`` twice): the work runs on the core's own
    threads, not on a loop.

    Args:
        api_key, client_id, client_secret: as for :class:`~surveillance.Client`, as every
            other argument is (``region`` to ``profile``: the same names, defaults and
            environment variables).

    Raises:
        ConfigError: a setting is missing or cannot be used (as for
            :class:`~surveillance.Client`).
        ValueError: a number outside its bounds (``TypeError`` for a value of the wrong type).

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
    @ametered
    @raises(RANGE, REQUEST)
    async def plan_events(
        self, start: TimeLike, end: TimeLike, report_id: Optional[str] = None
    ) -> EventPlan:
        """What :meth:`events` would cost, found with a few requests (see
        :meth:`Client.plan_events`).

        Args:
            start, end, report_id: as for :meth:`Client.events`.

        Returns:
            A coroutine of the :class:`~surveillance.EventPlan`.

        Example:
            >>> import asyncio
            >>> plan = asyncio.run(async_client.plan_events(emu.start, emu.end))
            >>> plan.events
            200
        """
        asked = _events.query(start, end, report_id)
        plan: EventPlan = await self._inner.plan(asked, awaitable=True)
        return plan

    # --- publishing ---------------------------------------------------------------------
    @ametered
    @_overloads.signature_of(Client.publish)
    async def publish(
        self, records: Records, **options: Unpack[_publish.PublishOptions]
    ) -> PublishReport:
        """Posts records to the webhook (see :meth:`Client.publish`): the same sources,
        options (``region``, ``batch_size``, ``validate``, ``progress``, by keyword, with
        the same defaults) and :class:`~surveillance.PublishReport`.

        The records are read and posted by a worker thread, so a generator of millions never
        blocks the event loop; cancelling the call stops publishing within 50 ms and aborts
        the requests in flight (the service upserts on ``transactionId``: publishing the same
        records again is safe).

        Args:
            records, region, batch_size, validate, progress: as for :meth:`Client.publish`
                (the options by keyword).

        Returns:
            A coroutine of the :class:`~surveillance.PublishReport`.

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
        work = _in_daemon_thread(
            functools.partial(
                _publish.publish, self._inner, records, cancelled=stop.is_set, **options
            )
        )
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            # Nobody awaits the worker now: its outcome is read so that none is reported lost.
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    # --- utilities ----------------------------------------------------------------------
    @raises(REQUEST)
    async def access_token(self) -> str:
        """A valid bearer token (fetched or reused), for debugging with curl.

        Returns:
            A coroutine of the token, as the ``Authorization: Bearer`` header sends it.

        Example:
            >>> import asyncio
            >>> token = asyncio.run(async_client.access_token())
            >>> token == asyncio.run(async_client.access_token())  # reused until near its expiry
            True
        """
        return str(await self._inner.access_token_async())

    async def diagnose(self) -> None:
        """Prints the effective settings and whether a token can be had, without secrets (see
        :meth:`Client.diagnose`).

        Raises nothing: a token that cannot be had is printed as the reason why.

        Example:
            >>> import asyncio
            >>> asyncio.run(async_client.diagnose())  # doctest: +ELLIPSIS
            base_url:     http://127.0.0.1:...
            ...
            token:        ok
        """
        print(await self._inner.diagnose_async(), end="")

    async def aclose(self) -> None:
        """Stops requests in flight; later calls raise :class:`~surveillance.TransportError`.
        ``async with`` calls it at the end of the block.

        Raises nothing; closing a closed client does nothing.

        Example:
            >>> import asyncio
            >>> async def closed():
            ...     async with emu.async_client() as closing:
            ...         await closing.sites()
            ...     return closing
            >>> asyncio.run(asyncio.run(closed()).sites())
            Traceback (most recent call last):
            ...
            surveillance.errors.TransportError: ...
        """
        self._inner.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
