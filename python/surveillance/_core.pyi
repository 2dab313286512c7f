"""Type stubs of the native module ``surveillance._core`` (the Rust core's thin binding).

The public, documented classes are :class:`surveillance.Client` and
:class:`surveillance.Emulator`, which hold these native objects.
"""

import datetime
import os
from collections.abc import Iterator, Mapping
from typing import (
    Any,
    Awaitable,
    Callable,
    ClassVar,
    Final,
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
    "DAY_MS",
    "DEFAULT_MAX_OUTAGE_S",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_WAIT_S",
    "DEFAULT_TIMEOUT_S",
    "MAX_SETTLE_S",
    "LISTS",
    "REGIONS",
    "PUBLISHED_LIMITS",
    "BatchStream",
    "CacheEntry",
    "CacheInfo",
    "Cost",
    "EventPlan",
    "Quota",
    "Stats",
    "cache_info_at",
    "check_limits",
    "cache_location",
    "clear_cache_at",
    "Client",
    "columns",
    "columns_json",
    "json_column",
    "struct_list_column",
    "Emulator",
    "events_schema",
    "EventStream",
    "Failure",
    "InterruptWatch",
    "JsonLines",
    "jsonl_rest",
    "publish",
    "publish_columns",
    "PublishReport",
    "to_json",
    "validate",
    "write_parquet",
    "_check",
    "_loads",
    "__version__",
]
__version__: str

#: Milliseconds in a day.
DAY_MS: int
#: Seconds a request may take by default, connection to last byte.
DEFAULT_TIMEOUT_S: float
#: Retries per request by default.
DEFAULT_MAX_RETRIES: int
#: The longest wait for a 429's ``Retry-After`` by default, seconds.
DEFAULT_MAX_WAIT_S: float
#: How long a call rides out the service being unreachable by default, seconds.
DEFAULT_MAX_OUTAGE_S: float
#: The longest ``settle``, seconds (30 days).
MAX_SETTLE_S: float
#: The core's list table: each list's ``name``, what it holds (``about``) and the keywords of
#: its ``filters``.
LISTS: list[dict[str, Any]]
#: The regions a client publishes to (``region=``).
REGIONS: list[str]
#: The provider's published limits, by the field names of :class:`surveillance.Limits`: the
#: one place the Python layer reads them from.
PUBLISHED_LIMITS: dict[str, Any]

