"""Type stubs of the native module ``surveillance._core`` (the Rust core's thin binding).

The public, documented classes are :class:`surveillance.Client` and
:class:`surveillance.Emulator`, which hold these native objects.
"""

import contextvars
import datetime
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
)

from ._core_results import (
    CacheEntry as CacheEntry,
)
from ._core_results import (
    CacheInfo as CacheInfo,
)
from ._core_results import (
    Cost as Cost,
)
from ._core_results import (
    EventPlan as EventPlan,
)
from ._core_results import (
    Failure as Failure,
)
from ._core_results import (
    PublishReport as PublishReport,
)
from ._core_results import (
    Quota as Quota,
)
from ._core_results import (
    Stats as Stats,
)

__all__ = [
    "DAY_MS",
    "DEFAULT_MAX_OUTAGE_S",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_WAIT_S",
    "DEFAULT_TIMEOUT_S",
    "MAX_SETTLE_S",
    "DEFAULT_SETTLE_S",
    "CACHE_SWITCHES",
    "LISTS",
    "REGIONS",
    "PUBLISHED_LIMITS",
    "BatchStream",
    "CALL",
    "CallScope",
    "CacheEntry",
    "CacheInfo",
    "Cost",
    "EventPlan",
    "EventQuery",
    "Quota",
    "Stats",
    "cache_info_at",
    "check_limits",
    "check_seconds",
    "cache_location",
    "scrub",
    "clear_cache_at",
    "Client",
    "columns",
    "columns_json",
    "json_column",
    "struct_list_column",
    "Emulator",
    "events_schema",
    "EventStream",
    "from_ms",
    "html_table",
    "Failure",
    "InterruptWatch",
    "JsonLines",
    "jsonl_rest",
    "publish",
    "PublishReport",
    "to_datetime",
    "to_json",
    "to_ms",
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
#: The default ``settle``, seconds (an hour): how long after it starts an event may change.
DEFAULT_SETTLE_S: float
#: The words of ``cache`` that turn it on (True) or off (False), lower case; any other text
#: names the directory.
CACHE_SWITCHES: dict[str, bool]
#: The core's list table: each list's ``name``, what it holds (``about``) and the keywords of
#: its ``filters``.
LISTS: list[dict[str, Any]]
#: The regions a client publishes to (``region=``).
REGIONS: list[str]
#: The provider's published limits, by the field names of :class:`surveillance.Limits`: the
#: one place the Python layer reads them from.
PUBLISHED_LIMITS: dict[str, Any]

@final
class EventQuery:
    """The range (epoch ms, ``[start_ms, end_ms)``) and the report of an event read, checked
    when it is made. ``refresh``: past the cache of settled events, replacing what it held of
    the range. ``partial``: a sync's fetch, which keeps what it gets when the daily quota runs
    out, is not refused up front for needing more than remains."""

    def __new__(
        cls,
        start_ms: int,
        end_ms: int,
        report_id: Optional[str] = None,
        *,
        refresh: bool = False,
        partial: bool = False,
    ) -> EventQuery: ...

@final
class Client:
    """The native client (see :class:`surveillance.Client`)."""

    def __new__(cls, **settings: Any) -> Client:
        """The arguments of :class:`surveillance.Client`, as keywords: their types checked
        there, their values here, by the core; and ``quota_dir``, the directory of the daily
        quota's ledgers (None: the user's cache directory's). Every setting is as
        ``surveillance._config`` resolved it: no ``SURVEILLANCE_*`` variable is read here."""
    def list(
        self,
        kind: str,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        *,
        arrow: bool = False,
        awaitable: bool = False,
    ) -> Any:
        """Every record of a list (``sites``, ``devices``, ``cameras``, ``reports``): a list of
        dicts, or with ``arrow`` one typed Arrow table (``__arrow_c_stream__``); with
        ``awaitable``, an awaitable of it."""
    def events_arrow(
        self,
        query: EventQuery,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        *,
        stream: bool = False,
        awaitable: bool = False,
    ) -> Any:
        """Every event of ``query`` as Arrow data: one table (one batch per window), or with
        ``stream`` record batches as they come (bounded memory); with ``awaitable``, the
        table as an awaitable and the batches for ``async for`` (a :class:`BatchStream`).
        ``progress`` gets the fetch's progress while the caller waits (the ``async for``
        stream's from its ``report``; the awaitable table reports none)."""
    def events_stream(
        self,
        query: EventQuery,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        buffer: int = 2,
        arrow: bool = False,
        interrupt: Optional[InterruptWatch] = None,
        *,
        carry: bool = False,
    ) -> EventStream:
        """The events of ``query``, window after window; at most ``buffer`` windows wait.
        ``interrupt``: once the watch fires, the fetch stops and the stream raises
        ``KeyboardInterrupt`` (a stream consumed off the main thread). ``carry``: a sync's
        fetch, which carries what it read to the next run when it stops early (see
        ``EventStream.stop`` and ``EventStream.carried``)."""
    def events_peek(
        self, query: EventQuery, interrupt: Optional[InterruptWatch] = None
    ) -> tuple[Any, int, Optional[float]]:
        """The first page of a fetch of ``query``'s range, held for that fetch (which then
        does not ask it again), and the events it shows to be the range's first, as an Arrow
        record batch, with the epoch ms they end at: all of a short page's range, those before
        a page sorted ascending ends, or none; and the events a millisecond of a full page
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
    def hold_carried(self, data: bytes, report_id: Optional[str] = None) -> int:
        """Holds the pages an earlier run of a sync carried (``EventStream.carried``'s blob)
        for this client's fetches, which take them instead of asking them again; how many.
        ``ValueError`` (why) when the blob is damaged or of another account or report."""
    def carry_to_cache(
        self, data: bytes, start_ms: int, end_ms: int, report_id: Optional[str] = None
    ) -> bool:
        """Keeps the carried pages ``data``, read from ``start_ms`` to ``end_ms``, in the
        cache of settled events for the next fetch from ``start_ms``; False without a cache."""
    def carried_from_cache(
        self, start_ms: int, report_id: Optional[str] = None
    ) -> Optional[tuple[bytes, int]]:
        """The pages carried in the cache from ``start_ms``, taken: the blob and the end of
        their range; or None."""
    def drop_carried(self, report_id: Optional[str] = None) -> int:
        """Drops the carried pages that no fetch took; how many."""
    def clear_cache(self) -> int:
        """Empties the cache of settled events; the files removed."""
    @overload
    def plan(
        self,
        query: EventQuery,
        progress: Optional[Callable[[dict[str, Any]], Any]] = None,
        *,
        awaitable: Literal[False] = False,
    ) -> EventPlan:
        """What fetching the events of ``query`` costs, found with a few requests: the core's
        plan, as an ``EventPlan``; with ``awaitable``, an awaitable of it.
        ``progress``: called with the count's progress (its requests, the range done) while
        the caller waits (not with ``awaitable``)."""
    @overload
    def plan(self, query: EventQuery, *, awaitable: Literal[True]) -> Awaitable[EventPlan]: ...
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
        start day as ``YYYY-MM-DD``), and ``quota_dir``, where its clients' ledgers are
        (None: the user's cache directory's), forgotten when it stops."""
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
    DATA_DEFAULTS: ClassVar[dict[str, Any]]
    """The defaults of the data: ``seed``, ``sites``, ``days``, ``events_per_day`` and
    ``start`` (``YYYY-MM-DD``)."""
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
class CallScope:
    """What one public call sends, counted apart from the client's other calls: the Python
    layer makes one per call (within the caller's current call, if any) and sets it in
    :data:`CALL` while the call starts its work."""

    def __new__(
        cls,
        parent: Optional[CallScope] = None,
        observe: bool = False,
        traceparent: Optional[str] = None,
    ) -> CallScope: ...
    def drain(self) -> Optional[dict[str, Any]]:
        """With ``observe``, what the call's requests did since the last drain (None
        otherwise): ``exchanges``, a dict per request (``method``, ``template``, ``server``,
        ``port``, ``status``, ``error``, ``resend``, ``sent``, ``token``, ``start`` in Unix ns,
        ``duration`` in ns), ``waits``, a dict per wait (``reason``, ``request``, ``seconds``,
        ``at``), and the counts ``tokens`` (received), ``retries`` (decided, as ``stats()``
        counts them) and ``events`` (read)."""
    @property
    def requests(self) -> int:
        """Requests that left the machine during the call (retries and token requests
        included)."""
    @property
    def retries(self) -> int:
        """Requests sent again after a failure."""
    @property
    def rate_limited(self) -> int:
        """429 answers received."""
    @property
    def waited(self) -> float:
        """Seconds its requests waited after 429s (waits at the same time each counted)."""
    @property
    def outage(self) -> float:
        """Seconds the service was unreachable during the call (an outage under way counted
        so far)."""

#: The public call running now, per thread and per asyncio task (None outside one).
CALL: contextvars.ContextVar[Optional[CallScope]]

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
    def stop(self) -> None:
        """A sync's fetch: asks nothing more, and ends once the answers in flight are in; the
        windows completed before still come out of the stream."""
    def carried(self) -> Optional[bytes]:
        """A sync's fetch, once ended: the pages read of the windows it did not hand out
        whole, as a blob for ``Client.hold_carried``; or None."""
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

def publish(
    client: Client,
    source: Optional[Any] = None,
    path: Optional[str] = None,
    *,
    columns: bool = False,
    rereadable: bool = False,
    loose: list[str] = ...,
    **options: Any,
) -> tuple[PublishReport, Optional[BaseException]]:
    """Publishes the records of ``source`` (an iterable) or of the JSON Lines file ``path``,
    or with ``columns`` the rows of Arrow ``source`` (``__arrow_c_stream__`` or
    ``__arrow_c_array__``) or of the Parquet file ``path``; returns the report and the
    exception to raise with it, or None. ``rereadable``: ``source`` can be read again from any
    row (a sequence, as ``source[n:]``; Arrow data exported again), for the rows a stopped
    publish's report keeps. With ``columns``, columns that do not fit the models raise
    ``ValidationError`` before anything is sent, unless the columns named in ``loose`` (lists
    of structs made from lists of dicts) are the cause: these then go as JSON text, judged row
    by row. The options, as keywords: ``region``, ``batch_size`` (None: "auto"),
    ``validate``, ``progress`` (called with a dict between waits) and ``cancelled`` (called
    between waits; true stops)."""

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

def check_seconds(name: str, value: float) -> None:
    """Checks the duration setting ``name`` (``timeout``, ``max_wait``, ``max_outage``,
    ``settle``) of ``value`` seconds against the core's bounds, as ``Client`` does: a
    ``ConfigError`` names the setting and its range."""

def to_datetime(
    value: Union[datetime.datetime, datetime.date, str], name: str = "time"
) -> datetime.datetime:
    """``value`` (a datetime, date, pandas Timestamp or ISO-8601 string) as an aware UTC
    datetime; naive values are taken as UTC. ``name`` names the argument in errors."""

def to_ms(value: Union[datetime.datetime, datetime.date, str], name: str = "time") -> int:
    """``value`` (as ``to_datetime`` reads it) as Unix epoch milliseconds (sub-millisecond
    parts are truncated)."""

def from_ms(ms: int) -> datetime.datetime:
    """Epoch milliseconds as an aware UTC datetime."""

def html_table(title: str, items: list[tuple[str, Any]]) -> str:
    """``items`` (``(name, value)`` pairs, in order) as the HTML table of a result called
    ``title``, for a ``_repr_html_``: the table every result of the package is drawn with."""

def to_json(record: Any) -> str:
    """The JSON text of a record, as ``publish`` writes it."""

def scrub(text: str) -> str:
    """``text`` with every secret this process knows replaced, as in error messages."""

def cache_location(cache: Optional[str] = None) -> Optional[str]:
    """The directory of the cache of settled events that a client of a remote service uses by
    default: ``cache`` (the setting, as ``SURVEILLANCE_CACHE`` gives it) when it names a
    directory, else the user's cache directory's."""

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
