"""What the methods that take ``output=`` return, per ``output``, for a user's type checker:
written once per family of signature (the lists without filters, the cameras, the events)
and shared by both clients.

Each family is a callable protocol whose overloaded ``__call__`` maps ``output`` to a result
type: ``"dicts"`` (the default) to its first type parameter, ``"arrow"``, ``"pandas"`` and
``"polars"`` to the next three. :class:`~surveillance.Client` fills them with the results
themselves, :class:`~surveillance.AsyncClient` with coroutines of them (:data:`Awaited`).
A method takes its family's type by a decorator that hands it back unchanged at run time
(its name, signature and docstring are the method's own)::

    @_overloads.rows_of(Site).sync
    def sites(self, output: str = "dicts") -> Any: ...

A new method with ``output=`` of an existing shape needs only that line; a new shape, a
protocol here and its :class:`Family`.
"""

from __future__ import annotations

import inspect
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Generic,
    Literal,
    Optional,
    Protocol,
    TypeVar,
    Union,
    cast,
    overload,
)

if TYPE_CHECKING:
    # The result types of ``output=`` only: none of them is needed at run time.
    from pandas import DataFrame as Frame
    from polars import DataFrame as PolarsFrame
    from pyarrow import Table

    from .types import Camera, Event, Output, Progress, TimeLike

_X = TypeVar("_X")
#: The result of an ``async def`` method that returns an ``_X``.
Awaited = Coroutine[Any, Any, _X]

#: The results of ``output="dicts"``, ``"arrow"``, ``"pandas"`` and ``"polars"``.
_D = TypeVar("_D", covariant=True)
_A = TypeVar("_A", covariant=True)
_P = TypeVar("_P", covariant=True)
_L = TypeVar("_L", covariant=True)


class ListMethod(Protocol[_D, _A, _P, _L]):
    """The type of ``sites``, ``devices`` and ``reports``: ``(output="dicts")``, whose result
    is the first type parameter for ``"dicts"`` (a list of records), the second for
    ``"arrow"`` (a ``pyarrow.Table``), the third for ``"pandas"`` and the fourth for
    ``"polars"`` (a ``DataFrame``); an :data:`Output` not known until run time gives their
    ``Union``. Another string is refused by the type checker (no overload matches)."""

    @overload
    def __call__(self, output: Literal["dicts"] = ...) -> _D: ...
    @overload
    def __call__(self, output: Literal["arrow"] = ...) -> _A: ...
    @overload
    def __call__(self, output: Literal["pandas"] = ...) -> _P: ...
    @overload
    def __call__(self, output: Literal["polars"] = ...) -> _L: ...
    @overload
    def __call__(self, output: Output = ...) -> Union[_D, _A, _P, _L]: ...


class CamerasMethod(Protocol[_D, _A, _P, _L]):
    """The type of ``cameras``: ``(site_id=None, device_id=None, output="dicts")``, its
    results per ``output`` as for :class:`ListMethod`."""

    @overload
    def __call__(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["dicts"] = ...,
    ) -> _D: ...
    @overload
    def __call__(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["arrow"] = ...,
    ) -> _A: ...
    @overload
    def __call__(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["pandas"] = ...,
    ) -> _P: ...
    @overload
    def __call__(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["polars"] = ...,
    ) -> _L: ...
    @overload
    def __call__(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Output = ...,
    ) -> Union[_D, _A, _P, _L]: ...


class EventsMethod(Protocol[_D, _A, _P, _L]):
    """The type of ``events``: ``(start, end, report_id=None, output="dicts",
    progress="auto", refresh=False)``, its results per ``output`` as for
    :class:`ListMethod`."""

    @overload
    def __call__(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Literal["dicts"] = ...,
        progress: Progress = ...,
        refresh: bool = ...,
    ) -> _D: ...
    @overload
    def __call__(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Literal["arrow"] = ...,
        progress: Progress = ...,
        refresh: bool = ...,
    ) -> _A: ...
    @overload
    def __call__(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Literal["pandas"] = ...,
        progress: Progress = ...,
        refresh: bool = ...,
    ) -> _P: ...
    @overload
    def __call__(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Literal["polars"] = ...,
        progress: Progress = ...,
        refresh: bool = ...,
    ) -> _L: ...
    @overload
    def __call__(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = ...,
        output: Output = ...,
        progress: Progress = ...,
        refresh: bool = ...,
    ) -> Union[_D, _A, _P, _L]: ...


_S = TypeVar("_S")
_AS = TypeVar("_AS")


class Family(Generic[_S, _AS]):
    """The type of one family's methods: ``@family.sync`` gives a method of
    :class:`~surveillance.Client` the type ``_S``, ``@family.awaited`` a coroutine method of
    :class:`~surveillance.AsyncClient` the type ``_AS``. Both hand the method back as it is,
    marked with its family's protocol and the name of its dicts' type (``__overloads__``),
    from which the API reference writes its signatures (``docs/conf.py``)."""

    def __init__(self, protocol: type, dicts: str) -> None:
        self._overloads = (protocol, dicts)

    def sync(self, method: Callable[..., Any]) -> _S:
        return cast(_S, self._mark(method))

    def awaited(self, method: Callable[..., Any]) -> _AS:
        return cast(_AS, self._mark(method))

    def _mark(self, method: Callable[..., Any]) -> Callable[..., Any]:
        method.__overloads__ = self._overloads  # type: ignore[attr-defined]
        return method


_R = TypeVar("_R")
_F = TypeVar("_F", bound=Callable[..., Any])


def signature_of(model: Callable[..., Any]) -> Callable[[_F], _F]:
    """Gives the decorated method ``model``'s parameters where introspection reads them
    (``inspect.signature``, Jupyter's ``?``, the API reference), its own return annotation
    kept: an :class:`~surveillance.AsyncClient` method whose parameters are the
    :class:`~surveillance.Client` method's, typed for the type checker by a ``TypedDict``
    (``**options: Unpack[...]``), shows them as that method does."""

    def give(method: _F) -> _F:
        returns = inspect.signature(method).return_annotation
        shown = inspect.signature(model).replace(return_annotation=returns)
        method.__signature__ = shown  # type: ignore[attr-defined]
        return method

    return give


def rows_of(
    record: type[_R],
) -> Family[
    ListMethod[list[_R], Table, Frame, PolarsFrame],
    ListMethod[Awaited[list[_R]], Awaited[Table], Awaited[Frame], Awaited[PolarsFrame]],
]:
    """The family of a list without filters whose dicts are ``record``s."""
    return Family(ListMethod, f"list[{record.__name__}]")


CAMERAS: Family[
    CamerasMethod[list[Camera], Table, Frame, PolarsFrame],
    CamerasMethod[Awaited[list[Camera]], Awaited[Table], Awaited[Frame], Awaited[PolarsFrame]],
] = Family(CamerasMethod, "list[Camera]")

EVENTS: Family[
    EventsMethod[list[Event], Table, Frame, PolarsFrame],
    EventsMethod[Awaited[list[Event]], Awaited[Table], Awaited[Frame], Awaited[PolarsFrame]],
] = Family(EventsMethod, "list[Event]")
