"""Incremental sync of events to a Parquet dataset: :func:`sync_events`
(``client.sync_events(...)``, ``surveillance sync DIR``).

Layout of a synced directory::

    DIR/
      date=2026-01-05/part-0.parquet   one file per UTC date of startTime, sorted by (startTime, id)
      date=2026-01-06/part-0.parquet
      _sync_state.json                 start, report_id, the synced instant, last run's figures
      _sync.lock                       held (flock) by the run in progress
      _sync_carried.bin                the pages a stopped run read past what it stored, for
                                       the next run (only after a run the quota or Ctrl-C
                                       stopped)

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

from ..types import SettleLike as SettleLike
from . import _locks, _state
from ._fetching import _fetch as _fetch
from ._fetching import _Progress as _Progress
from ._fetching import _wind_down as _wind_down
from ._job import DEFAULT_SETTLE as DEFAULT_SETTLE
from ._job import _open as _open
from ._job import parse_settle, read_state, sync_events, sync_files
from ._local_store import PART_FILE as PART_FILE
from ._locks import _Lock as _Lock
from ._partitions import _PartitionWriter as _PartitionWriter
from ._result import SyncInterrupted, SyncResult

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

# The names are defined beside the code that uses them, and assigned here, where the
# reference's autodoc reads their comments.
#: Name of the state file inside the dataset directory (an object, on an object store).
STATE_FILE = _state.STATE_FILE
#: Name of the lock file inside the dataset directory (an object, on an object store).
LOCK_FILE = _locks.LOCK_FILE
