"""Incremental sync of events to a Parquet dataset: :func:`sync_events`
(``client.sync_events(...)``, ``surveillance sync DIR``).

Layout of a synced directory::

    DIR/
      date=2026-01-05/part-0.parquet   one file per UTC date of startTime, sorted by (startTime, id)
      date=2026-01-06/part-0.parquet
      _sync_state.json                 start, report_id, the synced instant, last run's figures
      _sync.lock                       held (flock) by the run in progress

Readers (``pyarrow.dataset.dataset(DIR, partitioning="hive")``, ``pandas.read_parquet(DIR)``,
duckdb, polars, Spark) see only the data files: names starting with ``_`` or ``.`` are skipped
by Arrow's and pandas' discovery, and temporary files also end with ``.tmp``. The files hold
exactly the client's stable events schema (``client.events(..., output="arrow")``); the
``date`` column comes from the directory names.

Each run fetches ``[synced - settle, until)`` (the first run ``[start, until)``), merges the
events into the partitions of their dates by ``id`` (an event fetched again replaces its old
row; a row not fetched again is kept), and records ``until`` as the new synced instant.

Why a run killed at any instant (SIGKILL, power loss) leaves a readable dataset without a
duplicated id, and why the next run completes it:

1. *Every visible file is whole.* A partition is written to a temporary file in its own
   directory (a hidden name, which readers skip), flushed and ``fsync``-ed, then renamed over
   ``part-0.parquet`` with :func:`os.replace`, which is atomic on POSIX file systems: a reader,
   or the disk after a crash, holds the old file or the new one, never a mix. The directory is
   ``fsync``-ed after the rename, so the rename itself is durable.
2. *No id twice.* An event belongs to the partition of its startTime's UTC date, and each
   partition is exactly one file. The new file of a partition is its old rows minus those
   fetched again, plus the fetched rows: each id once. So whichever partitions a killed run had
   already replaced, every id appears in one file, once. (This rests on an event's startTime
   never changing, which holds for the service: its events are keyed by time.)
3. *The state moves last.* The state file is replaced (write temporary, ``fsync``,
   :func:`os.replace`, ``fsync`` the directory) only after every partition of the run is in
   place. A run killed before that leaves the previous synced instant, so the next run fetches
   the same range again and merges it: partitions already replaced merge the same events again
   (idempotent), the others receive theirs. A run killed after it has finished its work.
4. *Nothing is left to block or confuse the next run.* The lock is an ``flock`` the kernel
   releases when the process dies, never a stale file to delete by hand; temporary files of a
   killed run are removed by the next one, under the lock.

Concurrent runs on one directory are refused: the second raises :class:`SyncLockedError`
at once instead of waiting or interleaving its writes.

On an object store
------------------

``path`` may be a URI that :func:`pyarrow.fs.FileSystem.from_uri` opens: ``s3://bucket/prefix``,
``gs://bucket/prefix`` (credentials and endpoint from pyarrow's usual environment: the
``AWS_*`` variables, ``?region=...&endpoint_override=...`` in the URI, ...). A ``file://`` URI
is a local directory, as above. A scheme pyarrow does not know, or a bucket that does not
exist, is refused (:class:`ConfigError`) before any request to the service. Messages and
:attr:`SyncResult.path` show the URI without its user info and query string. An object store
has neither an atomic rename nor ``flock``, so the layout and the commit differ::

    PREFIX/
      date=2026-01-05/part-20260105T120000Z-1a2b3c4d.parquet   the file of that date, written
                                                              by the run of that id
      _sync_state.json      as above, and ``files``: the live file of each date
      _sync.lock            the run that holds the dataset, and until when

1. *Data files first, under names of their own.* A run writes each partition it changes to a
   new object named after the run, never over a file the state names. An object appears
   whole, when its upload completes.
2. *The state last.* Then the run writes the state object (one upload: readers get the old
   one or the new one), which names the live file of each date. A run that stops before
   that (killed, a failure) leaves the previous state and the files it names as they were:
   the next run deletes the files no state names (the leftovers of the stopped run) and
   fetches the same range again, merging into the files the state names: each id is stored
   once, as in a directory.
3. *Then the replaced files go.* After the state, the files it no longer names are deleted
   (one whose deletion fails is a leftover that the next run deletes).

The state is the truth: :func:`sync_files` lists the live files it names, for
``pyarrow.dataset.dataset(files, filesystem=..., partitioning="hive",
partition_base_dir=...)`` (its example shows the call). During a run, a listing of the
prefix also holds the files of the run in progress (a date being rewritten has two files:
its ids twice), and once the run has written its state, the files it replaced are deleted
under a reader that read the previous state: such a reader reads the state again. Between
runs (after one that completed), the prefix holds the live files only, so that
``pyarrow.dataset.dataset(uri, partitioning="hive")``, duckdb or Spark read it as a whole.

Locking: the lock is an object, ``_sync.lock``, naming the run that holds it, its host and
pid, and when its lease ends (5 minutes after it was last renewed; the run renews it every
minute, between windows and partitions). A run refuses to start, with
:class:`SyncLockedError`, while another run's lease lasts; after writing its lock it waits a
second and reads it back, so that of two runs started together only the one written last
goes on; before writing the state it checks that it still holds the lock (a run that lost
it records nothing); it deletes the lock when it ends. A run killed leaves its lock until
the lease ends: the next run is refused until then (or delete ``_sync.lock``, once sure that
no run goes on). Leases are compared with the clocks of the machines that run the syncs.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from . import _core, _progress, _store
from ._progress import ProgressArg
from ._time import TimeLike, from_ms, to_ms
from .errors import ConfigError, QuotaExhaustedError, SyncLockedError

#: What the sync needs of a client (a :class:`~surveillance.Client`: named only in words, so
#: that this module, which the client's ``sync_events`` calls, does not import it back).
Client = Any

__all__ = [
    "SyncResult",
    "SyncInterrupted",
    "sync_events",
    "read_state",
    "sync_files",
    "parse_settle",
    "STATE_FILE",
    "LOCK_FILE",
]

#: Name of the state file inside the dataset directory (an object, on an object store).
STATE_FILE = "_sync_state.json"
#: Name of the lock file inside the dataset directory (an object, on an object store).
LOCK_FILE = "_sync.lock"
#: The one data file of each partition.
PART_FILE = "part-0.parquet"

_STATE_VERSION = 1
_DAY_MS = _core.DAY_MS
_TMP_SUFFIX = ".tmp"
#: The shortest chunk of a range fetched under a daily budget (see `_fetch`).
_MIN_CHUNK_MS = 60_000
_HOUR_MS = 3_600_000

SettleLike = Union[str, _dt.timedelta, int, float]


@dataclass(frozen=True)
class SyncResult:
    """What one run of :func:`sync_events` did.

    Attributes:
        path: the dataset directory, or its URI (without its user info or query string).
        ranges: the time ranges fetched, ``[(start, end), ...]`` (aware UTC datetimes); empty
            when there was nothing to fetch.
        windows: event windows fetched (the client's units of at most 10,000 events).
        requests: requests the client made during the run (every endpoint: they all count
            against the daily quota), from :meth:`Client.stats`.
        added: events that were not in the dataset.
        replaced: events that were, fetched again (they replaced their old rows).
        partitions: the ``YYYY-MM-DD`` dates whose partition was written.
        synced_until: the new synced instant: the next run fetches from it minus ``settle``.
        elapsed: seconds the run took.
        complete: False when the day's request quota ran out (``QuotaExhaustedError``): every
            window fetched until then is stored and ``synced_until`` stands after the last
            one, so the next run goes on from there.
        remaining: what is left to fetch when not complete (``(start, end)``), else None.
        resets_at: when the quota comes back, when not complete.

    >>> r = SyncResult("events", [], 0, 0, 0, 0, [],
    ...                _dt.datetime(2026, 1, 6, tzinfo=_dt.timezone.utc), 0.01)
    >>> print(r)
    nothing to fetch; synced until 2026-01-06T00:00:00.000Z
    """

    path: str
    ranges: List[Tuple[_dt.datetime, _dt.datetime]]
    windows: int
    requests: int
    added: int
    replaced: int
    partitions: List[str] = field(default_factory=list)
    synced_until: Optional[_dt.datetime] = None
    elapsed: float = 0.0
    complete: bool = True
    remaining: Optional[Tuple[_dt.datetime, _dt.datetime]] = None
    resets_at: Optional[_dt.datetime] = None
    interrupted: bool = False

    def __str__(self) -> str:
        until = _iso(self.synced_until)
        if not self.ranges:
            return f"nothing to fetch; synced until {until}"
        spans = ", ".join(f"{_iso(a)} .. {_iso(b)}" for a, b in self.ranges)
        # `replaced`: events the dataset held, fetched again; a partition is written only
        # when what it holds changed, so events fetched again unchanged write none.
        if self.added or self.replaced:
            got = f"{_count(self.windows, 'window')}, {_count(self.added, 'event')} added"
        else:
            got = "no window whole" if self.interrupted else "no events"
        again = f", {self.replaced:,} fetched again" if self.replaced else ""
        done = (
            f"fetched {spans}: {got}{again}, {_count(self.requests, 'request')}, "
            f"{_count(len(self.partitions), 'partition')} written in {self.elapsed:.2f} s; "
            f"synced until {until}"
        )
        if self.complete or self.remaining is None:
            return done
        a, b = self.remaining
        if self.interrupted:
            return (
                f"{done}; interrupted: {_iso(a)} .. {_iso(b)} remains (the next run goes on "
                "from there)"
            )
        return (
            f"{done}; stopped: the day's request quota is used up, "
            f"{_iso(a)} .. {_iso(b)} remains (the next run goes on from there; the quota "
            f"comes back at {_iso(self.resets_at)})"
        )

    def __repr__(self) -> str:
        spans = ", ".join(f"{_iso(a)}..{_iso(b)}" for a, b in self.ranges)
        stopped = ", interrupted=True" if self.interrupted else ""
        return (
            f"SyncResult(path={self.path!r}, ranges=[{spans}], windows={self.windows}, "
            f"requests={self.requests}, added={self.added}, replaced={self.replaced}, "
            f"partitions={len(self.partitions)}, synced_until={_iso(self.synced_until)}, "
            f"elapsed={self.elapsed:.2f}s, complete={self.complete}{stopped})"
        )

    def _repr_html_(self) -> str:
        """Its figures as a table, for Jupyter."""
        from ._html import table

        return table("SyncResult", self)


def _count(n: int, word: str) -> str:
    """``1 window``, ``2 windows``, ``14,799 events``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


class SyncInterrupted(KeyboardInterrupt):
    """Ctrl-C (``KeyboardInterrupt``) stopped :func:`sync_events`: what it had fetched is
    stored, and the next run goes on from there. ``result``: the :class:`SyncResult` of the
    run (``interrupted`` true, ``remaining`` what is left); the message says what was kept.

    The windows received whole are in the dataset and the state records the end of the last
    one; with a cache of settled events (see :meth:`Client.cache_info`), the pages read of the
    window in progress wait there, and the next run takes them instead of asking them again.
    """

    def __init__(self, result: SyncResult, carried: Optional[_dt.datetime] = None) -> None:
        kept = (
            f"; the pages read of the window from {_iso(result.remaining[0])} to {_iso(carried)} "
            "wait in the cache for it"
            if carried is not None and result.remaining is not None
            else ""
        )
        super().__init__(f"{result.path}: {result}{kept}")
        self.result = result


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
    from ._check import shown

    what = "`settle` must be a duration such as `1h`, `30m`, `2d`, a timedelta or seconds"
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{what}, got {type(value).__name__}")
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _SETTLE_PART.findall(text[:200])
            if not parts or len(text) > 200 or _SETTLE_PART.sub("", text).strip():
                raise ValueError(f"{what}, got {shown(value)}") from None
            seconds = sum(float(n) * _UNITS_MS[u.lower()] for n, u in parts) / 1000
    else:
        seconds = float(value) if abs(value) < 1e18 else float("inf")
    # At most 30 days: every run fetches that much again.
    if not (0 <= seconds <= _core.MAX_SETTLE_S):  # NaN too
        raise ValueError(f"`settle` must be from 0 to 30 days, got {shown(value)}")
    return _dt.timedelta(seconds=seconds)


def sync_events(
    client: Client,
    path: Union[str, os.PathLike[str]],
    start: TimeLike,
    *,
    report_id: Optional[str] = None,
    until: Optional[TimeLike] = None,
    settle: SettleLike = "1h",
    progress: ProgressArg = False,
) -> SyncResult:
    """Brings the Parquet dataset at ``path`` up to ``until``; see :meth:`Client.sync_events`.

    Raises:
        SyncLockedError: another run holds the directory's lock.
        ConfigError: ``report_id`` differs from the directory's, its state file is damaged, or a
            URI's scheme or bucket is unknown (before any request).
        ValueError: ``until`` is not after ``start`` on the first run.
        AuthError: the service refused the credentials.
        ApiError: the service answered an error status, or an answer that is not its own, after the
            retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError`` (429) or
            ``ServerError`` (5xx).
        TransportError: no usable answer (connection, TLS or timeout) after the retries.
    """
    from . import _check

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
            raise ConfigError(
                f"`report_id` {_show(report_id)} differs from the {_show(state.get('report_id'))} "
                f"the dataset at `{store.shown}` was synced with: sync it into another directory"
            )
        ranges, first_ms = _plan(state, start_ms, until_ms, settle_ms)
        writer = _PartitionWriter(store, pa, pq)
        bar, close_bar = _progress.make(progress, "sync", client.quota()["limit"])
        tracker = _Progress(bar=_Whole(bar, ranges) if bar is not None else None)
        stopped: Optional[QuotaExhaustedError] = None
        interrupted = False
        left: Optional[Tuple[int, int]] = None
        try:
            for i, (lo, hi) in enumerate(ranges):
                try:
                    for table in _fetch(client, pa, lo, hi, report_id, tracker):
                        store.heartbeat()
                        writer.consume(table)
                except QuotaExhaustedError as e:
                    stopped = e
                    left = (tracker.frontier, hi)
                    ranges = ranges[: i + 1]
                    break
                except KeyboardInterrupt:
                    # What was fetched is kept: the windows received are stored, the next
                    # run goes on from the last one's end (and the pages read of the window
                    # in progress wait in the client's cache).
                    interrupted = True
                    left = (tracker.frontier, hi)
                    ranges = ranges[: i + 1]
                    break
        finally:
            close_bar()
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
            carried = client._inner.carried_until(tracker.frontier, report_id)
            raise SyncInterrupted(result, None if carried is None else from_ms(carried))
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
    from . import _check

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
    from . import _check

    store = _open(_check.path("path", path))
    store.read_state()
    return store.files()


# --- planning --------------------------------------------------------------------------------
def _plan(
    state: Optional[dict[str, Any]], start_ms: int, until_ms: int, settle_ms: int
) -> Tuple[List[Tuple[int, int]], int]:
    """The ranges to fetch, and the dataset's start to record."""
    if state is None:
        if until_ms <= start_ms:
            raise ValueError(
                f"`until` ({_iso_ms(until_ms)}) must be after `start` ({_iso_ms(start_ms)})"
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


# --- writing ---------------------------------------------------------------------------------
@dataclass
class _Progress:
    """How far a run's fetch has got: windows stored, and the end of the last one; ``bar``:
    the progress display of the whole run, if any."""

    windows: int = 0
    frontier: int = 0
    bar: Optional[_Whole] = None


class _Whole:
    """The progress of a run's fetches (one per range, or per chunk under a daily budget) as
    one fetch of all its ranges, for one bar: the figures of the fetches done are added to
    those of the fetch in progress, and what it expects is extended to the ranges after it
    at the density (events, and requests, a millisecond) it expects."""

    def __init__(self, bar: Callable[[dict[str, Any]], Any], ranges: List[Tuple[int, int]]) -> None:
        self.bar = bar
        self.ranges = ranges
        self.total = sum(b - a for a, b in ranges)
        self.done_ms = 0  # the ranges, and chunks, before the fetch in progress
        self.events = 0
        self.requests = 0
        self.saved = 0
        self.span = (0, 0)
        self.last: dict[str, Any] = {}

    def fetch(self, lo: int, hi: int) -> Callable[[dict[str, Any]], Any]:
        """The callback of the fetch of ``[lo, hi)``, which follows the previous one's."""
        self._close()
        self.span = (lo, hi)
        return self

    def _close(self) -> None:
        """Adds the last fetch's figures to those done."""
        last, (lo, hi) = self.last, self.span
        self.done_ms += hi - lo
        self.events += int(last.get("fetched", last.get("events", 0)) or 0)
        self.requests += int(last.get("requests", 0) or 0)
        self.saved += int(last.get("saved", 0) or 0)
        self.last = {}
        self.span = (0, 0)

    def __call__(self, update: dict[str, Any]) -> None:
        self.last = update
        lo, hi = self.span
        span = max(hi - lo, 1)
        # The ranges after this fetch: what is left of the run once it is done.
        after = max(self.total - self.done_ms - span, 0)
        shown = {
            "total_ms": self.total,
            "done_ms": self.done_ms + int(update.get("done_ms", 0)),
            "fetched": self.events + int(update.get("fetched", update.get("events", 0)) or 0),
            "requests": self.requests + int(update.get("requests", 0) or 0),
            "saved": self.saved + int(update.get("saved", 0) or 0),
        }
        events, requests = update.get("expected_events"), update.get("expected_requests")
        if events is not None and requests is not None:
            shown["expected_events"] = self.events + events + round(events * after / span)
            more = requests * after / span
            shown["expected_requests"] = self.requests + requests + round(more)
            eta, left = update.get("eta_s"), requests - int(update.get("requests", 0) or 0)
            # The time left scales with the requests left; none is known at a fetch's end
            # (nothing left of it) while ranges remain after it.
            if eta is not None and left > 0:
                shown["eta_s"] = eta * (left + more) / left
            elif eta is not None and more < 1:
                shown["eta_s"] = eta
        self.bar(shown)


def _fetch(
    client: Client, pa: Any, lo: int, hi: int, report_id: Optional[str], progress: _Progress
) -> Iterator[Any]:
    """The events of ``[lo, hi)`` as Arrow tables, one per window, in time order; after each,
    ``progress.frontier`` is the end of that window (every event before it has been yielded).

    Without a daily budget, the range is one fetch (memory stays bounded: a window at a
    time). Under one, it is fetched in chunks that fit what remains of the day's quota, sized
    by the density seen so far, so that the day's last requests complete a chunk rather than
    start a window of 10,000 events (100 requests) that cannot finish. When the quota runs
    out anyway, :class:`~surveillance.QuotaExhaustedError` propagates after the windows
    completed before it.
    """
    progress.frontier = lo
    t = lo
    events = 0
    while t < hi:
        u = _chunk_end(client, lo, t, hi, events, report_id)
        bar = None if progress.bar is None else progress.bar.fetch(t, u)
        stream = client._inner.events_stream(t, u, report_id, bar, 2, True, True)
        try:
            for batch in stream:
                table = pa.Table.from_batches([pa.record_batch(batch)])
                events += table.num_rows
                progress.windows += 1
                yield table
                progress.frontier = stream.frontier_ms
        finally:
            stream.close()
        progress.frontier = t = u


#: Requests of the day's remaining quota a chunk leaves aside (a token renewal, the probes).
_QUOTA_MARGIN = 3


def _chunk_end(
    client: Client, lo: int, t: int, hi: int, events: int, report_id: Optional[str]
) -> int:
    """The end of the next chunk from ``t``: ``hi`` without a daily budget; otherwise as far
    as the events seen so far (``events`` in ``[lo, t)``) say the remaining quota reaches,
    or, where the last run stopped, the end of the window whose pages it carried (the window
    it was reading when the quota stopped it, so that none of them is asked again)."""
    remaining = client.quota()["remaining"]
    if remaining is None:
        return hi
    # Only where this range starts can the last run have stopped (its frontier).
    carried = client._inner.carried_until(t, report_id) if t == lo else None
    if carried is not None and carried <= hi:
        return int(carried)
    budget = remaining - _QUOTA_MARGIN
    if budget <= 0:
        return hi  # the first request will say the quota is spent
    if events == 0:
        # No density known yet: a range of at most one day, or of an hour when little is left.
        return min(hi, t + (_DAY_MS if budget >= 200 else _HOUR_MS))
    density = events / max(t - lo, 1)  # events per millisecond
    # A page holds 100 events; keep a fifth aside for the chunk's own probe and last page.
    span = int(budget * 100 * 0.8 / density)
    return min(hi, t + max(span, _MIN_CHUNK_MS))


class _PartitionWriter:
    """Merges fetched events into their date partitions, a day at a time.

    The client returns events sorted by startTime, so once a chunk reaches a later date, the
    earlier dates of the run are complete and are written at once (memory stays at about a
    day of events). Correctness does not rest on that order: a date seen again is merged again.
    """

    def __init__(self, store: Any, pa: Any, pq: Any) -> None:
        self.store, self.pa, self.pq = store, pa, pq
        self.pending: Dict[int, list[Any]] = {}
        self.added = 0
        self.replaced = 0
        self.written: set[Any] = set()

    def consume(self, table: Any) -> None:
        """Takes the events of ``table`` (the client's events schema)."""
        pa = self.pa
        if table.num_rows == 0:
            return
        import pyarrow.compute as pc

        table = table.combine_chunks()
        days = _day_numbers(pa, table.column("startTime").combine_chunks())
        # Arrow scalars, not Python ints: converting a Python value makes pyarrow import
        # pandas (most of a short run's time in a fresh process).
        unique = pc.unique(days)
        for day in unique:
            part = table if len(unique) == 1 else table.filter(pc.equal(days, day))
            self.pending.setdefault(day.as_py(), []).append(part)
        latest = pc.max(unique).as_py()
        for d in sorted(d for d in self.pending if d < latest):
            self._flush(d)

    def finish(self) -> None:
        """Writes the dates still pending."""
        for day in sorted(self.pending):
            self._flush(day)

    def _flush(self, day: int) -> None:
        """Merges the pending events of ``day`` into its partition; they stay pending until
        it is written, so that a run interrupted here still writes them as it ends."""
        pa, pq = self.pa, self.pq
        fetched = _dedupe(pa, pa.concat_tables(self.pending[day]))
        name = _date_name(day)
        old = self.store.read_partition(name, pq)
        if old is not None and not old.schema.equals(fetched.schema):
            old = old.cast(fetched.schema)
        if old is None or old.num_rows == 0:
            merged, replaced = fetched, 0
        else:
            import pyarrow.compute as pc

            seen_again = pc.is_in(old.column("id"), value_set=fetched.column("id"))
            replaced = int(pc.sum(seen_again).as_py() or 0)
            merged = pa.concat_tables([old.filter(pc.invert(seen_again)), fetched])
        merged = merged.sort_by([("startTime", "ascending"), ("id", "ascending")])
        # The events fetched again are unchanged: nothing to write.
        if old is None or not merged.equals(old):
            self.store.write_partition(name, lambda f: pq.write_table(merged, f))
            self.written.add(name)
        del self.pending[day]
        self.replaced += replaced
        self.added += fetched.num_rows - replaced


def _day_numbers(pa: Any, times: Any) -> Any:
    """Days since 1970-01-01 of the UTC dates of a ``timestamp[ms, UTC]`` array (int32)."""
    return times.cast(pa.timestamp("ms", "UTC")).cast(pa.date32()).cast(pa.int32())


def _dedupe(pa: Any, table: Any) -> Any:
    """``table`` with one row per id (the last one), as the client guarantees already."""
    import pyarrow.compute as pc

    if pc.count_distinct(table.column("id")).as_py() == table.num_rows:
        return table
    last = {v: i for i, v in enumerate(table.column("id").to_pylist())}
    return table.take(pa.array(sorted(last.values()), pa.int64()))


def _date_name(day: int) -> str:
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=day)).isoformat()