@final
class Client:
    """The native client (see :class:`surveillance.Client`)."""

    def __new__(cls, **settings: Any) -> Client:
        """The arguments of :class:`surveillance.Client`, as keywords: their types checked
        there, their values here, by the core."""
    def list_dicts(
        self, kind: str, site_id: Optional[str] = None, device_id: Optional[str] = None
    ) -> list[dict[str, Any]]:
        """Every record of a list (``sites``, ``devices``, ``cameras``, ``reports``), as dicts."""
    def list_dicts_async(
        self, kind: str, site_id: Optional[str] = None, device_id: Optional[str] = None
    ) -> Awaitable[list[dict[str, Any]]]:
        """As ``list_dicts``, as an awaitable."""
    def list_arrow(
        self, kind: str, site_id: Optional[str] = None, device_id: Optional[str] = None
    ) -> Any:
        """Every record of a list as an Arrow table (``__arrow_c_stream__``)."""
    def list_arrow_async(
        self, kind: str, site_id: Optional[str] = None, device_id: Optional[str] = None
    ) -> Awaitable[Any]:
        """As ``list_arrow``, as an awaitable."""
    def events_arrow(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        refresh: bool = False,
    ) -> Any:
        """Every event of the range as an Arrow table (one batch per window)."""
    def events_arrow_async(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        refresh: bool = False,
    ) -> Awaitable[Any]:
        """As ``events_arrow``, as an awaitable (no progress)."""
    def events_reader(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        refresh: bool = False,
    ) -> Any:
        """The events of the range as a stream of Arrow record batches, handing ``progress``
        the fetch's progress while its consumer waits."""
    def events_reader_async(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        refresh: bool = False,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
    ) -> BatchStream:
        """The events of the range as record batches for ``async for`` (bounded memory); the
        stream's ``report`` hands ``progress`` the fetch's progress."""
    def events_stream(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        buffer: int = 2,
        arrow: bool = False,
        partial: bool = False,
        refresh: bool = False,
        interrupt: Optional[InterruptWatch] = None,
    ) -> EventStream:
        """The same events, window after window; at most ``buffer`` windows wait.
        ``partial``: a sync's fetch, not refused up front when the quota left is short.
        ``refresh``: past the cache of settled events, replacing what it held of the range.
        ``interrupt``: once the watch fires, the fetch stops and the stream raises
        ``KeyboardInterrupt`` (a stream consumed off the main thread)."""
    def events_peek(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        interrupt: Optional[InterruptWatch] = None,
    ) -> tuple[Any, int, Optional[float]]:
        """The first page of a fetch of the range, held for that fetch (which then does not
        ask it again), and the events it shows to be the range's first, as an Arrow record
        batch, with the epoch ms they end at: all of a short page's range, those before a
        page sorted ascending ends, or none; and the events a millisecond of a full page
        sorted descending (the range's last 100), or None."""
    def events_density(self, report_id: Optional[str] = None) -> Optional[float]:
        """The most events a millisecond this client's fetches under a quota found in a
        window of the report (or of all events); None before any."""
    def access_token(self) -> str:
        """A valid access token."""
    def access_token_async(self) -> Awaitable[str]:
        """As ``access_token``, as an awaitable."""
    def diagnose(self) -> str:
        """The effective settings and whether a token can be had, as text (no secrets)."""
    def diagnose_async(self) -> Awaitable[str]:
        """As ``diagnose``, as an awaitable."""
    def follow_clock(self, emulator: Emulator) -> None:
        """Reads the day of the daily quota from ``emulator``'s clock (which its
        ``advance_clock`` moves) instead of the local one, until the service's ``Date``
        headers correct it."""
    def stats(self) -> Stats:
        """The counters, with the quota, as a ``Stats``."""
    def cache_info(self) -> Optional[CacheInfo]:
        """What the cache of settled events holds (its whole directory), with the requests
        this client's reads saved, as a ``CacheInfo``; None without a cache."""
    def carried_until(self, start_ms: int, report_id: Optional[str] = None) -> Optional[int]:
        """The end (epoch ms) of the window starting at ``start_ms`` whose pages an earlier
        run of a sync the daily quota stopped kept in the cache, or None."""
    def clear_cache(self) -> int:
        """Empties the cache of settled events; the files removed."""
    def plan(
        self,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
    ) -> EventPlan:
        """What fetching the events of a range costs, found with a few requests: the core's
        plan, as an ``EventPlan``.
        ``progress``: called with the count's progress (its requests, the range done)."""
    def plan_async(
        self, start_ms: int, end_ms: int, report_id: Optional[str] = None
    ) -> Awaitable[EventPlan]:
        """As ``plan``, as an awaitable."""
    def quota(self) -> Quota:
        """Where the daily quota stands, as a ``Quota``."""
    def grant_requests(self, n: int) -> None:
        """Adds ``n`` requests to the allowance that a shared budget grants this client,
        putting one in force: each request then takes one, waiting for the next grant when
        none is left."""
    def close_allowance(self) -> None:
        """No more grants will come: a request that finds the allowance spent raises
        ``QuotaExhaustedError`` instead of waiting."""
    def end_allowance(self) -> int:
        """Ends the allowance (requests are no longer bounded by one); the requests left
        unspent."""
    def allowance(self) -> Optional[int]:
        """Requests left of the allowance in force, or None when none is."""
    def close(self) -> None:
        """Stops requests in flight; the client refuses new ones."""
    def config(self) -> dict[str, Any]:
        """The resolved configuration, secrets included (for pickling; never printed)."""
    @property
    def cache_dir(self) -> Optional[str]:
        """The directory of the cache of settled events (its root: the directory asked, or the
        cache's own folder in it), or None without one."""
    @property
    def base_url(self) -> str:
        """Base URL (no secret)."""
    @property
    def region(self) -> str:
        """Default publishing region."""

