"""The synchronous client of the service."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Optional, Union

from . import _check, _config, _core, _events, _progress
from . import publish as _publish
from . import sync as _sync
from ._core import Cost, EventPlan, PublishReport
from ._events import Events
from ._lists import Lists
from ._meter import Costs, Meter, metered
from ._raises import RANGE, REQUEST, raises
from .errors import arg, worded
from .types import BatchSize, CacheInfo, Progress, Quota, Records, SettleLike, Stats, TimeLike

#: ``last_cost`` before a client's first call.
_NO_COST = Cost(requests=0)

__all__ = ["Client", "Limits", "EventPlan", "Cost"]


@dataclass(frozen=True)
class Limits:
    """Client-side limits, shared by every thread of one client; ``None`` lifts one.

    The defaults are the provider's published limits: reads 1 request/s and 3 in flight,
    the webhook 100 requests/s and 200 in flight, and 2,400 requests a day per API key, all
    endpoints together. A 429 delays only the request it refused (by its ``Retry-After``); when
    429s are sustained, the client also cuts its rate below these and climbs back within
    seconds, so a lower real limit costs a few 429s, not a storm.

    ``daily_requests`` is a budget shared by every client of the machine that uses the same
    key and service (a ledger under the user's cache directory, or ``SURVEILLANCE_QUOTA_DIR``):
    a request past it raises :class:`~surveillance.QuotaExhaustedError` before it is sent.
    Requests are counted whatever the limits, so :meth:`Client.quota` always knows the day's
    use.

    Bounds, so that every wait stays finite: rates from 1/3600 (one request an hour) to
    1,000,000 a second, concurrencies from 1 to 10,000, ``daily_requests`` from 1 to
    1,000,000,000.

    Args:
        read_per_second: requests a second to the read endpoints (lists, events, tokens).
        read_concurrency: read requests in flight at once.
        publish_per_second: requests a second to the webhook.
        publish_concurrency: webhook requests in flight at once.
        daily_requests: the day's budget of requests of the key, all endpoints together.

    Raises:
        ValueError: a value outside its bounds (``TypeError`` for one of the wrong type).

    Example:
        >>> sv.Limits(read_per_second=0.5, daily_requests=1000).read_concurrency
        3

    >>> Limits().read_per_second, Limits().publish_concurrency, Limits().daily_requests
    (1.0, 200, 2400)
    >>> Limits.unlimited().daily_requests is None
    True
    """

    # The defaults are read from the core's one statement of them (`Limits::PUBLISHED`).
    read_per_second: Optional[float] = _core.PUBLISHED_LIMITS["read_per_second"]
    read_concurrency: Optional[int] = _core.PUBLISHED_LIMITS["read_concurrency"]
    publish_per_second: Optional[float] = _core.PUBLISHED_LIMITS["publish_per_second"]
    publish_concurrency: Optional[int] = _core.PUBLISHED_LIMITS["publish_concurrency"]
    daily_requests: Optional[int] = _core.PUBLISHED_LIMITS["daily_requests"]

    def __post_init__(self) -> None:
        # The types here; the bounds are the core's, the same for a client and the emulator.
        _core.check_limits(**_check.limit_values(asdict(self)))

    @classmethod
    def unlimited(cls) -> Limits:
        """No client-side limit and no daily budget (the client still slows down on 429, and
        still counts its requests).

        Returns:
            :class:`Limits` whose every field is None.

        Raises nothing.

        Example:
            >>> limited = emu.client(limits=sv.Limits.unlimited())
            >>> limited.quota()["limit"] is None
            True
        """
        return cls(None, None, None, None, None)


class _BaseClient:
    """What :class:`Client` and :class:`~surveillance.AsyncClient` share: the constructor and
    its checks, the native client (``self._inner``, which owns the connections, the token and
    the limits), :meth:`quota`, :meth:`stats`, :meth:`close`, pickling and ``repr``."""

    _inner: _core.Client

    def __init__(
        self,
        api_key: Optional[str] = None,
        client_id: Optional[str] = None,
        client_secret: Optional[str] = None,
        *,
        region: Optional[str] = None,
        base_url: Optional[str] = None,
        eu_base_url: Optional[str] = None,
        audience: Optional[str] = None,
        timeout: Optional[float] = None,
        max_retries: int = _core.DEFAULT_MAX_RETRIES,
        limits: Optional[Limits] = None,
        ca_bundle: Optional[Union[str, os.PathLike[str]]] = None,
        trust_env: bool = True,
        max_body_bytes: Optional[int] = None,
        max_wait: float = _core.DEFAULT_MAX_WAIT_S,
        max_outage: Optional[float] = None,
        cache: Union[bool, str, os.PathLike[str], None] = None,
        settle: SettleLike = _sync.DEFAULT_SETTLE,
        cache_max_bytes: Optional[int] = None,
        trace_context: Optional[bool] = None,
        profile: Optional[str] = None,
    ) -> None:
        # The arguments as given, before any other name is bound: the native client takes
        # them as keywords.
        settings = dict(locals())
        del settings["self"], settings["profile"]
        _check.text("profile", profile, optional=True, config=True)
        # One resolution for every setting: argument, environment, profile, [default].
        resolved = _config.resolve(settings, profile=profile)
        _config.require_credentials(resolved, path=_config.config_file())
        for name in _CONNECTION:
            settings[name] = resolved[name].value
        api_key, client_secret = settings["api_key"], settings["client_secret"]
        client_id, audience = settings["client_id"], settings["audience"]
        base_url, eu_base_url = settings["base_url"], settings["eu_base_url"]
        region, ca_bundle = settings["region"], settings["ca_bundle"]
        timeout, max_outage = resolved["timeout"].value, resolved["max_outage"].value
        if cache is None and resolved["cache"].origin != "default":
            cache = resolved["cache"].value
        if limits is None and any(resolved[n].origin != "default" for n in _LIMITS):
            # 0 is "no limit", as on the command line.
            limits = Limits(**{n: resolved[n].value or None for n in _LIMITS})
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"`limits` must be a surveillance.Limits, got {type(limits).__name__}")
        for name, value in (("api_key", api_key), ("client_secret", client_secret)):
            _check.text(name, value, optional=True, secret=True, config=True)
        for name, value in (("client_id", client_id), ("audience", audience)):
            _check.text(name, value, optional=True, config=True)
        for name, value in (("base_url", base_url), ("eu_base_url", eu_base_url)):
            _check.text(name, value, optional=True, longest=2048, config=True)
        # Types here; values are the core's to check (one bound each, its words).
        _check.text("region", region, optional=True, config=True)
        _check.path("ca_bundle", ca_bundle, optional=True)
        _check.flag("trust_env", trust_env)
        trace_context = _check.flag("trace_context", resolved["trace_context"].value)
        for name, count in (
            ("max_retries", max_retries),
            ("max_body_bytes", max_body_bytes),
            ("cache_max_bytes", cache_max_bytes),
        ):
            _check.an_integer(name, count, optional=name != "max_retries")
        settings.update(
            cache=_cache_setting(cache),
            settle=_sync.parse_settle(settle).total_seconds(),
            quota_dir=_config.quota_dir(),
            timeout=_check.a_number("timeout", timeout),
            max_wait=_check.a_number("max_wait", max_wait),
            max_outage=None if max_outage is None else _check.a_number("max_outage", max_outage),
            limits=None if limits is None else asdict(limits),
            ca_bundle=None if ca_bundle is None else os.fspath(ca_bundle),
            trace_context=trace_context,
        )
        self._inner = _core.Client(**settings)

    @property
    def last_cost(self) -> Cost:
        """What the caller's last fetch, sync, list or publish on this client spent
        (:class:`Cost`): the requests of that call alone, counted apart from the calls that
        other threads or asyncio tasks make on the same client at the same time. A thread or
        task that has made no call reads the client's latest; ``Cost(requests=0)`` before the
        first.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=3, days=1, events_per_day=10) as emu:
        ...     client = emu.client()
        ...     _ = client.sites()
        ...     client.last_cost.requests  # a token and the page of sites
        2
        """
        return Costs.of(self).get(_NO_COST)

    def _sent(self) -> int:
        """Requests this client has sent, every endpoint together."""
        return sum(self._inner.stats()["requests"].values())

    def _meter(self, name: str = "call", **options: Any) -> Meter:
        return Meter(self, name, **options)

    def _settle_cost(self, requests: int, scope: Any = None) -> None:
        """Leaves `requests`, what the caller's call sent, in ``last_cost``, with the
        retries, 429s, waits and outage that its call `scope` (a ``_core.CallScope``) met."""
        if scope is None:
            Costs.of(self).set(Cost(requests, self.quota()))
            return
        Costs.of(self).set(
            Cost(
                requests,
                self.quota(),
                scope.retries,
                scope.rate_limited,
                round(scope.waited, 3),
                round(scope.outage, 3),
            )
        )

    @classmethod
    def _of(cls, inner: Any) -> Any:
        """A client of this class over an existing native client (same configuration,
        connections, token and limits)."""
        self = cls.__new__(cls)
        self._inner = inner
        return self

    def quota(self) -> Quota:
        """Where the daily request quota of this client's API key stands, counted by every
        client of the machine (see :class:`Limits`): ``limit`` (requests a day, None when no
        budget is set), ``used`` (requests sent today, the service's UTC day), ``remaining``
        (None without a limit) and ``resets_at`` (an aware UTC datetime: the service's next
        midnight, or the end of a wait the service asked for).

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.set_limits(daily_requests=50)
        ...     client = emu.client()
        ...     _ = client.sites()
        ...     q = client.quota()
        ...     q["limit"], q["used"], q["remaining"]
        (50, 2, 48)

        Returns:
            :class:`~surveillance.types.Quota`, a read-only mapping of those four.

        Raises nothing: the ledger is read on this machine, without a request.
        """
        return self._inner.quota()

    def stats(self) -> Stats:
        """Counters of this client: ``requests`` by ``"METHOD /path"``, ``retries``,
        ``rate_limited``, ``tokens``, ``bytes_received``, ``requests_saved`` (event requests
        that reads served from the cache of settled events did not send); and ``quota``, as
        :meth:`quota` gives it.

        Returns:
            :class:`~surveillance.types.Stats`, a read-only mapping of those counters.

        Raises nothing.

        Example:
            >>> counting = emu.client()
            >>> _ = counting.sites()
            >>> counting.stats()["requests"]["GET /v2/sites"], counting.stats()["retries"]
            (1, 0)
        """
        return self._inner.stats()

    def cache_info(self) -> Optional[CacheInfo]:
        """What the cache of settled events holds, or None when this client has no cache.

        ``path`` (the directory: the one named, or the cache's own folder in it), ``bytes``,
        ``files``, ``requests_saved`` (by this client's reads so far), and ``entries``: one per
        account and endpoint, with its ``account`` (a hash of the base URL, API key and client
        id, never a secret), ``base_url``, ``endpoint``, ``report_id``, ``ranges`` (the ranges
        held, as pairs of aware UTC datetimes), ``events``, ``requests`` (those the reads that
        filled it spent: what a read of all it holds saves), ``bytes`` and ``files``.

        Returns:
            :class:`~surveillance.types.CacheInfo`, or None without a cache.

        Raises:
            OSError: the cache directory cannot be read.

        >>> import surveillance as sv, tempfile
        >>> with sv.Emulator(sites=2, days=1, events_per_day=50) as emu:
        ...     client = emu.client(cache=tempfile.mkdtemp())
        ...     _ = client.events(emu.start, emu.end, progress=False)
        ...     _ = client.events(emu.start, emu.end, progress=False)
        ...     info = client.cache_info()
        >>> info["entries"][0]["events"], info["requests_saved"]
        (50, 1)
        """
        return self._inner.cache_info()

    def clear_cache(self) -> int:
        """Empties the cache of settled events (every account's, in this client's cache
        directory).

        Returns:
            The number of files removed (0 without a cache).

        Raises:
            OSError: a file of the cache cannot be removed.

        Example:
            >>> import tempfile
            >>> cached = emu.client(cache=tempfile.mkdtemp())
            >>> _ = cached.events(emu.start, emu.end, progress=False)
            >>> cached.clear_cache() > 0, cached.cache_info()["files"]
            (True, 0)
        """
        return self._inner.clear_cache()

    def close(self) -> None:
        """Stops requests in flight; later calls raise :class:`~surveillance.TransportError`.

        A client used as a context manager (``with``) is closed at the end of the block.

        Raises nothing; closing a closed client does nothing.

        Example:
            >>> closing = emu.client()
            >>> closing.close()
            >>> closing.sites()
            Traceback (most recent call last):
            ...
            surveillance.errors.TransportError: ...
        """
        self._inner.close()

    def __reduce__(self) -> Any:
        # Configuration only: the unpickled client fetches its own token.
        return (_restore, (type(self), self._inner.config()))

    def __repr__(self) -> str:
        inner = self._inner
        return f"{type(self).__name__}(base_url={inner.base_url!r}, region={inner.region!r})"


class Client(Events, Lists, _BaseClient):
    """A client of the service: thread-safe, picklable, a context manager.

    Every setting left as ``None`` is read, in this order, from its ``SURVEILLANCE_*``
    variable, the selected profile of the config file, the file's ``[default]`` table, and
    the built-in default (the table of settings is in the configuration guide):
    ``SURVEILLANCE_API_KEY``, ``SURVEILLANCE_CLIENT_ID``, ``SURVEILLANCE_CLIENT_SECRET``,
    ``SURVEILLANCE_BASE_URL``, ``SURVEILLANCE_EU_BASE_URL``, ``SURVEILLANCE_REGION`` (default
    ``"us"``), ``SURVEILLANCE_AUDIENCE`` (default: the base URL), ``SURVEILLANCE_TIMEOUT``,
    ``SURVEILLANCE_READ_PER_SECOND``, ``SURVEILLANCE_DAILY_REQUESTS`` ... (without
    ``limits=``, the rate and quota settings make the :class:`Limits`; 0 lifts one). A missing
    one raises :class:`~surveillance.ConfigError` naming the argument and the variable.

    Args:
        api_key: the organization's API key (header ``x-api-key``).
        client_id: OAuth client id.
        client_secret: OAuth client secret.
        region: ``"us"`` or ``"eu"``: where :meth:`publish` posts by default.
        base_url: the service's base address, without ``/v2`` (a trailing ``/v2`` is
            tolerated). ``https://`` only, except on loopback (the emulator).
        eu_base_url: the EU-region webhook base address.
        audience: the token audience.
        timeout: seconds for one request, connection to last byte (above 0, at most a day).
        max_retries: retries per request (connection errors, timeouts, 429, 500, 502-504;
            0 to 100).
        limits: :class:`Limits`; default the provider's published limits.
        ca_bundle: a PEM file of extra trusted certificates (also ``SSL_CERT_FILE`` and
            ``REQUESTS_CA_BUNDLE``); the platform's trust store is always used.
        trust_env: honour ``HTTPS_PROXY``/``NO_PROXY`` and the CA variables.
        trace_context: send the W3C ``traceparent`` of the caller's trace with every request
            when an OpenTelemetry tracer provider is configured (see the monitoring guide);
            ``False`` never sends it. Default: ``SURVEILLANCE_TRACE_CONTEXT`` (``0`` turns it
            off), else on.
        max_body_bytes: the largest answer accepted (default 64 MiB; from 1 KiB).
        max_wait: the longest ``Retry-After`` of a 429 the client waits for, in seconds (0 to
            86,400; default 60). A longer one means the quota is spent for a long while:
            :class:`~surveillance.QuotaExhaustedError` is raised at once; once a second such
            answer (or a ledger near the day's limit) confirms it, every client of the machine
            with the same key refuses requests until then. The waits after 429s of one call
            (of one record, over a publish's rounds) stay within it in all.
        max_outage: how long a call rides out the service being unreachable (connection
            refused, reset or timed out; 502, 503, 504: a restart, a deploy), in seconds (0 to
            86,400; 0 fails at once). Default: ``SURVEILLANCE_MAX_OUTAGE``, else 60. It retries
            with exponential backoff and full jitter, at most 4 s between tries; a request
            that never reached the service is not counted in the daily quota. A call has one
            budget for all its requests (a publish's posts and token requests included).
        cache: the cache of settled events on disk (see :meth:`cache_info`): ``True`` (in the
            user's cache directory), ``False``, or a directory. Default: the environment's
            ``SURVEILLANCE_CACHE`` (``0`` turns it off, a path moves it), else on, but for a
            loopback base URL (an emulator), which has no cache unless asked. A read serves
            the settled parts of its range that earlier reads kept, and fetches only the rest.
            A directory that exists without the cache's ``CACHEDIR.TAG`` is left as it is: the
            cache keeps to a private folder of its own in it, ``surveillance-cache``.
            :class:`~surveillance.ConfigError` when it names a file, a read-only directory, or
            a cache that is not private to the user.
        settle: how long after it starts an event may still change, as for
            :meth:`sync_events` (``"1h"``, ``"30m"``, a timedelta or seconds): older events are
            settled, and kept by the cache; the last ``settle`` before now is always fetched.
        cache_max_bytes: the cap of the cache directory (default 2 GiB): past it, the least
            recently used windows are evicted.
        profile: the profile of the config file to read (``[profiles.NAME]``); default:
            ``SURVEILLANCE_PROFILE``, else only the file's ``[default]`` table.

    Raises:
        ConfigError: a setting is missing (the credentials, the base URL) or cannot be used
            (a base URL that is not ``https://``, a cache that is not private, a damaged config
            file): the message names the argument and its variable.
        ValueError: a number outside its bounds (``TypeError`` for a value of the wrong type).

    Example:
        >>> import surveillance as sv
        >>> with sv.Emulator(sites=3, days=1, events_per_day=100) as emu:
        ...     with emu.client() as client:
        ...         len(client.sites())
        3
    """

    # --- events -------------------------------------------------------------------------
    @metered
    @raises(RANGE, REQUEST)
    def plan_events(
        self,
        start: TimeLike,
        end: TimeLike,
        report_id: Optional[str] = None,
        progress: Progress = "auto",
    ) -> EventPlan:
        """What :meth:`events` would cost for ``[start, end)``, found with a few requests:
        the events, the requests, the time at the read limit and the days of quota.

        It runs the fetch's own window plan, asking only the pages that decide (each window's
        first page, its ceiling page, a few pages that find where it ends): the events and
        the requests are counted, not extrapolated, and come within a few percent of what
        :meth:`events` makes, in any order the service uses (a window's end is searched for
        until it is known within about 6%, then taken halfway; ``exact`` says whether every
        window's size was found).
        It asks 2-5% of the fetch's requests for ranges of days on a service that sorts, more
        on one that does not (18-33%); the pages it reads of a range that ended over an hour
        ago are used by the next :meth:`events` of that range on this client (within 15
        minutes) instead of being asked again, so that a plan adds at most 2% to the fetch
        that follows it. For that, a small unsorted range (under 50 requests) is read page by
        page, up to a quarter of what remains of the day's quota: its plan asks the fetch's
        own pages. What the cache of settled events holds of the range costs no request: its
        events are counted, its requests are not.

        Args:
            start, end, report_id: as for :meth:`events`.
            progress: as for :meth:`events`: the bar shows the requests the count has asked
                and the share of the range counted (a callable receives ``requests``,
                ``done_ms`` and ``total_ms``).

        Returns:
            :class:`EventPlan`; ``print(plan)`` reads "about 41,000 events, 415 requests, 7 min
            at the read limit, 0.2 days of quota (plan: 6 requests)".

        Example:
            >>> import surveillance as sv
            >>> with sv.Emulator(sites=4, days=2, events_per_day=3000) as emu:
            ...     client = emu.client()
            ...     plan = client.plan_events(emu.start, emu.end)
            ...     fetched = len(client.events(emu.start, emu.end, progress=False))
            ...     abs(plan.events - fetched) <= 0.1 * fetched
            True
        """
        asked = _events.query(start, end, report_id)
        callback, close = _progress.make(progress, "plan", self.quota()["limit"], plan=True)
        try:
            plan: EventPlan = self._inner.plan(asked, callback)
            return plan
        finally:
            close()

    # --- incremental sync ---------------------------------------------------------------
    # surveillance.sync.sync_events with this client as `client`, documented by its own
    # docstring (a `#:` comment here would take its place in the reference).
    sync_events = metered(_sync.sync_events)

    # --- publishing ---------------------------------------------------------------------
    @metered
    def publish(
        self,
        records: Records,
        *,
        region: Optional[str] = _publish.OPTION_DEFAULTS["region"],
        batch_size: BatchSize = _publish.OPTION_DEFAULTS["batch_size"],
        validate: bool = _publish.OPTION_DEFAULTS["validate"],
        progress: Progress = _publish.OPTION_DEFAULTS["progress"],
    ) -> PublishReport:
        """Posts point-of-sale records to the service's webhook, fast and without losing any.

        Records are read as they are needed (a generator of millions keeps memory bounded),
        validated and serialized in Rust, and posted with many requests in flight within the
        client's publish limits (by default the provider's 100 requests/s and 200 in flight).
        Network errors, 429 (honouring ``Retry-After``) and 5xx are retried, which is safe:
        the service upserts on ``transactionId``. Records that share an upsert key are posted
        one after the other, so the latest one in the source wins.

        Args:
            records: one dict, an iterable or generator of dicts (consumed as it goes), the
                path of a JSON Lines file (read in Rust) or of a CSV file (a header of field
                names, one record a row, ``items`` as JSON; as ``surveillance publish`` reads
                it), or columns whose rows are records:
                a pandas DataFrame (converted with ``pyarrow.Table.from_pandas``), Arrow data
                (a pyarrow Table or RecordBatchReader, a polars DataFrame, anything with
                ``__arrow_c_stream__``) or the path of a ``.parquet`` file. Columns are
                written as records in Rust, with the GIL released. Their layout is the models'
                own: one column per field, named as the field (``dataType`` included);
                ``items`` a list of structs whose fields are the item fields
                (``list<struct<time, quantity, ...>>``); a null leaves the field (or the list
                element, or the struct field) out of that row's record. Times may be epoch
                milliseconds, ISO strings, Arrow timestamps of any unit (naive ones are UTC)
                or dates. The schema is checked once (unknown or legacy names, column types,
                required columns: :class:`~surveillance.ValidationError` before anything is
                sent), values per row; failures are indexed by row number.
                A record with no JSON form (NaN or infinity, a key that is not a string, a
                record that contains itself, containers nested more than 64 levels deep) is
                kept back with a problem naming the field; the others are published.
            region: ``"us"`` or ``"eu"``; default the client's ``region``.
            batch_size: records per request. ``"auto"`` (the default) posts JSON arrays of 100,
                which the provider accepts and counts as one request against the daily quota
                of 2,400: 1,000 records cost 10 requests, not 1,000. If the service refuses an
                array body as such (not a record in it), the client falls back to one object
                per request, for the rest of its life, and says so once in the log. 1 posts one
                JSON object per body, as API.md describes; 2 to 100 post arrays of that size.
                A batch the service refuses is split to isolate the bad records, and the rest
                are sent again.
            validate: check each record against its standard model (:func:`surveillance.
                validate`) and keep back those with errors; warnings do not stop a record.
            progress: ``"auto"`` (a bar in Jupyter and on a terminal, none otherwise),
                ``True``, ``False``, or a callable receiving update dicts (``read``,
                ``accepted``, ``rejected``, ``requests``, and ``waiting`` and
                ``waiting_brief``: what the client waits for while the service is unreachable
                or a 429's wait lasts, else None). The bar shows the share done, the total and
                the time left when the length of ``records`` is known (a file is counted).

        Returns:
            :class:`~surveillance.PublishReport`: ``accepted``, ``rejected`` (each with its
            index, transactionId, HTTP status or validation problems, and message),
            ``retries``, ``elapsed``; ``raise_on_failure()``; ``write_failures(path)``.

        Raises:
            PublishInterrupted: Ctrl-C; ``.report`` is the partial report, whose
                ``write_failures(path)`` writes every record not yet accepted.
            AuthError: the service refused the credentials (``.report`` attached).
            ValueError: ``batch_size`` outside 1..100, or ``records`` a path where no file is.
            QuotaExhaustedError: the day's request quota ran out (``.report`` attached: the
                records not sent are in it, ready to publish again).
            ValidationError: columns that do not fit the models (``.problems``): nothing
                was sent.
            OSError: the JSON Lines or Parquet file, or an Arrow stream, cannot be read
                (``.report`` attached when it broke after publishing began).

        Example:
            >>> import surveillance as sv
            >>> rows = [{"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000,
            ...          "locationId": "store-1", "dataSourceId": "door-1",
            ...          "eventUniqueId": f"e-{i}", "eventType": "door open"} for i in range(3)]
            >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
            ...     report = emu.client().publish(rows + [{"dataType": "other"}], progress=False)
            ...     print(report.accepted, len(report.rejected), len(emu.published()))
            3 1 3
        """
        return _publish.publish(
            self._inner,
            records,
            region=region,
            batch_size=batch_size,
            validate=validate,
            progress=progress,
        )

    # --- utilities ----------------------------------------------------------------------
    @raises(REQUEST)
    def access_token(self) -> str:
        """A valid bearer token (fetched or reused), for debugging with curl.

        Returns:
            The token, as the ``Authorization: Bearer`` header sends it.

        Example:
            >>> token = client.access_token()
            >>> token == client.access_token()  # reused until it nears its expiry
            True
        """
        return str(self._inner.access_token())

    def diagnose(self) -> None:
        """Prints the effective base URLs, TLS, proxy, limits and whether a token can be
        had, without any secret.

        Raises nothing: a token that cannot be had is printed as the reason why.

        Example:
            >>> client.diagnose()  # doctest: +ELLIPSIS
            base_url:     http://127.0.0.1:...
            ...
            token:        ok
        """
        print(self._inner.diagnose(), end="")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: Settings the native client takes as they are resolved.
_CONNECTION = (
    "api_key",
    "client_id",
    "client_secret",
    "base_url",
    "eu_base_url",
    "region",
    "audience",
    "ca_bundle",
)
#: Settings that make the :class:`Limits`.
_LIMITS = tuple(f.name for f in fields(Limits))


def _cache_setting(cache: Any) -> Optional[str]:
    """The native client's ``cache``: ``"1"`` (on), ``"0"`` (off), an absolute directory, or
    None (as the environment and the base URL say)."""
    if cache is None:
        return None
    # The words that turn it on or off are the core's (the others name a directory).
    if isinstance(cache, str) and cache.strip().lower() in _core.CACHE_SWITCHES:
        cache = _core.CACHE_SWITCHES[cache.strip().lower()]
    if isinstance(cache, bool):
        return "1" if cache else "0"
    if not isinstance(cache, (str, os.PathLike)):
        raise worded(
            TypeError,
            arg("cache"),
            f" must be True, False or a directory, got {type(cache).__name__}",
        )
    return os.path.abspath(_check.path("cache", cache))


def _restore(cls: type, config: dict[str, Any]) -> Any:
    limits = Limits(**config.pop("limits"))
    return cls(limits=limits, **config)