def _atomic_write(directory: str, name: str, write: Any) -> None:
    """Writes ``directory/name`` through a temporary file, fsync and :func:`os.replace`."""
    fresh = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    if fresh:
        _fsync_dir(os.path.dirname(directory) or ".")
    tmp = os.path.join(directory, f".{name}.{os.getpid()}-{secrets.token_hex(4)}{_TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_temporaries(root: str) -> None:
    """Deletes the temporary files a killed run left (only ours: hidden and ``.tmp``)."""
    for directory in [root] + [
        os.path.join(root, d)
        for d in os.listdir(root)
        if d.startswith("date=") and os.path.isdir(os.path.join(root, d))
    ]:
        for name in os.listdir(directory):
            if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass


# --- state -----------------------------------------------------------------------------------
def _read_state(root: str) -> Optional[dict[str, Any]]:
    file = os.path.join(root, STATE_FILE)
    try:
        with open(file, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return _parse_state(data, file)


def _parse_state(data: bytes, file: str) -> dict[str, Any]:
    """The state read from ``file`` (the bytes ``data``), checked."""
    try:
        state = json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise ConfigError(
            f"the sync state `{file}` is not valid JSON ({e}): restore it, or sync into a new "
            "directory"
        ) from None
    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        raise ConfigError(
            f"the sync state `{file}` is not one this version writes: sync into a new directory"
        )
    for key in ("start", "synced_until"):
        _parse_iso_ms(state.get(key, ""), file)
    return state


def _write_state(root: str, state: dict[str, Any]) -> None:
    text = json.dumps(state, indent=2) + "\n"
    _atomic_write(root, STATE_FILE, lambda f: f.write(text.encode("utf-8")))


# --- where the dataset lies ------------------------------------------------------------------
def _open(path: str) -> Union[_LocalStore, _ObjectStore]:
    """The dataset at ``path``: a local directory (a path, or a ``file://`` URI), or a prefix
    in an object store (another URI that pyarrow opens). Sends nothing."""
    location = _store.resolve(path, "path")
    if location.filesystem is None:
        return _LocalStore(location.path)
    return _ObjectStore(location)


def _read_partition(pq: Any, source: Any, shown: str) -> Any:
    """The table of a partition's file (a path or an open file), named ``shown`` in errors."""
    try:
        return pq.ParquetFile(source).read()
    except Exception as e:  # pyarrow's errors name neither the file nor the remedy
        raise ConfigError(
            f"`path`: the dataset file `{shown}` cannot be read ({type(e).__name__}: "
            f"{str(e)[:200]}): it is damaged; restore it from a copy (nothing was "
            "written by this run), or sync into a new directory"
        ) from e


class _LocalStore:
    """A dataset in a local directory: one file a date, replaced by atomic renames, under an
    ``flock`` (points 1 to 4 of the module's documentation)."""

    def __init__(self, root: str) -> None:
        self.root = self.shown = root

    def create(self) -> None:
        from . import _check

        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise ConfigError(
                f"`path` {_check.shown(self.root)} cannot be a directory: {why}"
            ) from None

    def lock(self) -> _Lock:
        return _Lock(self.root)

    def heartbeat(self) -> None:
        """Nothing to renew: the kernel holds the lock as long as the process lives."""

    def begin(self) -> Optional[dict[str, Any]]:
        """The state, once the temporary files of a killed run are removed (under the lock)."""
        _remove_temporaries(self.root)
        return _read_state(self.root)

    def read_state(self) -> Optional[dict[str, Any]]:
        return _read_state(self.root)

    def read_partition(self, name: str, pq: Any) -> Any:
        target = os.path.join(self.root, f"date={name}", PART_FILE)
        if not os.path.exists(target):
            return None
        return _read_partition(pq, target, target)

    def write_partition(self, name: str, write: Callable[[Any], None]) -> None:
        _atomic_write(os.path.join(self.root, f"date={name}"), PART_FILE, write)

    def write_state(self, state: dict[str, Any]) -> None:
        _write_state(self.root, state)

    def files(self) -> List[str]:
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        found = (os.path.join(self.root, d, PART_FILE) for d in names if d.startswith("date="))
        return [f for f in found if os.path.isfile(f)]


#: A data file that a run writes in an object store: its date, and the id of the run.
_RUN_FILE = re.compile(r"date=(\d{4}-\d{2}-\d{2})/part-\d{8}T\d{6}Z-[0-9a-f]{8}\.parquet")
#: A data file that the state of an object store may name: a run's, or the local layout's (a
#: dataset copied from a directory).
_DATA_FILE = re.compile(r"date=(\d{4}-\d{2}-\d{2})/part-[A-Za-z0-9_.-]+\.parquet")


def _names_data_files(files: Any) -> bool:
    """Whether ``files`` (a state's) maps dates to data files of those dates."""
    if not isinstance(files, dict):
        return False
    for date, file in files.items():
        match = _DATA_FILE.fullmatch(file) if isinstance(file, str) else None
        if match is None or match.group(1) != date:
            return False
    return True


def _run_id() -> str:
    """A new run's id: its UTC start, to the second, and 8 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


class _ObjectStore:
    """A dataset under a prefix of an object store (S3, GCS ...), which has no rename and no
    flock: each run writes the partitions it changes under names of its own, then the state
    that names the live file of each date, then deletes the files the state no longer names
    ("On an object store" in the module's documentation)."""

    def __init__(self, location: _store.Location) -> None:
        self.location = location
        self.fs = location.filesystem
        self.root = location.path
        self.shown = location.shown
        self.run = _run_id()
        #: The live file of each date, relative to the root: as this run leaves them.
        self.live: Dict[str, str] = {}
        #: ... and as the state written last names them.
        self.named: Dict[str, str] = {}
        self._lock = _ObjectLock(self)

    def create(self) -> None:
        why = _store.unusable(self.location)
        if why:
            raise ConfigError(f"`path` {self.shown}: {why}: create it, or sync elsewhere")

    def lock(self) -> _ObjectLock:
        return self._lock

    def heartbeat(self) -> None:
        self._lock.renew()

    def begin(self) -> Optional[dict[str, Any]]:
        """The state, once the files that no state names (the leftovers of a run that stopped
        before writing its state) are deleted (under the lock)."""
        state = self.read_state()
        self.named = dict(self.live)
        named = set(self.named.values())
        for name in self._listing():
            if _RUN_FILE.fullmatch(name) and name not in named:
                self._delete(name)
        return state

    def read_state(self) -> Optional[dict[str, Any]]:
        self.live = {}
        data = self._get(STATE_FILE)
        if data is None:
            return None
        state = _parse_state(data, self._show(STATE_FILE))
        files = state.get("files")
        if files is None:
            # A dataset copied from a directory: the one file of each date, as named there.
            files = {}
            for name in self._listing():
                match = _DATA_FILE.fullmatch(name)
                if match and name.endswith(f"/{PART_FILE}"):
                    files[match.group(1)] = name
        elif not _names_data_files(files):
            raise ConfigError(
                f"the sync state `{self._show(STATE_FILE)}` names files that are not the "
                "dataset's: restore it, or sync into a new location"
            )
        self.live = dict(files)
        return state

    def read_partition(self, name: str, pq: Any) -> Any:
        file = self.live.get(name)
        if file is None:
            return None
        try:
            source = self.fs.open_input_file(self._path(file))
        except FileNotFoundError:
            raise ConfigError(
                f"`path`: the dataset file `{self._show(file)}`, which the sync state names, "
                "is missing: restore it, or sync into a new location"
            ) from None
        with source:
            return _read_partition(pq, source, self._show(file))

    def write_partition(self, name: str, write: Callable[[Any], None]) -> None:
        file = f"date={name}/part-{self.run}.parquet"
        self._put(file, write)
        self.live[name] = file
        self._lock.renew()

    def write_state(self, state: dict[str, Any]) -> None:
        self._lock.confirm()
        text = json.dumps(dict(state, files=dict(sorted(self.live.items()))), indent=2) + "\n"
        self._put(STATE_FILE, lambda f: f.write(text.encode("utf-8")))
        replaced = [f for d, f in self.named.items() if self.live.get(d) != f]
        self.named = dict(self.live)
        for file in replaced:
            self._delete(file)

    def files(self) -> List[str]:
        return [self._path(f) for _, f in sorted(self.live.items())]

    # The store's operations, on names relative to the root.
    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _show(self, name: str) -> str:
        return f"{self.shown}/{name}"

    def _get(self, name: str) -> Optional[bytes]:
        try:
            with self.fs.open_input_stream(self._path(name)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def _put(self, name: str, write: Callable[[Any], None]) -> None:
        """Writes ``name`` in one upload of the whole content (encoded first, in memory): the
        object appears whole or not at all."""
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        write(sink)
        data = sink.getvalue()
        with self.fs.open_output_stream(self._path(name)) as out:
            out.write(data)

    def _delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except OSError:
            pass  # gone already, or not deletable now: the next run deletes it

    def _listing(self) -> List[str]:
        """The names of the files under the root, relative to it."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        start = len(self.root) + 1
        return [
            i.path[start:] for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File
        ]


#: How long the lock of a run on an object store lasts unless renewed, and how often the run
#: renews it (between windows and partitions).
_LEASE_MS = 5 * 60_000
_RENEW_S = 60.0
#: How long a run waits, once it has written its lock, before reading it back: two runs that
#: both found no lock then both read the one written last, and only its run goes on.
_LOCK_SETTLE_S = 1.0


class _ObjectLock:
    """The lock of a dataset in an object store, which has no flock: the object
    ``_sync.lock`` names the run that holds it and when its lease ends ("Locking" in the
    module's documentation)."""

    def __init__(self, store: _ObjectStore) -> None:
        self.store = store
        self.started = _iso_ms(_now_ms())
        self.renewed = 0.0
        self.held = False

    def __enter__(self) -> _ObjectLock:
        holder = self._read()
        if holder is not None and _lease_lasts(holder):
            raise self._refusal(holder)
        self.held = True
        try:
            self._write()
            time.sleep(_LOCK_SETTLE_S)
            holder = self._read()
            if not self._ours(holder):
                self.held = False
                raise self._refusal(holder)
        except BaseException:
            self.__exit__()  # a Ctrl-C during the wait leaves no lock behind
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.held:
            return
        self.held = False
        try:
            if self._ours(self._read()):
                self.store._delete(LOCK_FILE)
        except OSError:
            pass  # the lease ends by itself

    def renew(self) -> None:
        """Extends the lease, at most every ``_RENEW_S`` seconds, if this run still holds it."""
        if self.held and time.monotonic() - self.renewed >= _RENEW_S:
            self.confirm()
            self._write()

    def confirm(self) -> None:
        """Raises SyncLockedError unless this run still holds the lock."""
        holder = self._read()
        if not self._ours(holder):
            self.held = False
            shown = self.store.shown
            raise SyncLockedError(
                f"another sync took the lock of `{shown}` while this one ran "
                f"({_holder(holder)}): this run recorded nothing (the next run deletes the "
                "files it wrote); make sure that one run at a time syncs a dataset",
                path=shown,
            )

    def _ours(self, holder: Optional[dict[str, Any]]) -> bool:
        return holder is not None and holder.get("run") == self.store.run

    def _read(self) -> Optional[dict[str, Any]]:
        data = self.store._get(LOCK_FILE)
        if data is None:
            return None
        try:
            holder = json.loads(data.decode("utf-8"))
        except ValueError:
            return {}  # not a lock this version writes: no lease
        return holder if isinstance(holder, dict) else {}

    def _write(self) -> None:
        holder = {
            "run": self.store.run,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self.started,
            "expires_at": _iso_ms(_now_ms() + _LEASE_MS),
        }
        text = json.dumps(holder, indent=2) + "\n"
        self.store._put(LOCK_FILE, lambda f: f.write(text.encode("utf-8")))
        self.renewed = time.monotonic()

    def _refusal(self, holder: Optional[dict[str, Any]]) -> SyncLockedError:
        shown = self.store.shown
        until = f" until {holder['expires_at']}" if holder and holder.get("expires_at") else ""
        return SyncLockedError(
            f"another sync is running on `{shown}` ({_holder(holder)}): wait for it to "
            f"finish; the lock of a run that was killed lasts{until} (or delete "
            f"`{shown}/{LOCK_FILE}`, once sure that no run goes on)",
            path=shown,
        )


def _lease_lasts(holder: dict[str, Any]) -> bool:
    try:
        return to_ms(holder.get("expires_at")) > _now_ms()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _holder(holder: Optional[dict[str, Any]]) -> str:
    """Who holds a lock object, in words."""
    if not holder:
        return "its lock changed hands"
    return (
        f"run {holder.get('run')} on host {holder.get('host')}, pid {holder.get('pid')}, "
        f"since {holder.get('started_at')}"
    )


# --- lock ------------------------------------------------------------------------------------
class _Lock:
    """An exclusive, non-blocking lock on ``root/_sync.lock`` (``flock``; the kernel drops it
    when its process dies)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.file = os.path.join(root, LOCK_FILE)
        self.fd: Optional[int] = None

    def __enter__(self) -> _Lock:
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _try_lock(fd)
        except OSError as e:
            if e.errno not in _LOCKED_ERRNOS:
                os.close(fd)
                raise
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (pid {holder})" if holder else ""
            raise SyncLockedError(
                f"another sync is running on `{self.root}`{who}: wait for it to finish; "
                "the lock is released when that process ends",
                path=self.root,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


#: What a non-blocking lock attempt fails with when another process holds the lock.
_LOCKED_ERRNOS = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, getattr(errno, "EDEADLK", -1)}


def _try_lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _read_pid(fd: int) -> Optional[int]:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except (OSError, AttributeError):
        return None


# --- helpers ---------------------------------------------------------------------------------
def _require_pyarrow() -> Tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "sync_events writes Parquet with pyarrow: pip install 'surveillance[pandas]'"
        ) from None
    return pa, pq


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _iso_ms(ms: int) -> str:
    return _iso(from_ms(ms))


def _iso(t: Optional[_dt.datetime]) -> str:
    if t is None:
        return "-"
    t = t.astimezone(_dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _parse_iso_ms(text: Any, file: str = STATE_FILE) -> int:
    try:
        return to_ms(text)
    except (TypeError, ValueError):
        raise ConfigError(
            f"the sync state `{file}` holds `{text}` where a time was expected: restore it, "
            "or sync into a new directory"
        ) from None


def _norm(report_id: Optional[str]) -> Optional[str]:
    return None if report_id is None else str(report_id).strip().lower()


def _show(report_id: Optional[str]) -> str:
    return "None (all events)" if report_id is None else f"`{report_id}`"
