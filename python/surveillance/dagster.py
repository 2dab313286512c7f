"""A Dagster integration (https://dagster.io): a resource that gives a client of the service,
and a factory of daily-partitioned assets of its events.

Needs ``pip install 'surveillance[dagster]'`` (dagster, pyarrow, pandas).

- :class:`SurveillanceResource`: a ``ConfigurableResource`` with the settings table's fields
  (secrets through ``dagster.EnvVar``), whose :meth:`~SurveillanceResource.get_client` gives a
  :class:`~surveillance.Client`.
- :func:`events_asset`: an asset of the events, one partition a UTC day, requiring the resource
  under the key ``surveillance``: written as Parquet (``path=``), or returned as a pandas
  DataFrame for the user's IO manager; the requests it sent and the events it holds are its
  materialization's metadata. A quota stop raises ``RetryRequested`` with the wait until the
  quota resets: the run retries then (Dagster's run retries need ``max_retries``), never
  before.

Example:
    >>> import dagster, os, tempfile, surveillance as sv
    >>> from surveillance.dagster import SurveillanceResource, events_asset
    >>> path = tempfile.mkdtemp()
    >>> with sv.Emulator(sites=2, days=2, events_per_day=100) as emu:
    ...     resource = SurveillanceResource(base_url=emu.url, api_key=emu.api_key,
    ...         client_id=emu.client_id, client_secret=emu.client_secret,
    ...         audience=emu.audience, daily_requests=0)
    ...     result = dagster.materialize([events_asset(path=path, start="2026-01-05")],
    ...         resources={"surveillance": resource}, partition_key="2026-01-06")
    >>> result.success, sorted(os.listdir(path))
    (True, ['date=2026-01-06'])
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from typing import Any, Optional, Union

import dagster  # type: ignore[import-not-found, unused-ignore]
from dagster import AssetExecutionContext  # type: ignore[import-not-found, unused-ignore]

from . import _check, _scheduling, _store
from ._time import from_ms, to_ms
from .client import Client
from .errors import QuotaExhaustedError
from .types import TimeLike

__all__ = ["SurveillanceResource", "events_asset"]

#: The first day of :func:`events_asset`'s partitions unless told: a fixed day, so that the
#: partitions of a deployment do not move from one day to the next.
DEFAULT_START = "2026-01-01"
_DAY = _dt.timedelta(days=1)


class SurveillanceResource(dagster.ConfigurableResource):  # type: ignore[misc, type-arg, unused-ignore]
    """The service's settings as a Dagster resource; :meth:`get_client` gives a client.

    Every field is a setting of the settings table (see :doc:`/guide/configuration`), under
    its name; one left None is read as ``surveillance.Client()`` reads it (a
    ``SURVEILLANCE_*`` variable, then the config file), and the limits given replace the
    provider's published ones (0 lifts one). Give secrets as ``dagster.EnvVar("NAME")``, which
    Dagster reads when the run starts and never shows in its UI.

    Example:
        >>> from dagster import EnvVar
        >>> from surveillance.dagster import SurveillanceResource
        >>> resource = SurveillanceResource(
        ...     base_url="https://api.example.com", api_key=EnvVar("SURVEILLANCE_API_KEY"),
        ...     client_id="etl", client_secret=EnvVar("SURVEILLANCE_CLIENT_SECRET"))
    """

    base_url: Optional[str] = None
    api_key: Optional[str] = None
    client_id: Optional[str] = None
    client_secret: Optional[str] = None
    eu_base_url: Optional[str] = None
    region: Optional[str] = None
    audience: Optional[str] = None
    ca_bundle: Optional[str] = None
    timeout: Optional[float] = None
    max_outage: Optional[float] = None
    read_per_second: Optional[float] = None
    read_concurrency: Optional[int] = None
    publish_per_second: Optional[float] = None
    publish_concurrency: Optional[int] = None
    daily_requests: Optional[int] = None
    trace_context: Optional[bool] = None
    cache: Optional[str] = None

    def get_client(self, **kwargs: Any) -> Client:
        """A :class:`~surveillance.Client` of the resource's settings (``kwargs`` override
        them). Close it when done (``with``).

        Raises:
            ConfigError: a setting is refused, or one the client needs is set nowhere.
        """
        values = {n: getattr(self, n) for n in _scheduling.SETTING_NAMES}
        settings = _scheduling.client_arguments(values, "SurveillanceResource")
        return Client(**{**settings, **kwargs})


def events_asset(
    name: str = "events",
    report_id: Optional[str] = None,
    *,
    start: TimeLike = DEFAULT_START,
    end: Optional[TimeLike] = None,
    path: Optional[Union[str, os.PathLike[str]]] = None,
    key_prefix: Optional[Union[str, list[str]]] = None,
    group_name: Optional[str] = None,
    io_manager_key: Optional[str] = None,
    max_retries: int = 3,
    **asset_kwargs: Any,
) -> dagster.AssetsDefinition:
    """An asset of the service's events, partitioned by UTC day (a
    ``DailyPartitionsDefinition`` from ``start``): each partition holds every event whose
    ``startTime`` falls on its day, exactly once.

    With ``path`` (a directory or a URI, ``s3://bucket/prefix``), a partition is written as
    ``path/date=YYYY-MM-DD/part-0.parquet`` (the layout of :meth:`Client.sync_events
    <surveillance.Client.sync_events>`, which pyarrow, pandas, duckdb read as one
    dataset), replaced whole and atomically when it is materialized again. Without it, the
    asset returns the day's events as a pandas DataFrame, which the asset's IO manager stores.
    Either way the materialization's metadata holds ``events``, ``requests`` (sent for it) and
    ``start``/``end``, and with ``path`` the partition's file.

    The asset requires the resource ``surveillance`` (a :class:`SurveillanceResource`). When
    the day's request quota cannot pay for the partition, nothing is written and the asset
    raises ``dagster.RetryRequested`` whose wait is the time until the quota resets.

    Args:
        name: the asset's name.
        report_id: only the events of this report.
        start: the first day of the partitions (a date or a time as ``Client.events`` takes).
        end: the day after the last partition; None: up to the current day.
        path: where to write the partitions as Parquet; None: return DataFrames.
        key_prefix, group_name, io_manager_key: as ``dagster.asset`` takes them.
        max_retries: how many quota stops a run retries (``RetryRequested``'s).
        **asset_kwargs: any other argument of ``dagster.asset`` (``description``, ``tags``...).

    Raises:
        ValueError: ``start`` or ``end`` is not a time, or ``name`` is empty.
        TypeError: an argument of the wrong type.

    Example:
        >>> from surveillance.dagster import events_asset
        >>> events_asset().partitions_def.get_first_partition_key()
        '2026-01-01'
    """
    name = str(_check.text("name", name))
    report_id = _check.text("report_id", report_id, optional=True, longest=100)
    first = from_ms(to_ms(start, "start")).date()
    last = None if end is None else from_ms(to_ms(end, "end")).date()
    root = None if path is None else _check.path("path", path)
    partitions = dagster.DailyPartitionsDefinition(
        start_date=first.isoformat(),
        end_date=None if last is None else last.isoformat(),
        timezone="UTC",
    )

    def events(context: AssetExecutionContext) -> Any:
        window = context.partition_time_window
        lo, hi = window.start.astimezone(_dt.timezone.utc), window.end.astimezone(_dt.timezone.utc)
        resource: SurveillanceResource = context.resources.surveillance
        with resource.get_client() as client:
            before = client._sent()
            try:
                table = client.events(lo, hi, report_id=report_id, output="arrow", progress=False)
            except QuotaExhaustedError as e:
                wait = _scheduling.seconds_until(e.resets_at)
                context.log.warning(
                    "the day's request quota cannot pay for %s: retrying when it comes back "
                    "at %s (in %.0f s)",
                    context.partition_key,
                    e.resets_at,
                    wait,
                )
                raise dagster.RetryRequested(max_retries=max_retries, seconds_to_wait=wait) from e
            requests = client._sent() - before
        import pyarrow as pa  # optional: pyarrow

        table = pa.table(table)
        metadata: dict[str, Any] = {
            "events": table.num_rows,
            "requests": requests,
            "start": lo.isoformat(),
            "end": hi.isoformat(),
        }
        if root is None:
            return dagster.Output(table.to_pandas(), metadata=metadata)
        file = _write_day(root, lo.date(), table)
        metadata["path"] = dagster.MetadataValue.path(file)
        return dagster.MaterializeResult(metadata=metadata)

    # Dagster reads the annotation of `context` as a class, which this module's postponed
    # annotations (text) are not, and takes an Output only where no return type is written.
    events.__annotations__ = {"context": AssetExecutionContext}
    events.__doc__ = "The service's events of a UTC day."
    asset: dagster.AssetsDefinition = dagster.asset(
        name=name,
        key_prefix=key_prefix,
        group_name=group_name,
        io_manager_key=io_manager_key,
        partitions_def=partitions,
        required_resource_keys={"surveillance"},
        **asset_kwargs,
    )(events)
    return asset


def _write_day(root: str, day: _dt.date, table: Any) -> str:
    """Writes ``table`` as the partition of ``day`` under ``root``, replacing it atomically
    (a directory: a temporary file renamed; an object store: one upload); returns its
    path as shown."""
    import pyarrow.parquet as pq  # optional: pyarrow

    location = _store.resolve(root, "path")
    relative = f"date={day.isoformat()}/part-0.parquet"
    if location.filesystem is None:
        target = os.path.join(location.path, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        temporary = os.path.join(os.path.dirname(target), f".part-{uuid.uuid4().hex}.tmp")
        try:
            pq.write_table(table, temporary)
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
        return target
    target = f"{location.path}/{relative}"
    pq.write_table(table, target, filesystem=location.filesystem)
    return f"{location.shown}/{relative}"
