"""The results that ``surveillance._core``'s calls return (its classes ``EventPlan``,
``Cost``, ``Quota``, ``Stats``, ``CacheEntry``, ``CacheInfo``, ``PublishReport`` and
``Failure``), which the native module also registers as this module, so that their stubs
stand apart from the rest of its own and stubtest checks them here.
"""

import datetime
import os
from collections.abc import Iterator, Mapping
from typing import (
    Any,
    ClassVar,
    Literal,
    Optional,
    Union,
    final,
    overload,
    type_check_only,
)

import pandas
from typing_extensions import Self

from surveillance.errors import Problem

__all__ = [
    "EventPlan",
    "Cost",
    "Quota",
    "Stats",
    "CacheEntry",
    "CacheInfo",
    "PublishReport",
    "Failure",
]

@final
class Failure:
    """A record that was not accepted (documented as :class:`surveillance.Failure`)."""

    def __new__(
        cls,
        index: int,
        transaction_id: Optional[str],
        status: Optional[int],
        problems: list[tuple[str, str, str]],
        message: str,
        line: Optional[int] = None,
        record_json: Optional[str] = None,
        kind: str = "failed",
    ) -> Failure: ...
    @property
    def index(self) -> int:
        """Its position in the source (0-based)."""
    @property
    def transaction_id(self) -> Optional[str]:
        """Its ``transactionId``, when it has one."""
    @property
    def status(self) -> Optional[int]:
        """The HTTP status of the service's refusal, or None."""
    @property
    def problems(self) -> list[Problem]:
        """The validation problems that kept it back (list of :class:`Problem`)."""
    @property
    def message(self) -> str:
        """What happened; for a refusal, the service's own message."""
    @property
    def line(self) -> Optional[int]:
        """Its line number in a JSON Lines file (1-based), for a file source."""
    @property
    def record_json(self) -> Optional[str]:
        """The record as JSON text, as ``write_failures`` writes it."""
    @property
    def kind(self) -> str:
        """Why, in one word (see the class's description)."""
    @property
    def record(self) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class PublishReport:
    """What a publish did (documented as :class:`surveillance.PublishReport`)."""

    def __new__(
        cls,
        *,
        total: int = 0,
        sent: int = 0,
        accepted: int = 0,
        rejected: list[Failure] = [],
        unconfirmed: list[Failure] = [],
        requests: int = 0,
        retries: int = 0,
        rate_limited: int = 0,
        elapsed: float = 0.0,
        interrupted: bool = False,
        error: Optional[str] = None,
        region: Optional[str] = None,
        batch_size: Union[str, int, None] = None,
        unread: Optional[int] = None,
    ) -> PublishReport: ...
    @property
    def total(self) -> int:
        """Records taken from the source."""
    @property
    def sent(self) -> int:
        """Records that left the machine at least once."""
    @property
    def accepted(self) -> int:
        """Records the service accepted."""
    @property
    def rejected(self) -> list[Failure]:
        """The records not accepted, in source order (list of :class:`Failure`)."""
    @property
    def unconfirmed(self) -> list[Failure]:
        """The records sent whose fate no answer proves (list of :class:`Failure`)."""
    @property
    def requests(self) -> int:
        """Requests that left the machine, retries included."""
    @property
    def retries(self) -> int:
        """This publish's requests sent again."""
    @property
    def rate_limited(self) -> int:
        """429 answers to this publish's requests."""
    @property
    def elapsed(self) -> float:
        """Wall time in seconds."""
    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C."""
    @property
    def error(self) -> Optional[str]:
        """The message of an error that stopped publishing, or None."""
    @property
    def region(self) -> Optional[str]:
        """The region published to, as given (None: the client's)."""
    @property
    def batch_size(self) -> Union[str, int]:
        """The batch size, as given: ``"auto"`` or 1..100."""
    @property
    def unread(self) -> Optional[int]:
        """Records of the source not read when publishing stopped early, or None."""
    @property
    def ok(self) -> bool: ...
    @property
    def failures(self) -> list[Failure]: ...
    @property
    def rate(self) -> float: ...
    def counts(self) -> dict[str, int]: ...
    def summary(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_pandas(self) -> pandas.DataFrame: ...
    def raise_on_failure(self) -> PublishReport: ...
    def write_failures(self, path: Union[str, os.PathLike[str]]) -> int: ...
    @classmethod
    def combine(
        cls,
        reports: list[PublishReport],
        *,
        sizes: Optional[list[int]] = None,
        elapsed: Optional[float] = None,
    ) -> PublishReport: ...
    def __eq__(self, other: object, /) -> bool: ...
    def _repr_html_(self) -> str: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class EventPlan:
    """What fetching the events of a range will cost (:meth:`Client.plan_events`)."""

    def __new__(
        cls,
        events: int,
        requests: int,
        seconds: float,
        days: float,
        probes: int,
        exact: bool = False,
    ) -> EventPlan: ...
    @property
    def events(self) -> int:
        """Events in the range (estimated; exact when ``exact``)."""
    @property
    def requests(self) -> int:
        """Requests :meth:`Client.events` would make for them."""
    @property
    def seconds(self) -> float:
        """How long they take at the client's read rate (0 when it is unlimited)."""
    @property
    def days(self) -> float:
        """Days of the daily quota they take, what remains today counting first (0 without a
        daily limit). 0.2 is a fifth of a day's quota, which fits today; 2.5 the rest of
        today, all of tomorrow and half the day after.
        """
    @property
    def probes(self) -> int:
        """Requests the plan itself made (they count against the quota too)."""
    @property
    def exact(self) -> bool:
        """Every window's size was found, not estimated."""
    def to_dict(self) -> dict[str, Any]:
        """The figures as a dict."""
    def _repr_html_(self) -> str: ...
    def __reduce__(self) -> tuple[type[EventPlan], tuple[Any, ...]]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Cost:
    """What a call spent of the daily request quota: :attr:`Client.last_cost`."""

    def __new__(
        cls,
        requests: int,
        quota: Optional[Quota] = None,
        retries: int = 0,
        rate_limited: int = 0,
        waited: float = 0.0,
        outage: float = 0.0,
    ) -> Cost: ...
    @property
    def requests(self) -> int:
        """Requests this client sent during the call, token requests and retries included (the
        service counts them all). Calls running at the same time on the same client, from
        other threads, count here too.
        """
    @property
    def quota(self) -> Optional[Quota]:
        """Where the daily quota stood after the call, as :meth:`Client.quota
        <surveillance.Client.quota>` gives it (None before a client's first call).
        """
    @property
    def retries(self) -> int:
        """Requests of the call sent again after a failure (a 429, a 5xx, an outage's tries)."""
    @property
    def rate_limited(self) -> int:
        """Answers 429 (too many requests) the call received."""
    @property
    def waited(self) -> float:
        """Seconds the call's requests waited after 429s (waits at the same time each counted)."""
    @property
    def outage(self) -> float:
        """Seconds the service was unreachable during the call, ridden out within `max_outage`."""
    @property
    def share(self) -> Optional[float]:
        """``requests`` as a share of the day's quota, or None."""
    def to_dict(self) -> dict[str, Any]:
        """The figures as a dict (the quota's as a dict too)."""
    def _repr_html_(self) -> str: ...
    def __reduce__(self) -> tuple[type[Cost], tuple[Any, ...]]: ...
    def __eq__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@type_check_only
class _Figures(Mapping[str, Any]):
    """What the four read-only mappings among the results (Quota, Stats, CacheEntry,
    CacheInfo) have in common; no such class exists at run time."""

    def __getitem__(self, key: str, /) -> Any: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def get(self, key: str, default: Any = None, /) -> Any:
        """The value of ``key``, or ``default`` when it has no such key."""
    def to_dict(self) -> dict[str, Any]:
        """The figures as a dict of plain values (nested results as dicts)."""
    def _repr_html_(self) -> str: ...
    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@final
class Quota(_Figures):
    """Where the daily request quota stands (:meth:`Client.quota`); a read-only mapping."""

    def __new__(
        cls,
        limit: Optional[int],
        used: int,
        remaining: Optional[int],
        resets_at: datetime.datetime,
    ) -> Quota: ...
    @property
    def limit(self) -> Optional[int]:
        """Requests a day (None without a budget)."""
    @property
    def used(self) -> int:
        """Requests sent today (the service's UTC day), by every client of the machine with the
        key.
        """
    @property
    def remaining(self) -> Optional[int]:
        """Requests left today (None without a limit)."""
    @property
    def resets_at(self) -> datetime.datetime:
        """When the budget comes back, an aware UTC datetime (the service's next midnight, or the
        end of a wait the service asked for).
        """
    @overload
    def __getitem__(self, key: Literal["limit", "remaining"], /) -> Optional[int]: ...
    @overload
    def __getitem__(self, key: Literal["used"], /) -> int: ...
    @overload
    def __getitem__(self, key: Literal["resets_at"], /) -> datetime.datetime: ...
    @overload
    def __getitem__(self, key: str, /) -> Any: ...

@final
class Stats(_Figures):
    """The counters of a client (:meth:`Client.stats`); a read-only mapping."""

    def __new__(
        cls,
        requests: dict[str, int],
        retries: int,
        rate_limited: int,
        tokens: int,
        bytes_received: int,
        requests_saved: int,
        quota: Quota,
    ) -> Stats: ...
    @property
    def requests(self) -> dict[str, int]:
        """Requests sent by ``"METHOD /path"``, retries and token requests included."""
    @property
    def retries(self) -> int:
        """Requests sent again after a failure."""
    @property
    def rate_limited(self) -> int:
        """429 answers received."""
    @property
    def tokens(self) -> int:
        """Tokens fetched."""
    @property
    def bytes_received(self) -> int:
        """Response body bytes received."""
    @property
    def requests_saved(self) -> int:
        """Event requests that the cache of settled events saved."""
    @property
    def quota(self) -> Quota:
        """Where the daily quota stands, as :meth:`Client.quota <surveillance.Client.quota>`
        gives it.
        """
    @overload
    def __getitem__(self, key: Literal["requests"], /) -> dict[str, int]: ...
    @overload
    def __getitem__(
        self,
        key: Literal["retries", "rate_limited", "tokens", "bytes_received", "requests_saved"],
        /,
    ) -> int: ...
    @overload
    def __getitem__(self, key: Literal["quota"], /) -> Quota: ...
    @overload
    def __getitem__(self, key: str, /) -> Any: ...

@final
class CacheEntry(_Figures):
    """What the cache of settled events holds of one account and endpoint; a read-only
    mapping."""

    def __new__(
        cls,
        account: str,
        base_url: Optional[str],
        endpoint: str,
        report_id: Optional[str],
        ranges: list[tuple[datetime.datetime, datetime.datetime]],
        events: int,
        requests: int,
        bytes: int,
        files: int,
    ) -> CacheEntry: ...
    @property
    def account(self) -> str:
        """A hash of the base URL, API key and client id (never a secret)."""
    @property
    def base_url(self) -> Optional[str]:
        """The service's base URL, when known."""
    @property
    def endpoint(self) -> str:
        """The endpoint, e.g. ``"GET /v2/events"``."""
    @property
    def report_id(self) -> Optional[str]:
        """The report, or None for all events."""
    @property
    def ranges(self) -> list[tuple[datetime.datetime, datetime.datetime]]:
        """The ranges held, ``[start, end)`` pairs of aware UTC datetimes."""
    @property
    def events(self) -> int:
        """Events held."""
    @property
    def requests(self) -> int:
        """Requests the reads that filled it spent, which a read of all it holds saves."""
    @property
    def bytes(self) -> int:
        """Bytes of its files."""
    @property
    def files(self) -> int:
        """Its files."""
    @overload
    def __getitem__(self, key: Literal["account", "endpoint"], /) -> str: ...
    @overload
    def __getitem__(self, key: Literal["base_url", "report_id"], /) -> Optional[str]: ...
    @overload
    def __getitem__(
        self, key: Literal["ranges"], /
    ) -> list[tuple[datetime.datetime, datetime.datetime]]: ...
    @overload
    def __getitem__(self, key: Literal["events", "requests", "bytes", "files"], /) -> int: ...
    @overload
    def __getitem__(self, key: str, /) -> Any: ...

@final
class CacheInfo(_Figures):
    """What the cache of settled events holds (:meth:`Client.cache_info`); a read-only
    mapping."""

    def __new__(
        cls,
        path: str,
        bytes: int,
        files: int,
        requests_saved: int,
        entries: list[CacheEntry],
    ) -> CacheInfo: ...
    @property
    def path(self) -> str:
        """The directory (the one named, or the cache's own folder in it)."""
    @property
    def bytes(self) -> int:
        """Bytes of its files."""
    @property
    def files(self) -> int:
        """Its files of events."""
    @property
    def requests_saved(self) -> int:
        """Requests this client's reads did not send, thanks to the cache (0 without a client)."""
    @property
    def entries(self) -> list[CacheEntry]:
        """What it holds of each account and endpoint."""
    @overload
    def __getitem__(self, key: Literal["path"], /) -> str: ...
    @overload
    def __getitem__(self, key: Literal["bytes", "files", "requests_saved"], /) -> int: ...
    @overload
    def __getitem__(self, key: Literal["entries"], /) -> list[CacheEntry]: ...
    @overload
    def __getitem__(self, key: str, /) -> Any: ...
