"""What a call of a client spends: ``last_cost`` is left by each metered method, sync or
async, whether the call ends or raises."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar, cast


class Meter:
    """Counts what one call of a client sends: ``with client._meter(): ...`` leaves
    :class:`~surveillance.Cost` in ``client.last_cost``, whether the call ends or raises."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._before = client._sent()

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._client._settle_cost(self._before)


_F = TypeVar("_F", bound=Callable[..., Any])


def metered(method: _F) -> _F:
    """Leaves what each call of ``method`` spent in ``last_cost``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._meter():
            return method(self, *args, **kwargs)

    return cast(_F, wrapper)


def ametered(method: _F) -> _F:
    """Leaves what each call of the coroutine ``method`` spent in ``last_cost`` (calls running
    at the same time on one client count in each other's)."""

    @functools.wraps(method)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._meter():
            return await method(self, *args, **kwargs)

    return cast(_F, wrapper)