@final
class Emulator:
    """A running emulator of the service on a loopback port (see :class:`surveillance.Emulator`)."""

    def __new__(cls, **settings: Any) -> Emulator:
        """The arguments of :class:`surveillance.Emulator`, checked there, as keywords (the
        start day as ``YYYY-MM-DD``)."""
    def set_hostile(
        self,
        mode: Optional[str] = None,
        path: str = "/v2/events",
        count: Optional[int] = None,
        size: int = 52428800,
        status: int = 500,
    ) -> None:
        """Hostile answers to the next ``count`` requests under ``path``; None lifts them."""
    # Read-only: the service's addresses, the credentials it accepts and its data's range.
    url: Final[str]
    """Base URL of the service (no ``/v2``)."""
    eu_url: Final[str]
    """Base URL of the EU webhook."""
    api_key: Final[str]
    """The accepted ``x-api-key``."""
    client_id: Final[str]
    """The accepted client id."""
    client_secret: Final[str]
    """The accepted client secret."""
    audience: Final[str]
    """The accepted audience."""
    start_ms: Final[int]
    """First instant of the data, epoch milliseconds."""
    end_ms: Final[int]
    """End (exclusive) of the data, epoch milliseconds."""
    restricted_report_id: Final[str]
    """A report that exists but that the caller may not read."""
    ca_pem: Final[Optional[str]]
    """With ``tls=True``: the PEM of the authority that signed the emulator's certificate."""
    def outage(self, seconds: float, after: int = 0) -> None:
        """After ``after`` more requests, the port closed for ``seconds`` (a restart)."""
    def set_faults(self, **faults: float) -> None:
        """Replaces the injected faults, given by the names of
        :meth:`surveillance.Emulator.set_faults`'s arguments (each one left out is none)."""
    DIALECTS: ClassVar[dict[str, tuple[Any, ...]]]
    """Each dialect setting and its values, the default first: a tuple of names, or for
    ``token_requests`` ``(None, int)``."""
    def set_dialect(self, **dialect: Optional[Union[str, int]]) -> None:
        """Replaces the dialect, given by the names of :meth:`surveillance.Emulator.set_dialect`'s
        arguments (each one left out is its default)."""
    def set_semantics(self, order: str = "asc", bounds: str = "[)") -> None:
        """Sets the order and bound inclusivity of the events endpoint."""
    def set_limits(self, **limits: Optional[float]) -> None:
        """Enforces (or lifts, with None) the provider's published limits, given by the names
        of :class:`surveillance.Limits`'s fields."""
    def set_webhook(self, arrays: bool = True) -> None:
        """Whether the webhook accepts a JSON array of records as a body."""
    def set_token_lifetime(self, seconds: int) -> None:
        """``expires_in`` of the tokens issued from now on."""
    def advance_clock(self, seconds: float) -> None:
        """Moves the emulator's clock."""
    def revoke_tokens(self) -> None:
        """Refuses every token issued so far."""
    def add_events(
        self,
        at_ms: int,
        count: int = 1,
        site_id: Optional[str] = None,
        created_ms: Optional[int] = None,
    ) -> list[str]:
        """Inserts ``count`` events starting at ``at_ms`` (created at ``created_ms`` when
        given); returns their ids."""
    def update_event(
        self,
        event_id: str,
        end_ms: Optional[int] = None,
        confirmed: Optional[bool] = None,
        site_id: Optional[str] = None,
    ) -> dict[str, Any]:
        """Changes an event (its end, ``details.confirmed``, its site, each when given);
        returns it as now served."""
    def published(self, region: Optional[str] = None) -> list[Any]:
        """Stored webhook records (of one region, or all), as the service received them."""
    def clear_published(self) -> None:
        """Forgets the stored webhook records."""
    def resources(self, kind: str) -> list[dict[str, Any]]:
        """Every record of a resource list."""
    def truth(self, start_ms: int, end_ms: int, report_id: Optional[str] = None) -> list[str]:
        """Ids of the events with ``start <= startTime < end``, sorted by (startTime, id)."""
    def stats(self) -> dict[str, Any]:
        """The statistics, as a dict."""
    def reset_stats(self) -> None:
        """Zeroes the statistics."""
    def stop(self) -> None:
        """Stops the server; idempotent."""

@final
class InterruptWatch:
    """A watch of Ctrl-C that fires from any thread: while one lives, SIGINT's handler counts
    each signal before handing it on to Python's (which Python runs on the main thread only).
    It never fires where SIGINT is ignored or left to its default, nor off Unix."""

    def __init__(self) -> None: ...
    @property
    def fired(self) -> bool:
        """A SIGINT arrived since the watch was made."""

@final
class EventStream:
    """Completed windows of events, in time order, as lists of dicts (or record batches)."""

    def __iter__(self) -> EventStream: ...
    def __next__(self) -> Any: ...
    def next_async(self, limit: int = 1000) -> Awaitable[Optional[list[dict[str, Any]]]]:
        """The next events (at most ``limit``), or None at the end, as an awaitable."""
    def report(self) -> None:
        """Hands ``progress`` the fetch's latest progress, if it moved since the last call."""
    def close(self) -> None:
        """Stops the fetch."""
    @property
    def frontier_ms(self) -> int:
        """The end of the last window handed out: every event before it has been."""

