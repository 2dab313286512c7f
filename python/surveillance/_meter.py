"""What a call of a client spends: each metered method, sync or async, runs in a call scope of
its own (``_core.CallScope``, in the context variable ``_core.CALL``), which counts the
requests of that call alone, and leaves its cost in ``last_cost`` for the caller's thread or
asyncio task, whether the call ends or raises."""

from __future__ import annotations

import contextvars
import functools
import threading
from typing import Any, Callable, Optional, TypeVar, cast

from . import _core
from ._core import Cost


class Meter:
    """Counts what one call of a client sends: ``with client._meter(): ...`` runs the native
    calls inside it in the call's scope, and leaves :class:`~surveillance.Cost` in
    ``client.last_cost`` on the way out. A meter may be entered again (a generator that calls
    the service between yields); each exit leaves the cost so far. A call made within another
    counts in both."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._scope = _core.CallScope(_core.CALL.get())
        self._entered: list[contextvars.Token[Any]] = []

    @property
    def requests(self) -> int:
        """Requests the call has sent so far."""
        return int(self._scope.requests)

    def __enter__(self) -> Meter:
        self._entered.append(_core.CALL.set(self._scope))
        return self

    def __exit__(self, *exc: Any) -> None:
        token = self._entered.pop()
        try:
            _core.CALL.reset(token)
        except ValueError:
            # Left in another context than it was entered in (a generator finished by another
            # thread or task): that context's call is its own, and this one's value goes.
            pass
        self.settle()

    def settle(self) -> None:
        """Leaves what the call has spent so far in ``last_cost``."""
        self._client._settle_cost(self.requests, self._scope)


_F = TypeVar("_F", bound=Callable[..., Any])


def metered(method: _F) -> _F:
    """Leaves what each call of ``method`` spent in ``last_cost``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._meter():
            return method(self, *args, **kwargs)

    return cast(_F, wrapper)


def ametered(method: _F) -> _F:
    """Leaves what each call of the coroutine ``method`` spent in ``last_cost``: calls running
    at the same time on one client, each in its own task, count apart."""

    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._meter():
            return await method(self, *args, **kwargs)

    return cast(_F, wrapper)


class Costs:
    """The ``last_cost`` of one client: per thread and per asyncio task (a context variable),
    and the client's latest, for a context that has made no call (a thread started after the
    call, or the caller of ``asyncio.run``, whose task ran in a copy of its context)."""

    _lock = threading.Lock()

    def __init__(self) -> None:
        self._mine: contextvars.ContextVar[Optional[Cost]] = contextvars.ContextVar(
            "surveillance.last_cost", default=None
        )
        self.latest: Optional[Cost] = None

    def get(self, default: Cost) -> Cost:
        mine = self._mine.get()
        if mine is not None:
            return mine
        return default if self.latest is None else self.latest

    def set(self, cost: Cost) -> None:
        self._mine.set(cost)
        self.latest = cost

    @classmethod
    def of(cls, client: Any) -> Costs:
        """The costs of `client`, made on first use (a client made by ``_of`` or unpickled
        has not run ``__init__``)."""
        costs = client.__dict__.get("_costs")
        if costs is None:
            with cls._lock:
                costs = client.__dict__.setdefault("_costs", cls())
        return cast(Costs, costs)
