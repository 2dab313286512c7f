"""A dlt source (https://dlthub.com): the service's events and lists, loaded by a dlt pipeline
into any of its destinations (DuckDB, BigQuery, Snowflake, Postgres, ...).

Needs ``pip install 'surveillance[dlt]'`` (dlt with its duckdb destination, pyarrow).

Resources:

- ``events``: incremental on ``startTime`` with dlt's own state (``dlt.sources.incremental``,
  its ``lag`` set to ``settle``: each run fetches again the last ``settle`` before where the
  previous one got to, for events created late, as :meth:`Client.sync_events
  <surveillance.Client.sync_events>` does; after a run the quota stopped, only what had not
  settled when it was fetched), ``primary_key="id"``, ``write_disposition="merge"``
  (an event fetched again replaces its row); yielded as Arrow tables, one per window, which
  dlt loads without a Python object per event.
- ``sites``, ``devices``, ``cameras``, ``reports``: ``write_disposition="replace"``.

The source is quota-aware: under a daily budget (:class:`~surveillance.Limits`), the range is
fetched in chunks that fit what remains of it (as a sync fetches), and when the budget runs out
(:class:`~surveillance.QuotaExhaustedError`) the run ends cleanly: the windows fetched until
then are loaded, dlt's state records where the last of them ends, and the next run (the next
day) goes on from there, taking first the window the budget stopped, with the pages already read
of it, which the client's cache carries (as for a sync). A list the budget stops is left as it
was loaded last.

What a run spends is in dlt's trace: each resource counts the requests it sent (token requests
and retries included) in its custom metric ``surveillance.requests``
(``pipeline.last_trace.last_extract_info``'s ``resource_metrics``), and :func:`cost` sums them
over the resources of the pipeline's last run.

Example:
    >>> import dlt, tempfile, surveillance as sv
    >>> from surveillance.dlt import surveillance_source
    >>> work = tempfile.mkdtemp()
    >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
    ...     source = surveillance_source(emu.client(), start=emu.start, until=emu.end)
    ...     pipeline = dlt.pipeline("surveillance", destination=dlt.destinations.duckdb(
    ...         f"{work}/events.duckdb"), pipelines_dir=work, dataset_name="cloud")
    ...     _ = pipeline.run(source)
    >>> with pipeline.sql_client() as sql:
    ...     sql.execute_sql("SELECT count(*), count(DISTINCT id) FROM events")
    [(1000, 1000)]
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Generator, Iterator, Optional

import dlt

from . import _check, _config, _core
from . import sync as _sync
from ._core import Cost
from ._time import from_ms, to_ms
from .client import _LIMITS, Client
from .errors import QuotaExhaustedError
from .types import SettleLike, TimeLike

if TYPE_CHECKING:
    from dlt.common.schema.typing import TTableSchemaColumns

    from .client import Client

__all__ = ["surveillance_source", "cost"]

logger = logging.getLogger("surveillance.dlt")


#: ``details``, the service's object as JSON text in Arrow, is a JSON column of the destination
#: (DuckDB's ``JSON``, BigQuery's ``JSON``, Postgres' ``jsonb``), not text. dlt logs once a run
#: that this hint differs from the Arrow type (text), which Arrow has no JSON type to match
#: (an extension type it refuses, a nested one it loads as a struct): that one, declared,
#: difference is not logged (see ``_DeclaredDetails``); every other hint matches the Arrow
#: schema (``_microseconds``).
_DETAILS_AS_JSON: TTableSchemaColumns = {"details": {"data_type": "json"}}
#: The custom metric of each resource (in dlt's trace) that counts the requests it sent.
REQUESTS_METRIC = "surveillance.requests"
#: dlt's warning, logged once a run, that the events' Arrow schema and hints differ.
_HINTS_DIFFER = "In resource: events, when merging arrow schema with dlt schema, several column"


class _DeclaredDetails(logging.Filter):
    """Drops dlt's warning that the events' hints differ from their Arrow schema, which is
    about ``details``' JSON hint alone: the events' Arrow tables match every other hint."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_HINTS_DIFFER)


def _declare_details() -> None:
    """Installs ``_DeclaredDetails`` on dlt's logger, once."""
    dlt_logger = logging.getLogger("dlt")
    if not any(isinstance(f, _DeclaredDetails) for f in dlt_logger.filters):
        dlt_logger.addFilter(_DeclaredDetails())


def _dlt_settings() -> dict[str, Any]:
    """The settings dlt's config and secrets give under ``sources.surveillance``, as dlt's
    verified sources read their credentials (the secrets from ``dlt.secrets``)."""

    settings: dict[str, Any] = {}
    for setting in _config.SETTINGS:
        if setting.name in _LIMITS:  # the rates and the quota: from the variables and file
            continue
        store = dlt.secrets if setting.secret else dlt.config
        value: Any = store.get(f"sources.surveillance.{setting.name}")
        if value is not None:
            settings[setting.name] = _config.check(setting, value, "dlt's sources.surveillance")
    profile: Any = dlt.config.get("sources.surveillance.profile")
    if profile is not None:
        settings["profile"] = str(profile)
    return settings


