"""The sync job: :func:`sync_events` brings a dataset up to date (plans the ranges to fetch,
fetches them, merges them into the partitions, records the state last); :func:`read_state` and
:func:`sync_files` read a dataset's state; :func:`parse_settle` reads the ``settle`` argument."""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import time
from typing import Any, List, Optional, Tuple, Union

from .. import _check, _core, _progress, _store
from .._check import shown
from .._time import from_ms, to_ms
from ..errors import ConfigError, QuotaExhaustedError, arg, worded
from ..types import Progress, SettleLike, TimeLike
from ._fetching import Client, _fetch, _Progress, _Whole, _wind_down
from ._local_store import _LocalStore
from ._object_store import _ObjectStore
from ._partitions import _PartitionWriter
from ._result import SyncInterrupted, SyncResult
from ._state import _STATE_VERSION, CARRIED_FILE, _iso_ms, _now_ms, _parse_iso_ms

_DAY_MS = _core.DAY_MS
_log = logging.getLogger("surveillance")

#: The default ``settle`` of every reader that takes one (the clients, :func:`sync_events`, the
#: dlt source, the Airflow operator, ``surveillance sync``): the core's, an hour.
DEFAULT_SETTLE = _dt.timedelta(seconds=_core.DEFAULT_SETTLE_S)