@final
class BatchStream:
    """Record batches of events for ``async for``."""

    def next_async(self) -> Awaitable[Optional[Any]]:
        """The next record batch (``__arrow_c_array__``), or None at the end."""
    def report(self) -> None:
        """Hands ``progress`` the fetch's latest progress, if it moved since the last call."""
    def close(self) -> None:
        """Stops the fetch."""

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
        kind: str = ...,
    ) -> Failure: ...
    @property
    def index(self) -> int: ...
    @property
    def transaction_id(self) -> Optional[str]: ...
    @property
    def status(self) -> Optional[int]: ...
    @property
    def problems(self) -> list[Problem]: ...
    @property
    def message(self) -> str: ...
    @property
    def line(self) -> Optional[int]: ...
    @property
    def record_json(self) -> Optional[str]: ...
    @property
    def kind(self) -> str: ...
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
        rejected: list[Failure] = ...,
        unconfirmed: list[Failure] = ...,
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
    def total(self) -> int: ...
    @property
    def sent(self) -> int: ...
    @property
    def accepted(self) -> int: ...
    @property
    def rejected(self) -> list[Failure]: ...
    @property
    def unconfirmed(self) -> list[Failure]: ...
    @property
    def requests(self) -> int: ...
    @property
    def retries(self) -> int: ...
    @property
    def rate_limited(self) -> int: ...
    @property
    def elapsed(self) -> float: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def error(self) -> Optional[str]: ...
    @property
    def region(self) -> Optional[str]: ...
    @property
    def batch_size(self) -> Union[str, int]: ...
    @property
    def unread(self) -> Optional[int]: ...
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

def publish(
    client: Client,
    source: Optional[Any] = None,
    path: Optional[str] = None,
    *,
    rereadable: bool = False,
    **options: Any,
) -> tuple[PublishReport, Optional[BaseException]]:
    """Publishes the records of ``source`` (an iterable; with ``rereadable``, a sequence whose
    rows not read a stopped publish's report keeps as ``source[n:]``) or of the JSON Lines file
    ``path``; returns the report and the exception to raise with it, or None. The options, as
    keywords: ``region``, ``batch_size`` (None: "auto"), ``validate``, ``progress`` (called
    with a dict between waits) and ``cancelled`` (called between waits; true stops)."""

def publish_columns(
    client: Client,
    data: Optional[Any] = None,
    path: Optional[str] = None,
    *,
    rereadable: bool = False,
    loose: list[str] = ...,
    **options: Any,
) -> tuple[PublishReport, Optional[BaseException]]:
    """Publishes the rows of Arrow ``data`` (``__arrow_c_stream__``/``__arrow_c_array__``;
    with ``rereadable``, exported again for the rows a stopped publish did not read) or of the
    Parquet file ``path`` as records; returns the report and the exception to raise with it, or
    None; the options of :func:`publish`. Raises ``ValidationError`` before sending anything
    when the columns do not fit the models, unless the columns named in ``loose`` (lists of
    structs made from lists of dicts) are the cause: these then go as JSON text, judged row by
    row."""

@final
class JsonLines:
    """Records as JSON texts, one at a time: the rows of Arrow data, or the records of a JSON
    Lines file."""

    def __iter__(self) -> JsonLines: ...
    def __next__(self) -> str: ...

def columns_json(
    data: Optional[Any] = None, path: Optional[str] = None, *, skip: int = 0
) -> JsonLines:
    """The rows of Arrow ``data`` or of the Parquet file ``path`` after the first ``skip``, as
    JSON texts written as ``publish_columns`` writes them (unchecked)."""

def json_column(values: Any) -> Any:
    """The values of an iterable as one Arrow column (``large_string``, ``__arrow_c_array__``)
    of JSON text, written as ``publish`` writes a record's values; a missing value (None, NaN,
    NaT, NA) null. ValueError names the row and place of a value with no JSON form."""