@dlt.source(name="surveillance")
def surveillance_source(
    client: Optional[Client] = None,
    start: Optional[TimeLike] = None,
    settle: SettleLike = _sync.DEFAULT_SETTLE,
    report_id: Optional[str] = None,
    until: Optional[TimeLike] = None,
) -> Any:
    """The resources ``events``, ``sites``, ``devices``, ``cameras`` and ``reports`` of the
    service (see the module's documentation).

    Args:
        client: a :class:`~surveillance.Client`; None: a client of the settings that dlt's
            config and secrets give under ``sources.surveillance`` (``secrets.toml``'s
            ``[sources.surveillance]``, or ``SOURCES__SURVEILLANCE__API_KEY`` ...; the keys are
            the settings' names, ``profile`` too), then as ``surveillance.Client()`` reads
            them: the ``SURVEILLANCE_*`` variables, the config file's profile, its
            ``[default]``.
        start: where the first run's events begin (the incremental's initial value): a time
            as :meth:`Client.events <surveillance.Client.events>` takes.
        settle: how long after its start an event may still be created (see
            :func:`~surveillance.sync.parse_settle`): each run fetches that much again.
        report_id: only the events of this report.
        until: where the events stop (exclusive); None: the time of the run.

    Raises:
        ValueError: ``start`` missing, ``until`` not after it, or ``settle`` not a duration.
        TypeError: ``client`` not a :class:`~surveillance.Client`.
    """

    if client is None:
        client = Client(**_dlt_settings())
    if not isinstance(client, Client):
        raise TypeError(f"`client` must be a surveillance.Client, got {type(client).__name__}")
    if start is None:
        raise ValueError(
            "`start` is missing: give where the first run's events begin, e.g. "
            "surveillance_source(client, start='2026-01-01')"
        )
    start_ms = to_ms(start, "start")
    until_ms = None if until is None else to_ms(until, "until")
    if until_ms is not None and until_ms <= start_ms:
        # As `sync_events` and `events` refuse it: a run would load nothing, silently.
        raise ValueError(
            f"`until` ({from_ms(until_ms).isoformat()}) must be after `start` "
            f"({from_ms(start_ms).isoformat()})"
        )
    lag = _sync.parse_settle(settle).total_seconds()
    report_id = _check.text("report_id", report_id, optional=True, longest=100)
    _declare_details()
    return (
        _events(client, start_ms, until_ms, lag, report_id),
        *(_listing(client, spec["name"]) for spec in _core.LISTS),
    )


def _events(
    client: Any, start_ms: int, until_ms: Optional[int], lag: float, report_id: Optional[str]
) -> Any:
    cursor = dlt.sources.incremental(
        "startTime", initial_value=from_ms(start_ms), lag=lag or None, range_start="closed"
    )

    @dlt.resource(
        name="events", primary_key="id", write_disposition="merge", columns=_DETAILS_AS_JSON
    )
    def events(cursor: Any = cursor) -> Iterator[Any]:
        """The events from where the last run got to (less ``settle``), a window at a time."""
        yield from _metered(client, fetched(cursor))

    def fetched(cursor: Any) -> Generator[Any, None, None]:
        import pyarrow as pa  # optional: pyarrow

        wall_ms = time.time_ns() // 1_000_000
        state = dlt.current.resource_state()
        lo = _resume_from(cursor, state, lag)
        hi = until_ms if until_ms is not None else wall_ms
        if hi <= lo:
            return
        progress = _sync._Progress()
        _hold_carried(client, lo, report_id, progress)
        try:
            for table in _sync._fetch(client, pa, lo, hi, report_id, progress):
                yield _microseconds(pa, table)
            state.pop("stopped_at", None)
            state.pop("frontier", None)
        except QuotaExhaustedError as e:
            # The next run fetches again only what had not settled when this one fetched it,
            # from the end of the last window loaded (where the pages of the windows the quota
            # stopped, carried in the client's cache, start).
            tables: list[Any] = []
            carried = _sync._wind_down(progress, pa, tables.append)
            for table in tables:
                yield _microseconds(pa, table)
            if carried is not None:
                client._inner.carry_to_cache(carried[0], progress.frontier, carried[1], report_id)
            state["stopped_at"] = wall_ms
            state["frontier"] = progress.frontier
            # The windows yielded are loaded and the cursor stands at the latest of them.
            logger.warning(
                "the day's request quota is used up: events loaded until %s, the next run goes "
                "on from there (the quota comes back at %s)",
                from_ms(progress.frontier).isoformat(),
                e.resets_at,
            )
        finally:
            if progress.stream is not None:
                progress.stream.close()

    return events