_SETTLE_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|w|d|h|m|s)", re.I)
_UNITS_MS = {"w": 7 * _DAY_MS, "d": _DAY_MS, "h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}


def parse_settle(value: SettleLike) -> _dt.timedelta:
    """How long after its start an event may still be created, as a timedelta.

    Accepts a :class:`datetime.timedelta`, a number of seconds, or a duration string made of
    ``<number><unit>`` parts with units ``w``, ``d``, ``h``, ``m``, ``s``, ``ms``.

    >>> [str(parse_settle(s)) for s in ("1h", "30m", "2d", "1h30m", 90, _dt.timedelta(minutes=5))]
    ['1:00:00', '0:30:00', '2 days, 0:00:00', '1:30:00', '0:01:30', '0:05:00']

    Raises:
        ValueError: a text that is no duration, or one outside 0 to 30 days (``TypeError`` for
            another type).
    """
    what = " must be a duration such as `1h`, `30m`, `2d`, a timedelta or seconds"
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise worded(TypeError, arg("settle"), f"{what}, got {type(value).__name__}")
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _SETTLE_PART.findall(text[:200])
            if not parts or len(text) > 200 or _SETTLE_PART.sub("", text).strip():
                raise worded(ValueError, arg("settle"), f"{what}, got {shown(value)}") from None
            seconds = sum(float(n) * _UNITS_MS[u.lower()] for n, u in parts) / 1000
    else:
        seconds = float(value) if abs(value) < 1e18 else float("inf")
    # At most 30 days: every run fetches that much again.
    if not (0 <= seconds <= _core.MAX_SETTLE_S):  # NaN too
        raise worded(ValueError, arg("settle"), f" must be from 0 to 30 days, got {shown(value)}")
    return _dt.timedelta(seconds=seconds)


def sync_events(
    client: Client,
    path: Union[str, os.PathLike[str]],
    start: TimeLike,
    *,
    report_id: Optional[str] = None,
    until: Optional[TimeLike] = None,
    settle: SettleLike = DEFAULT_SETTLE,
    progress: Progress = False,
) -> SyncResult:
    """Keeps a Parquet dataset of events at ``path`` up to date, fetching only what it lacks.

    For ETL jobs run every hour or day on a small request quota. ``path`` is a directory
    of Parquet files partitioned by the UTC date of ``startTime`` (``date=YYYY-MM-DD/``,
    hive style), in the stable events schema of ``events(..., output="arrow")``, with a
    state file (``_sync_state.json``) beside them. The first run fetches
    ``[start, until)``; each later run fetches from the last synced instant minus
    ``settle`` (events can be created a while after they start) up to ``until``, merges
    by ``id`` (an event fetched again replaces its row; no id is ever stored twice) and
    records ``until`` as the synced instant. A closed range is never fetched twice.

    Crash-safe: partitions are replaced by atomic renames and the state is written last,
    so a run killed at any point leaves every partition either as it was or complete, and
    the next run completes the rest. A second run on the same directory while one is in
    progress raises :class:`~surveillance.SyncLockedError` at once. (The argument is
    spelled out in :mod:`surveillance.sync`.)

    Resumable under the daily quota: when the budget runs out, the run stops cleanly
    (every window fetched is stored, the synced instant stands after the last one) and
    returns a result with ``complete=False``, ``remaining`` and ``resets_at``; the next
    run goes on from there. Under a daily budget the range is fetched in chunks that fit
    what remains of the day.

    Interruptible without loss: Ctrl-C asks nothing more, waits for the answers of the
    requests in flight (a few seconds at most; Ctrl-C again stops at once), stores the
    windows received whole, records the end of the last one as the synced instant, and
    raises :class:`~surveillance.SyncInterrupted` (a ``KeyboardInterrupt``, whose
    ``result`` says what was kept); the next run goes on from there.

    Whichever stops a run (the quota, Ctrl-C), the pages it read of the windows it did not
    store whole are kept beside the dataset (``_sync_carried.bin``, which readers skip),
    with or without a cache of settled events: the next run plans the same windows, takes
    those pages instead of asking them again (they are checked to make one answer with the
    pages asked now; if not, the window is read again), and deletes the file once it has
    completed. An interrupted run and the run that resumes it cost the requests of one
    uninterrupted run, and a token.

    Read the dataset with ``pyarrow.dataset.dataset(path, partitioning="hive")``,
    ``pandas.read_parquet(path)``, duckdb or polars. Needs pyarrow
    (``pip install 'surveillance[pandas]'``).

    ``path`` may also be a URI that pyarrow opens (``s3://bucket/prefix``,
    ``gs://bucket/prefix``; ``file://`` is a local directory): each run writes its files
    under names of its own, then the state, which names the live file of each date
    (:func:`surveillance.sync.sync_files` lists them), then deletes the files it
    replaced; a lock object refuses a second run (see :mod:`surveillance.sync`).

    Args:
        client: the :class:`~surveillance.Client` that fetches (the method's ``self``).
        path: the dataset directory (created if needed), or a URI.
        start: the first instant the dataset holds. An earlier ``start`` than a previous
            run's fills the missing range in; a later one changes nothing.
        report_id: only the events of this report; a directory holds one report (or all
            events): a different ``report_id`` raises :class:`~surveillance.ConfigError`.
        until: end of the range, exclusive (default: now). The synced instant recorded is
            ``until``, or the time the run began when ``until`` is later.
        settle: how long after its start an event may still be created: ``"1h"``,
            ``"30m"``, ``"2d"``, ``"1h30m"``, a :class:`~datetime.timedelta` or seconds.
            Each run fetches that much again before the synced instant.
        progress: a bar of the fetch as :meth:`~surveillance.Client.events` draws it
            (events, requests, requests expected, time left), over all the ranges the run
            fetches: ``"auto"`` (in Jupyter or on a terminal), ``True``, ``False`` (the
            default: none), or a callable that receives its dicts.

    Returns:
        :class:`~surveillance.SyncResult`: the ranges fetched, windows, requests made
        (every request of this client during the run), events added and replaced, the
        partitions written and the new synced instant.

    Raises:
        SyncLockedError: another run holds the directory's lock.
        SyncInterrupted: Ctrl-C; what was fetched is stored (see above).
        ConfigError: ``report_id`` differs from the directory's, or its state file is
            damaged; a URI whose scheme pyarrow does not know, or whose bucket does not
            exist (before any request).
        ValueError: ``until`` is not after ``start`` on the first run.
        TypeError: an argument is of the wrong type.
        AuthError: the service refused the credentials.
        ApiError: the service answered an error status, or an answer that is not its own, after
            the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
            (429) or ``ServerError`` (5xx).
        TransportError: no usable answer (connection, TLS or timeout) after the retries.

    Example:
        >>> import surveillance as sv, pyarrow.dataset as ds, tempfile
        >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
        ...     client = emu.client()
        ...     path = tempfile.mkdtemp()
        ...     first = client.sync_events(path, emu.start, until="2026-01-06T06:00:00Z")
        ...     second = client.sync_events(path, emu.start, until=emu.end)
        ...     ds.dataset(path, partitioning="hive").count_rows()
        1000
        >>> second.added + first.added, second.synced_until.isoformat()
        (1000, '2026-01-07T00:00:00+00:00')
    """
    root = _check.path("path", path)
    _check.text("report_id", report_id, optional=True, longest=100)
    pa, pq = _require_pyarrow()
    store = _open(root)  # a URI pyarrow does not know is refused here, before any request
    # Requests from the start of the call, as its cost (`Client.last_cost`) counts them.
    before = client._sent()
    started = time.perf_counter()
    wall_ms = _now_ms()
    start_ms = to_ms(start, "start")
    until_ms = wall_ms if until is None else to_ms(until, "until")
    settle_ms = int(parse_settle(settle).total_seconds() * 1000)
    store.create()
    with store.lock():
        state = store.begin()
        if state is not None and _norm(state.get("report_id")) != _norm(report_id):
            raise worded(
                ConfigError,
                arg("report_id"),
                f" {_show(report_id)} differs from the {_show(state.get('report_id'))} "
                f"the dataset at `{store.shown}` was synced with: sync it into another directory",
            )
        ranges, first_ms = _plan(state, start_ms, until_ms, settle_ms)
        writer = _PartitionWriter(store, pa, pq)
        bar, close_bar = _progress.make(progress, "sync", client.quota()["limit"])
        tracker = _Progress(bar=_Whole(bar, ranges) if bar is not None else None)
        had_carried = _hold_carried(client, store, state, report_id, tracker)
        stopped: Optional[QuotaExhaustedError] = None
        interrupted = False
        left: Optional[Tuple[int, int]] = None
        carried: Optional[Tuple[bytes, int]] = None
        try:
            for i, (lo, hi) in enumerate(ranges):
                try:
                    for table in _fetch(client, pa, lo, hi, report_id, tracker):
                        store.heartbeat()
                        writer.consume(table)
                        tracker.taken()
                except QuotaExhaustedError as e:
                    stopped = e
                    carried = _wind_down(tracker, pa, writer.consume)
                    left = (tracker.frontier, hi)
                    ranges = ranges[: i + 1]
                    break
                except KeyboardInterrupt:
                    # What was fetched is kept: the windows received are stored, the next
                    # run goes on from the last one's end, and the pages read past it (the
                    # answers of the requests in flight included) are kept for it.
                    interrupted = True
                    carried = _wind_down(tracker, pa, writer.consume)
                    left = (tracker.frontier, hi)
                    ranges = ranges[: i + 1]
                    break
        finally:
            close_bar()
            if tracker.stream is not None:
                tracker.stream.close()
        writer.finish()
        requests = client._sent() - before
        old = None if state is None else _parse_iso_ms(state["synced_until"])
        if stopped is None and not interrupted:
            # Nothing after `until` can have been fetched, nor anything after the run began.
            synced = min(until_ms, wall_ms) if old is None else max(min(until_ms, wall_ms), old)
        else:
            # Every window before the frontier is stored; the rest waits for the next run. A
            # frontier before the old data's start (an earlier `start` being filled in) leaves
            # a gap before it: the next run fetches from the frontier again, over the old data.
            synced = tracker.frontier
            if state is not None and synced >= _parse_iso_ms(state["start"]):
                synced = max(synced, old or synced)
        elapsed = time.perf_counter() - started
        if carried is not None:
            store.write_carried(carried[0])
        elif had_carried:
            store.write_carried(None)
        if left is None:
            client._inner.drop_carried(report_id)
        result = SyncResult(
            path=store.shown,
            ranges=[(from_ms(a), from_ms(b)) for a, b in ranges],
            windows=tracker.windows,
            requests=requests,
            added=writer.added,
            replaced=writer.replaced,
            partitions=sorted(writer.written),
            synced_until=from_ms(synced),
            elapsed=elapsed,
            complete=left is None,
            remaining=None if left is None else (from_ms(left[0]), from_ms(left[1])),
            resets_at=None if stopped is None else stopped.resets_at,
            interrupted=interrupted,
        )
        store.write_state(
            {
                "version": _STATE_VERSION,
                "start": _iso_ms(first_ms),
                "report_id": report_id if state is None else state.get("report_id"),
                "synced_until": _iso_ms(synced),
                "settle_seconds": settle_ms / 1000,
                "complete": left is None,
                "fetched_at": _iso_ms(wall_ms),
                # Where the pages carried to the next run were read: from the frontier to the
                # end of the chunk the run stopped in.
                **(
                    {"carried": [_iso_ms(tracker.frontier), _iso_ms(carried[1])]}
                    if carried is not None
                    else {}
                ),
                "last_run": {
                    "finished_at": _iso_ms(_now_ms()),
                    "ranges": [[_iso_ms(a), _iso_ms(b)] for a, b in ranges],
                    "windows": tracker.windows,
                    "requests": requests,
                    "added": writer.added,
                    "replaced": writer.replaced,
                    "partitions": sorted(writer.written),
                },
            },
        )
        if interrupted:
            raise SyncInterrupted(result, None if carried is None else from_ms(carried[1]))
        return result


def read_state(path: Union[str, os.PathLike[str]]) -> Optional[dict[str, Any]]:
    """The state of the dataset at ``path`` (``start``, ``report_id``, ``synced_until``,
    ``settle_seconds`` and the last run's figures; on an object store, ``files``: the live
    file of each date), or None before its first run. ``path`` is a directory or a URI, as
    for :func:`sync_events`.

    >>> import tempfile
    >>> read_state(tempfile.mkdtemp()) is None
    True

    Raises:
        ConfigError: the state file exists but cannot be read as one.
    """
    return _open(_check.path("path", path)).read_state()


def sync_files(path: Union[str, os.PathLike[str]]) -> List[str]:
    """The data files of the dataset at ``path`` that its state names, in date order: the
    files to read, on an object store, while another run may be writing (see "On an object
    store" in this module's documentation). Local paths for a directory; for a URI, paths
    inside the filesystem of ``pyarrow.fs.FileSystem.from_uri(path)``
    (``bucket/prefix/date=2026-01-05/part-....parquet``). Empty before the first run.

    Read them with pyarrow, the ``date`` column from the names as for the whole directory:

    >>> import surveillance as sv, pyarrow.dataset as ds, tempfile
    >>> with sv.Emulator(sites=2, days=2, events_per_day=300) as emu:
    ...     path = tempfile.mkdtemp()  # or "s3://bucket/events"
    ...     _ = emu.client().sync_events(path, emu.start, until=emu.end)
    >>> files = sync_files(path)
    >>> [f[len(path) :] for f in files]
    ['/date=2026-01-05/part-0.parquet', '/date=2026-01-06/part-0.parquet']
    >>> ds.dataset(files, partitioning="hive", partition_base_dir=path).count_rows()
    600

    For a URI, pass its filesystem and the path inside it: ``fs, base =
    pyarrow.fs.FileSystem.from_uri(uri)``, then ``ds.dataset(sync_files(uri), filesystem=fs,
    partitioning="hive", partition_base_dir=base)``.

    Raises:
        ConfigError: the state file cannot be read, or a URI's scheme is unknown.
    """
    store = _open(_check.path("path", path))
    store.read_state()
    return store.files()


def _plan(
    state: Optional[dict[str, Any]], start_ms: int, until_ms: int, settle_ms: int
) -> Tuple[List[Tuple[int, int]], int]:
    """The ranges to fetch, and the dataset's start to record."""
    if state is None:
        if until_ms <= start_ms:
            raise worded(
                ValueError,
                arg("until"),
                f" ({_iso_ms(until_ms)}) must be after ",
                arg("start"),
                f" ({_iso_ms(start_ms)})",
            )
        return [(start_ms, until_ms)], start_ms
    old_start = _parse_iso_ms(state["start"])
    synced = _parse_iso_ms(state["synced_until"])
    first = min(start_ms, old_start)
    ranges: List[Tuple[int, int]] = []
    if start_ms < old_start:
        # An earlier start than before: fill the range the dataset never had.
        ranges.append((start_ms, min(old_start, until_ms)))
    lo = max(old_start, synced - settle_ms)
    if state.get("complete") is False and "fetched_at" in state:
        # The last run stopped on the quota: what it fetched before `synced` was settled then
        # if it was `settle` old at the time; only the rest is fetched again.
        fetched_at = _parse_iso_ms(state["fetched_at"])
        lo = max(old_start, min(synced, fetched_at - settle_ms))
    if until_ms > lo:
        if ranges and ranges[-1][1] >= lo:
            ranges[-1] = (ranges[-1][0], until_ms)
        else:
            ranges.append((lo, until_ms))
    return [(a, b) for a, b in ranges if b > a], first


def _hold_carried(
    client: Client,
    store: Union[_LocalStore, _ObjectStore],
    state: Optional[dict[str, Any]],
    report_id: Optional[str],
    tracker: _Progress,
) -> bool:
    """Hands the client the pages the last run carried to this one, if it did (its fetches
    take them instead of asking them again), and tells ``tracker`` where they were read;
    whether there was a file of them. A damaged file is warned about: its pages are asked
    again."""
    data = store.read_carried()
    if data is None:
        return False
    try:
        client._inner.hold_carried(data, report_id)
    except ValueError as e:
        _log.warning(
            "`%s/%s`: the pages the last run carried to this one %s: they are asked again",
            store.shown,
            CARRIED_FILE,
            e,
        )
        return True
    span = state.get("carried") if state is not None else None
    if not isinstance(span, list) or len(span) != 2:
        return True
    try:
        tracker.carried = (_parse_iso_ms(span[0]), _parse_iso_ms(span[1]))
    except ConfigError:
        pass  # the pages are held all the same; the chunks are cut as they come
    return True


def _open(path: str) -> Union[_LocalStore, _ObjectStore]:
    """The dataset at ``path``: a local directory (a path, or a ``file://`` URI), or a prefix
    in an object store (another URI that pyarrow opens). Sends nothing."""
    location = _store.resolve(path, "path")
    if location.filesystem is None:
        return _LocalStore(location.path)
    return _ObjectStore(location)


def _require_pyarrow() -> Tuple[Any, Any]:
    try:
        import pyarrow as pa  # optional: pyarrow
        import pyarrow.parquet as pq  # optional: pyarrow
    except ImportError:
        raise ImportError(
            "sync_events writes Parquet with pyarrow: pip install 'surveillance[pandas]'"
        ) from None
    return pa, pq


def _norm(report_id: Optional[str]) -> Optional[str]:
    return None if report_id is None else str(report_id).strip().lower()


def _show(report_id: Optional[str]) -> str:
    return "None (all events)" if report_id is None else f"`{report_id}`"
