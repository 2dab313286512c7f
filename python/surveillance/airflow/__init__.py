"""An Airflow provider (https://airflow.apache.org): a connection type, a hook and two
operators for the service.

Needs ``pip install 'surveillance[airflow]'`` (Airflow 2.10 or later, and pyarrow). Installed,
the package registers itself as an Airflow provider (the ``apache_airflow_provider`` entry
point): the connection type ``surveillance`` shows in the UI's connection form and in
``airflow providers list``.

- :class:`SurveillanceHook`: a :class:`~surveillance.Client` of a connection of type
  ``surveillance`` (host: the base URL, login: the client id, password: the client secret,
  extra: the other settings by name, ``api_key`` among them), wherever the deployment keeps
  its connections (the metadata database, ``AIRFLOW_CONN_*`` variables, a secrets backend).
- :class:`SyncEventsOperator`: the events of the run's data interval into a Parquet dataset;
  a quota stop defers the task until the quota resets, then it goes on where it stopped.
- :class:`PublishOperator`: a JSON Lines or Parquet file to the webhook; the records not
  accepted to a failures file, and the task fails when there are more than it allows.

Which limit ends a task first
-----------------------------

Three settings bound how long a task may fail before it gives up; set them together:

- ``max_outage`` (the connection's extra, 60 s by default) is how long one call of the client
  rides out an unreachable service (a restart, a deploy) before it raises
  :class:`~surveillance.TransportError`. It is the first to act: a blip of a few seconds never
  fails the task.
- ``retries`` and ``retry_delay`` (the operator's) rerun a task that failed: an outage longer
  than ``max_outage``, a 5xx that outlived the client's retries. A rerun of
  :class:`SyncEventsOperator` goes on from what the failed try stored, so retries cost only the
  requests that the failure lost; give ``retry_delay`` a few minutes (the outage) rather than
  more ``max_outage``, which holds a worker while it waits. A refused credential
  (:class:`~surveillance.AuthError`) or a bad request fails every retry alike.
- ``execution_timeout`` (the operator's) kills a try that runs longer: set it above the longest
  sync of one interval (``client.plan_events(start, end).seconds``, at 1 read a second) plus
  ``max_outage``, so that it ends a hung task, never a slow but healthy one. A deferred task
  is not running: the wait for the quota counts against the trigger's ``timeout`` (none by
  default), not ``execution_timeout``.

A quota stop is none of these: it neither fails the task (no retry can succeed before the
reset, so retries would spend slots for nothing) nor passes it (the interval would be
missing): the task defers, and its worker is free until the quota comes back.

Example:
    A DAG that syncs each day's events into a dataset, then publishes a file
    (``dag.test()`` runs it, see :doc:`/guide/scheduling`)::

        from airflow.sdk import DAG
        from airflow.timetables.interval import CronDataIntervalTimetable
        from surveillance.airflow import PublishOperator, SyncEventsOperator

        with DAG("surveillance_daily", start_date=datetime(2026, 1, 5, tzinfo=timezone.utc),
                 schedule=CronDataIntervalTimetable("@daily", timezone="UTC")):
            SyncEventsOperator(task_id="events", path="/data/events")
            PublishOperator(task_id="sales", path="/data/sales.jsonl",
                            failures_path="/data/sales.failed.jsonl")
"""

from __future__ import annotations

from .._airflow_provider import get_provider_info
from ._hook import SurveillanceHook
from ._operators import PublishOperator, SyncEventsOperator

__all__ = ["SurveillanceHook", "SyncEventsOperator", "PublishOperator", "get_provider_info"]