def _hold_carried(client: Any, lo: int, report_id: Optional[str], progress: Any) -> None:
    """Hands the client the pages that the last run, stopped by the quota, carried in its
    cache from ``lo`` (its fetches take them instead of asking them again), and tells
    ``progress`` where they were read."""
    carried = client._inner.carried_from_cache(lo, report_id)
    if carried is None:
        return
    data, end = carried
    try:
        client._inner.hold_carried(data, report_id)
    except ValueError as e:
        logger.warning("the pages the last run carried in the cache %s: they are asked again", e)
        return
    progress.carried = (lo, end)


def _resume_from(cursor: Any, state: Any, lag: float) -> int:
    """Where a run's events begin: dlt's cursor less the lag (what it loaded last may have
    changed since), except after a run the quota stopped: what that run fetched had settled
    if it was ``lag`` old at the time, so only the part that had not is fetched again (from
    the end of the last window it loaded, every event before which it loaded)."""
    lo = to_ms(cursor.start_value, "start")
    stopped_at = state.get("stopped_at")
    last = cursor.get_state().get("last_value")  # as stored, without the lag
    if stopped_at is None or last is None or not lag:
        return lo
    got = max(to_ms(last, "last_value"), int(state.get("frontier") or 0))
    return max(lo, min(got, int(stopped_at) - int(lag * 1000)))


def _listing(client: Any, kind: str) -> Any:
    @dlt.resource(name=kind, primary_key="id", write_disposition="replace")
    def listing() -> Iterator[Any]:
        yield from _metered(client, listed())

    def listed() -> Generator[Any, None, None]:
        import pyarrow as pa  # optional: pyarrow

        try:
            table = getattr(client, kind)(output="arrow")
        except QuotaExhaustedError:
            logger.warning("the day's request quota is used up: %s left as loaded last", kind)
            return
        yield _microseconds(pa, table)

    listing.__doc__ = f"Every record of ``client.{kind}()``, replacing the last load."
    return listing


def _metered(client: Any, items: Generator[Any, None, None]) -> Iterator[Any]:
    """The items of a resource's generator, each made within one call scope of the
    resource's own (its requests counted apart from the other resources' that dlt
    interleaves with it, and from what dlt does between items), the count kept in the
    resource's custom metric ``surveillance.requests`` as it goes."""
    meter = client._meter()
    metrics = dlt.current.resource_metrics()
    try:
        while True:
            with meter:
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    metrics[REQUESTS_METRIC] = meter.requests
            yield item
    finally:
        with meter:
            items.close()
        metrics[REQUESTS_METRIC] = meter.requests


def cost(pipeline: Any) -> Cost:
    """What the last run of ``pipeline`` spent on the service: the requests of every resource
    of :func:`surveillance_source` it extracted (token requests and retries included), summed
    from the custom metric ``surveillance.requests`` that each keeps in dlt's trace.

    Args:
        pipeline: a ``dlt.Pipeline`` that has run (or extracted) the source.

    Returns:
        :class:`~surveillance.Cost` (``quota`` is None: read it from the client,
        :meth:`Client.quota <surveillance.Client.quota>`); ``Cost(requests=0)`` before a run.

    Raises nothing of its own: a pipeline that has not run the source has spent nothing.

    Example:
        >>> import dlt, tempfile, surveillance as sv
        >>> from surveillance.dlt import cost, surveillance_source
        >>> work = tempfile.mkdtemp()
        >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
        ...     source = surveillance_source(emu.client(), start=emu.start, until=emu.end)
        ...     pipeline = dlt.pipeline("cost", destination=dlt.destinations.duckdb(
        ...         f"{work}/cost.duckdb"), pipelines_dir=work, dataset_name="cloud")
        ...     _ = pipeline.run(source)
        ...     sent = sum(sum(n.values()) for n in emu.stats()["requests"].values())
        >>> cost(pipeline).requests == sent
        True
    """
    trace = pipeline.last_trace
    info = None if trace is None else trace.last_extract_info
    requests = 0
    if info is not None:
        for step in info.metrics.values():
            for extract in step:
                for resource in extract["resource_metrics"].values():
                    requests += int(resource.custom_metrics.get(REQUESTS_METRIC, 0))
    return Cost(requests)


def _microseconds(pa: Any, table: Any) -> Any:
    """``table`` as dlt takes it without coercion, which it would log: its second and
    millisecond timestamps as microseconds (the same instants), the precision every destination
    stores with a time zone (DuckDB's ``TIMESTAMPTZ`` has no other), and ``id``, the primary
    key, which dlt declares not null, not nullable (no record lacks one)."""
    fields = [
        f.with_type(pa.timestamp("us", f.type.tz))
        if pa.types.is_timestamp(f.type) and f.type.unit in ("s", "ms")
        else f
        for f in table.schema
    ]
    fields = [f.with_nullable(False) if f.name == "id" else f for f in fields]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema.equals(table.schema) else table.cast(schema)
