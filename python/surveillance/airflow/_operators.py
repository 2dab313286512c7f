"""The Airflow operators: :class:`SyncEventsOperator` (a data interval's events into a Parquet
dataset, deferring on a quota stop) and :class:`PublishOperator` (a file to the webhook)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Iterator, Optional, Sequence, Tuple

from .. import _store
from .. import publish as _publish
from .. import sync as _sync
from .._time import from_ms, to_ms
from ..types import SettleLike
from ._hook import SurveillanceHook

try:
    from airflow.sdk import Asset, BaseOperator  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - Airflow 2
    from airflow.datasets import Dataset as Asset  # type: ignore[no-redef, attr-defined, import-not-found, unused-ignore]
    from airflow.models import BaseOperator  # type: ignore[no-redef, attr-defined, import-not-found, unused-ignore]
try:
    from airflow.providers.standard.triggers.temporal import (  # type: ignore[import-not-found, unused-ignore]
        DateTimeTrigger,
    )
except ImportError:  # pragma: no cover - Airflow 2, or 3 without the standard provider
    from airflow.triggers.temporal import DateTimeTrigger  # type: ignore[no-redef, attr-defined, import-not-found, unused-ignore]


class SyncEventsOperator(BaseOperator):  # type: ignore[misc, unused-ignore]
    """Syncs the events of the task's data interval into the Parquet dataset at ``path``, as
    :meth:`Client.sync_events <surveillance.Client.sync_events>` keeps it (hive-partitioned by
    UTC date, a state file beside it), with the connection's client.

    - **The interval.** ``[data_interval_start, data_interval_end)`` of the run, or ``start``
      and ``end`` (templated: ``"{{ data_interval_start }}"``...). A schedule must give runs an
      interval: ``CronDataIntervalTimetable("@daily", timezone="UTC")`` or a
      ``timedelta`` (Airflow 3's ``schedule="@daily"`` gives none unless
      ``[scheduler] create_cron_data_intervals`` is on).
    - **Idempotent per interval.** An interval the dataset already holds (a rerun, a cleared
      task) sends no request; a backfill of earlier intervals fills them in (the dataset is one
      range: an interval after a gap fills the gap too). Reruns and backfills are exact: each
      event once, merged by id.
    - **A quota stop defers.** When the day's request quota runs out, what was fetched is
      stored and the task defers (a ``DateTimeTrigger`` at the quota's reset): the worker is
      freed, the triggerer waits, and the task resumes where it stopped, paying nothing twice.
      With ``deferrable=False`` it fails with :class:`~surveillance.QuotaExhaustedError`
      instead (for deployments without a triggerer). Any other failure fails the task with the
      client's typed error.
    - **Lineage.** ``path`` is the task's outlet, an Airflow asset (``file:///...`` for a local
      directory, the URI for an object store), so downstream DAGs can be scheduled on it.

    Returns (XCom): ``{"path", "start", "end", "events", "replaced", "requests", "complete"}``:
    the events added and replaced and the requests sent by the task (both parts of a deferred
    one), ``complete`` True.

    Args:
        task_id: the task's id (and every other argument of ``BaseOperator``).
        path: the dataset's directory, or a URI (``s3://bucket/prefix``, ``gs://...``);
            templated.
        start: where the interval begins; None: the run's ``data_interval_start``. Templated.
        end: where it ends (exclusive); None: ``data_interval_end``. Templated.
        report_id: only the events of this report (a dataset holds one report). Templated.
        settle: how long after its start an event may still be created, as ``sync_events``
            takes it: each run fetches that much before the dataset's end again.
        surveillance_conn_id: the connection (see :class:`SurveillanceHook`).
        deferrable: defer on a quota stop (the default) rather than fail.

    Example:
        >>> import datetime as dt
        >>> from surveillance.airflow import SyncEventsOperator
        >>> task = SyncEventsOperator(task_id="events", path="/data/events")
        >>> [a.uri for a in task.outlets]
        ['file:///data/events']
    """

    template_fields: Sequence[str] = ("path", "start", "end", "report_id")
    ui_color = "#d6ecf3"

    def __init__(
        self,
        *,
        path: str,
        start: Any = None,
        end: Any = None,
        report_id: Optional[str] = None,
        settle: SettleLike = _sync.DEFAULT_SETTLE,
        surveillance_conn_id: str = SurveillanceHook.default_conn_name,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        path = os.fspath(path)
        if "outlets" not in kwargs and "{{" not in path:
            kwargs["outlets"] = [Asset(_asset_uri(path))]
        super().__init__(**kwargs)
        self.path = path
        self.start = start
        self.end = end
        self.report_id = report_id
        self.settle = _sync.parse_settle(settle).total_seconds()
        self.surveillance_conn_id = surveillance_conn_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> dict[str, Any]:
        """Syncs the interval; defers on a quota stop (see the class).

        Raises:
            TaskDeferred: the day's quota stopped the sync (Airflow defers the task).
            QuotaExhaustedError: the same, with ``deferrable=False``.
            ValueError: the run has no data interval, nor ``start`` and ``end``.
            ConfigError: the connection lacks a field, or the dataset's report differs.
            SurveillanceError: any other failure of the sync, typed (``AuthError``,
                ``TransportError``, ``ApiError`` ...), as ``sync_events`` raises it.
        """
        return self._sync(context, requests=0, events=0, replaced=0)

    def execute_complete(self, context: Any, event: Any = None, **before: int) -> dict[str, Any]:
        """Resumes after the quota's reset, where the deferred part stopped (``before`` holds
        its figures, added to the summary).

        Raises:
            TaskDeferred: the quota stopped it again (a range larger than a day's quota).
            SurveillanceError: as :meth:`execute`.
        """
        return self._sync(context, **before)

    def _sync(self, context: Any, *, requests: int, events: int, replaced: int) -> dict[str, Any]:
        start, end = self._interval(context)
        summary = {
            "path": _store.shown(self.path),
            "start": from_ms(start).isoformat(),
            "end": from_ms(end).isoformat(),
            "events": events,
            "replaced": replaced,
            "requests": requests,
            "complete": True,
        }
        if self._holds(start, end):
            self.log.info(
                "%s already holds %s .. %s: nothing to fetch",
                summary["path"],
                summary["start"],
                summary["end"],
            )
            return summary
        hook = SurveillanceHook(self.surveillance_conn_id)
        with hook.get_client() as client:
            result = client.sync_events(
                self.path, from_ms(start), until=from_ms(end), report_id=self.report_id,
                settle=self.settle,
            )  # fmt: skip
        summary["events"] = events + result.added
        summary["replaced"] = replaced + result.replaced
        summary["requests"] = requests + result.requests
        self.log.info("%s", result)
        if result.complete:
            return summary
        if not self.deferrable or result.resets_at is None:
            result.raise_if_incomplete()
        self.log.warning(
            "the day's request quota is used up: the events until %s are stored; the task "
            "defers until the quota comes back at %s, then goes on from there",
            result.synced_until,
            result.resets_at,
        )
        self.defer(
            trigger=DateTimeTrigger(moment=result.resets_at),
            method_name="execute_complete",
            kwargs={k: summary[k] for k in ("requests", "events", "replaced")},
        )
        raise AssertionError("unreachable: defer() raises")  # pragma: no cover

    def _interval(self, context: Any) -> Tuple[int, int]:
        """The interval to sync, in ms: ``start``/``end`` or the run's data interval."""
        start = self.start if self.start is not None else context.get("data_interval_start")
        end = self.end if self.end is not None else context.get("data_interval_end")
        if start is None or end is None:
            raise ValueError(
                "the run has no data interval: give `start` and `end`, or schedule the DAG "
                "with a timetable of intervals"
            )
        lo, hi = to_ms(start, "start"), to_ms(end, "end")
        if hi <= lo:
            raise ValueError(
                f"the interval {from_ms(lo).isoformat()} .. {from_ms(hi).isoformat()} is "
                "empty: a manual run or a schedule without data intervals (Airflow 3's "
                '"@daily" is a CronTriggerTimetable) gives none; schedule the DAG with '
                'CronDataIntervalTimetable("@daily", timezone="UTC") or give `start` and `end`'
            )
        return lo, hi

    def _holds(self, start: int, end: int) -> bool:
        """Whether the dataset already holds ``[start, end)`` (of this report)."""
        state = _sync.read_state(self.path)
        if state is None:
            return False
        held = state.get("report_id")
        if (held or "").strip().lower() != (self.report_id or "").strip().lower():
            return False  # sync_events says how the reports differ
        return bool(
            to_ms(state["start"], "start") <= start
            and end <= to_ms(state["synced_until"], "synced_until")
        )


class PublishOperator(BaseOperator):  # type: ignore[misc, unused-ignore]
    """Publishes the records of a JSON Lines or Parquet file (a path or a URI) to the service's
    webhook, as :meth:`Client.publish <surveillance.Client.publish>` does, with the
    connection's client.

    The records not accepted (refused by the service or by validation, and those whose fate
    the service left unconfirmed) are written to ``failures_path`` as JSON Lines, ready to
    publish again (an empty file when every record was accepted, so a rerun leaves no stale
    failures). The task then fails with :class:`~surveillance.PublishError` (its ``report``
    holds every failure) when more than ``max_rejected`` were not accepted, or the publish
    was interrupted; fewer are logged as a warning. Re-running is safe: the service upserts
    on ``transactionId``.

    Returns (XCom): ``{"path", "total", "accepted", "rejected", "unconfirmed", "requests",
    "failures_path"}``.

    Args:
        task_id: the task's id (and every other argument of ``BaseOperator``).
        path: the records: a ``.jsonl`` or ``.parquet`` file, or a URI of one (``s3://``,
            ``gs://``...). Templated.
        failures_path: where to write the records not accepted (a path or a URI); None: not
            written. Templated.
        max_rejected: how many records may fail without failing the task (default 0).
        region: ``"us"`` or ``"eu"``; None: the connection's.
        batch_size: as ``publish`` takes it (``"auto"``: arrays of up to 100 records).
        validate: check each record against its standard model before sending it.
        surveillance_conn_id: the connection (see :class:`SurveillanceHook`).
    """

    template_fields: Sequence[str] = ("path", "failures_path")
    ui_color = "#f3e5d6"

    def __init__(
        self,
        *,
        path: str,
        failures_path: Optional[str] = None,
        max_rejected: int = 0,
        region: Optional[str] = _publish.OPTION_DEFAULTS["region"],
        batch_size: Any = _publish.OPTION_DEFAULTS["batch_size"],
        validate: bool = _publish.OPTION_DEFAULTS["validate"],
        surveillance_conn_id: str = SurveillanceHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(max_rejected, bool) or not isinstance(max_rejected, int) or max_rejected < 0:
            raise ValueError(
                f"`max_rejected` must be a whole number, 0 or more, got {max_rejected!r}"
            )
        self.path = os.fspath(path)
        self.failures_path = None if failures_path is None else os.fspath(failures_path)
        self.max_rejected = max_rejected
        self.region = region
        self.batch_size = batch_size
        self.validate = validate
        self.surveillance_conn_id = surveillance_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        """Publishes the file; fails on more failures than ``max_rejected`` (see the class).

        Raises:
            PublishError: more records than ``max_rejected`` were not accepted, or the publish
                was interrupted (``.report`` holds every failure).
            ConfigError: the connection lacks a field.
            OSError: the file cannot be read, or the failures cannot be written.
            SurveillanceError: any other failure, typed, as ``publish`` raises it.
        """
        hook = SurveillanceHook(self.surveillance_conn_id)
        with hook.get_client() as client, _readable(self.path) as source:
            report = client.publish(
                source, region=self.region, batch_size=self.batch_size, validate=self.validate,
                progress=False,
            )  # fmt: skip
        self.log.info("%s", report.summary())
        failed = len(report.rejected) + len(report.unconfirmed)
        if self.failures_path is not None:
            with _writable(self.failures_path) as local:
                written = report.write_failures(local)
            self.log.info("%d records not accepted written to %s", written, self.failures_path)
        summary = {
            "path": _store.shown(self.path),
            "total": report.total,
            "accepted": report.accepted,
            "rejected": len(report.rejected),
            "unconfirmed": len(report.unconfirmed),
            "requests": report.requests,
            "failures_path": None
            if self.failures_path is None
            else _store.shown(self.failures_path),
        }
        if not report.ok:
            if failed > self.max_rejected or report.interrupted or report.unread:
                report.raise_on_failure()
            self.log.warning(
                "%d records not accepted, within max_rejected=%d", failed, self.max_rejected
            )
        return summary


def _asset_uri(path: str) -> str:
    """The asset of a dataset's path: its URI without credentials, ``file://`` for a local
    directory."""
    if _store.is_uri(path):
        return _store.shown(path).rstrip("/")
    return "file://" + os.path.abspath(path)


@contextlib.contextmanager
def _readable(path: str) -> Iterator[str]:
    """A local path of the file ``path``: itself, or a copy of an object store's."""
    location = _store.resolve(path, "path")
    if location.filesystem is None:
        yield location.path
        return
    with tempfile.TemporaryDirectory(prefix="surveillance-") as tmp:
        local = os.path.join(tmp, os.path.basename(location.path) or "records.jsonl")
        _store.download(location, local)
        yield local


@contextlib.contextmanager
def _writable(path: str) -> Iterator[str]:
    """A local path to write, uploaded to ``path`` when that is in an object store."""
    location = _store.resolve(path, "failures_path")
    if location.filesystem is None:
        yield location.path
        return
    with tempfile.TemporaryDirectory(prefix="surveillance-") as tmp:
        local = os.path.join(tmp, "failures.jsonl")
        yield local
        _store.upload(local, location)
