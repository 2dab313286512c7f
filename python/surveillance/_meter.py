"""What a call of a client spends: each metered method, sync or async, runs in a call scope of
its own (``_core.CallScope``, in the context variable ``_core.CALL``), which counts the
requests of that call alone, and leaves its cost in ``last_cost`` for the caller's thread or
asyncio task, whether the call ends or raises. The call's telemetry (``_telemetry``: a span and
metrics, when an OpenTelemetry provider is configured) hangs on the same scope."""

from __future__ import annotations

import contextvars
import functools
import threading
from typing import Any, Callable, Optional, TypeVar, cast

from . import _core, _telemetry
from ._core import Cost


class Meter:
    """Counts what one call of a client sends: ``with client._meter(): ...`` runs the native
    calls inside it in the call's scope, and leaves :class:`~surveillance.Cost` in
    ``client.last_cost`` on the way out. A meter may be entered again (a generator that calls
    the service between yields); each exit leaves the cost so far. A call made within another
    counts in both."""

    def __init__(
        self,
        client: Any,
        name: str = "call",
        *,
        streaming: bool = False,
        method: Optional[Callable[..., Any]] = None,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        self._client = client
        # A stream's call ends at its last `settle`, another's when it is left.
        self._streaming = streaming
        self._telemetry = _telemetry.begin(client, name, method, args, kwargs)
        if self._telemetry is None:
            self._scope = _core.CallScope(_core.CALL.get())
        else:
            self._scope = _core.CallScope(
                _core.CALL.get(), observe=True, traceparent=self._telemetry.traceparent
            )
        self._entered: list[contextvars.Token[Any]] = []
        self._attached: list[Any] = []

    @property
    def requests(self) -> int:
        """Requests the call has sent so far."""
        return int(self._scope.requests)

    def __enter__(self) -> Meter:
        self._entered.append(_core.CALL.set(self._scope))
        if self._telemetry is not None:
            self._attached.append(self._telemetry.attach())
        return self

    def __exit__(self, kind: Any, error: Any, _tb: Any) -> None:
        token = self._entered.pop()
        try:
            _core.CALL.reset(token)
        except ValueError:
            # Left in another context than it was entered in (a generator finished by another
            # thread or task): that context's call is its own, and this one's value goes.
            pass
        self._client._settle_cost(self.requests, self._scope)
        if self._telemetry is not None:
            self._telemetry.detach(self._attached.pop())
            if self._streaming and error is None:
                self._telemetry.record(self._scope)
            else:
                self._telemetry.end(self._scope, error=error)

    def settle(self) -> None:
        """Leaves what the call has spent so far in ``last_cost`` (and ends its span)."""
        self._client._settle_cost(self.requests, self._scope)
        if self._telemetry is not None:
            self._telemetry.end(self._scope)

    def done(self, result: Any) -> None:
        """The call returned `result`: its span says what it tells (a publish's outcomes)."""
        if self._telemetry is not None:
            self._telemetry.end(self._scope, result=result)


_F = TypeVar("_F", bound=Callable[..., Any])


def metered(method: _F) -> _F:
    """Leaves what each call of ``method`` spent in ``last_cost``."""

    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        meter = self._meter(name, method=method, args=(self, *args), kwargs=kwargs)
        with meter:
            result = method(self, *args, **kwargs)
            meter.done(result)
            return result

    return cast(_F, wrapper)


def ametered(method: _F) -> _F:
    """Leaves what each call of the coroutine ``method`` spent in ``last_cost``: calls running
    at the same time on one client, each in its own task, count apart."""

    name = method.__name__

    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        meter = self._meter(name, method=method, args=(self, *args), kwargs=kwargs)
        with meter:
            result = await method(self, *args, **kwargs)
            meter.done(result)
            return result

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