def struct_list_column(values: Any) -> Optional[Any]:
    """The values of an iterable (a DataFrame column's ``tolist()``) as one Arrow
    ``large_list<struct>`` column (``__arrow_c_array__``) when each is a list or tuple of flat
    dicts of one shape: the same keys in the same order, each holding one exact type (str,
    bool, a 64-bit int, a finite float), none None; a missing value (None, NaN, NaT, NA) a null
    list. None otherwise: the column is then written as JSON text (``json_column``)."""

def jsonl_rest(path: str, *, skip: int = 0) -> JsonLines:
    """The records of the JSON Lines file ``path`` after the first ``skip``, numbered as
    ``publish`` numbers them (non-blank lines), as texts."""

def validate(record: Any) -> list[dict[str, Any]]:
    """The problems of a record under its standard model (``path``, ``message``, ``severity``)."""

def check_limits(**limits: Optional[float]) -> None:
    """Checks limits given by their field names (``read_per_second``, ``read_concurrency``,
    ``publish_per_second``, ``publish_concurrency``, ``daily_requests``) against the core's
    bounds, for ``surveillance.Limits``, which checks only their types."""

def to_json(record: Any) -> str:
    """The JSON text of a record, as ``publish`` writes it."""

def cache_location() -> Optional[str]:
    """The directory of the cache of settled events that a client of a remote service uses by
    default: ``SURVEILLANCE_CACHE`` when it names a directory, else the user's cache
    directory's."""

def cache_info_at(path: str) -> CacheInfo:
    """What the cache of settled events that ``path`` names holds (its root ``path``, or the
    cache's own folder in it), as a ``CacheInfo`` (no client's reads: none saved); raises
    ``ConfigError`` for a file."""

def clear_cache_at(path: str) -> int:
    """Empties the cache of settled events that ``path`` names of what the cache wrote; the
    files removed. Raises ``ConfigError`` for a file or a directory without the cache's
    ``CACHEDIR.TAG``, and removes nothing."""

def write_parquet(data: Any, path: str) -> int:
    """Writes Arrow data (``__arrow_c_stream__``/``__arrow_c_array__``) to a Parquet file."""

def columns(table: Any, names: list[str]) -> dict[str, list[Any]]:
    """Columns of an Arrow table as Python lists (timestamps as epoch milliseconds)."""

def events_schema() -> Any:
    """The Arrow schema of events (``__arrow_c_schema__``; ``.names``): the one definition."""

def _check(
    record: Any,
) -> tuple[Optional[str], Optional[bool], int, Optional[int], list[dict[str, Any]]]:
    """A test build only (the ``test-seams`` feature): what ``publish`` makes of a record: its
    JSON text (None when it has no JSON form), the fused check's verdict (None: left to the
    careful path), the upsert key hashed in the walk, the key the core finds in the text (None:
    it refuses the text), and the problems ``validate`` gives."""

def _loads(text: str) -> Any:
    """A test build only: one JSON text as Python objects, by the converter of the service's
    answers."""

# --- results: each defined once, here (the binding's `results`) -----------------------------

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
        """Days of the daily quota they take, what remains today counting first."""
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
        limit: Optional[int] = None,
        used: int = 0,
        remaining: Optional[int] = None,
    ) -> Cost: ...
    @property
    def requests(self) -> int:
        """Requests this client sent during the call."""
    @property
    def limit(self) -> Optional[int]:
        """The day's quota (None without one)."""
    @property
    def used(self) -> int:
        """Requests sent today by every client of the machine with the same key."""
    @property
    def remaining(self) -> Optional[int]:
        """What is left of today's quota (None without one)."""
    @property
    def share(self) -> Optional[float]:
        """``requests`` as a share of the day's quota, or None."""
    def to_dict(self) -> dict[str, Any]:
        """The figures as a dict."""
    def _repr_html_(self) -> str: ...
    def __reduce__(self) -> tuple[type[Cost], tuple[Any, ...]]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

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
        """Requests sent today (the service's UTC day)."""
    @property
    def remaining(self) -> Optional[int]:
        """Requests left today (None without a limit)."""
    @property
    def resets_at(self) -> datetime.datetime:
        """When the budget comes back, an aware UTC datetime."""
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
        """Where the daily quota stands."""
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
        """Requests the reads that filled it spent."""
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
        """The directory: the one named, or the cache's own folder in it."""
    @property
    def bytes(self) -> int:
        """Bytes of its files."""
    @property
    def files(self) -> int:
        """Its files of events."""
    @property
    def requests_saved(self) -> int:
        """Requests this client's reads did not send, thanks to the cache."""
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
