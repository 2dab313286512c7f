"""Scale out on Dask: the events of a long range as a dask DataFrame, one partition per time
slice fetched on the workers, and publishing a Dask collection's partitions in parallel.

Needs ``pip install 'surveillance[dask]'`` (dask[dataframe], distributed, pandas, pyarrow).

The :class:`~surveillance.Client` travels to the workers as its configuration (never a token;
see :meth:`Client.__reduce__ <surveillance.Client.__reduce__>`), and each worker process keeps
one client per configuration: every task of that process shares its connections, its limits
and its token, renewed only when it expires.

On a ``dask.distributed`` cluster, the client's :class:`~surveillance.Limits` hold for the
whole cluster, whatever its size, through the scheduler (names carry a hash of the service and
the key, never the key):

- rates: reading tasks take turns, one at a time in the cluster, through a
  ``distributed.Semaphore`` per service and key, and each reads with the whole of the key's
  read limits (publishing tasks likewise with the publish limits); the next turn starts no
  sooner than one interval of the rate after the last one ended;
- the daily quota: the scheduler holds the day's budget of the key (a ``distributed.Variable``
  updated under a ``distributed.Lock``); a task's client draws requests from it in small
  blocks, each request takes one before it is sent, and what a task did not spend goes back.
  When the budget has no more, the task's next request raises
  :class:`~surveillance.QuotaExhaustedError` (:func:`publish` attaches its combined report),
  so the requests of the whole cluster stay within ``daily_requests``.

Each machine's own ledger still counts as well. Without ``dask.distributed`` (the local
schedulers), tasks share the process's one client, and with it its limits.

What a run spends is summed over its tasks, wherever they ran: :func:`cost` of a frame that
:func:`events` made is the requests its partitions have sent (every compute of it), and after
:func:`publish` the client's :attr:`~surveillance.Client.last_cost` is the whole publish's.
Off ``dask.distributed``, the local schedulers (threads, synchronous) count it in this process;
the ``processes`` scheduler's tasks count nowhere the caller can read.

Example:
    >>> import surveillance as sv, surveillance.dask as svd
    >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
    ...     ddf = svd.events(emu.client(), emu.start, emu.end)  # one partition per UTC day
    ...     ddf.npartitions, len(ddf), ddf.index.name
    (2, 1000, 'startTime')
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import hashlib
import math
import os
import pickle
import sys
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _core, _output
from ._core import Cost, PublishReport
from ._time import from_ms, to_ms
from .client import Client
from .types import TimeLike

if TYPE_CHECKING:
    import dask.bag
    import dask.dataframe
    import pandas

__all__ = ["events", "publish", "events_meta", "cost"]

PartitionLike = Union[str, _dt.timedelta, Any]

#: Time slices one call may make (a guard against ``partition="1ms"`` over a year).
MAX_PARTITIONS = 100_000


# --- the client on the workers -------------------------------------------------------------------
_CLIENTS: dict[str, Any] = {}
_CLIENTS_LOCK = threading.Lock()
_CLIENTS_PID = os.getpid()


def _cached_client(key: str, payload: bytes) -> Any:
    """This process's client for the pickled configuration ``payload`` (created once)."""
    global _CLIENTS_PID
    with _CLIENTS_LOCK:
        if _CLIENTS_PID != os.getpid():  # a forked child: its own clients
            _CLIENTS.clear()
            _CLIENTS_PID = os.getpid()
        client = _CLIENTS.get(key)
        if client is None:
            client = pickle.loads(payload)
            _CLIENTS[key] = client
        return client


class _ClientRef:
    """What a task carries of a :class:`~surveillance.Client`: its pickled configuration (the
    client's own ``__reduce__``: no token), and the live client while in the process that
    made it. Elsewhere :meth:`get` returns the process's cached client for that configuration,
    so every task of a worker process shares one client, one connection pool and one token."""

    def __init__(self, client: Any) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"`client` must be a surveillance.Client, got {type(client).__name__}")
        self.payload = pickle.dumps(client)
        self.key = hashlib.sha256(self.payload).hexdigest()
        self._local: Any = client

    def get(self) -> Any:
        if self._local is not None:
            return self._local
        return _cached_client(self.key, self.payload)

    def __getstate__(self) -> dict[str, Any]:
        return {"payload": self.payload, "key": self.key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.payload, self.key, self._local = state["payload"], state["key"], None

    def __dask_tokenize__(self) -> Any:
        return ("surveillance.Client", self.key)

    def __repr__(self) -> str:
        return f"<client ref {self.key[:12]}>"


# --- limits across a distributed cluster ----------------------------------------------------------
#: How often a worker checks what is left of the requests its client was granted.
_POLL_S = 0.02
#: A block of the daily budget lasts about this long at the rate in force (at least 2 requests,
#: at most 50): small enough that the blocks held apart are few, large enough that the
#: scheduler is asked a few times a second at most.
_BLOCK_S = 0.5


def _cluster() -> Any:
    """The ``distributed`` client of the worker this task runs on, or None off a cluster."""
    try:
        from distributed import get_client, get_worker  # optional: distributed
    except ImportError:
        return None
    try:
        get_worker()
    except ValueError:
        return None
    return get_client()


def _key_digest(config: dict[str, Any]) -> str:
    """A name for the service and key of a configuration that does not reveal the key."""
    data = f"{config['base_url']}\0{config['api_key']}".encode()
    return hashlib.sha256(data).hexdigest()[:24]


class _Budget:
    """The state of one service and key that the scheduler holds for the cluster: the day's
    requests drawn (``used``, of ``limit``, on the service's UTC ``day``) and, per kind of
    request, when the next turn may start (``free_at``, wall-clock seconds). Every change is
    made under one ``distributed.Lock``. (With ``kind="cost"``, the requests of one run of
    :func:`events`, ``spent``, which its tasks add to.)"""

    def __init__(self, dask_client: Any, digest: str, kind: str = "budget") -> None:
        from distributed import Lock, Variable  # optional: distributed

        name = f"surveillance-{kind}-{digest}"
        self._lock = Lock(f"{name}-lock")  # type: ignore[no-untyped-call, unused-ignore]
        self._state = Variable(name, client=dask_client)  # type: ignore[no-untyped-call, unused-ignore]

    def update(self, change: Any) -> Any:
        """Applies ``change(state) -> result`` to the state, atomically; returns the result."""

        with self._lock:
            try:
                state = self._state.get(timeout=0)  # type: ignore[no-untyped-call, unused-ignore]
            except (TimeoutError, asyncio.TimeoutError):
                state = {}
            state = dict(state or {})
            result = change(state)
            self._state.set(state)  # type: ignore[no-untyped-call, unused-ignore]
        return result


class _Allowance:
    """Keeps one worker client's allowance of requests topped up from the cluster's daily
    budget while tasks of this process use it, and gives back what they did not spend.

    The first block is drawn before the task sends anything; a thread draws the next one
    when less than half a block is left. When the budget has no more, the allowance is
    closed: the client's next request past it raises ``QuotaExhaustedError``."""

    def __init__(self, client: Any, budget: _Budget, limit: int, block: int) -> None:
        self._client, self._budget, self._limit, self._block = client, budget, limit, block
        self._users = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _day(self) -> int:
        """The service's UTC day by this machine's ledger (days since the epoch)."""
        return int((to_ms(self._client.quota().resets_at) - 1) // _core.DAY_MS)

    def _draw(self) -> int:
        """Requests drawn from the budget (at most a block; 0 when it has none left)."""
        day, local = self._day(), self._client.quota()["used"]
        limit, block = self._limit, self._block

        def change(state: dict[str, Any]) -> int:
            if state.get("day") != day:
                state.update(day=day, used=0)
            state["limit"] = limit
            # What this machine's ledger counted today is spent, whoever spent it.
            used = max(int(state["used"]), int(local))
            grant = max(0, min(block, limit - used))
            state["used"] = used + grant
            return grant

        return int(self._budget.update(change))

    def _give_back(self, n: int) -> None:
        if n <= 0:
            return
        day = self._day()

        def change(state: dict[str, Any]) -> None:
            if state.get("day") == day:
                state["used"] = max(0, int(state["used"]) - n)

        self._budget.update(change)

    def _top_up(self) -> bool:
        """Draws a block; closes the allowance when the budget has none. False once closed."""
        granted = self._draw()
        inner = self._client._inner
        inner.grant_requests(granted)
        if granted == 0:
            inner.close_allowance()
            return False
        return True

    def _run(self) -> None:
        inner = self._client._inner
        try:
            while not self._stop.wait(_POLL_S):
                left = inner.allowance()
                if left is None:
                    return
                if left * 2 < self._block and not self._top_up():
                    return
        except Exception:
            # The scheduler cannot be reached: nothing more can be drawn.
            inner.close_allowance()

    def __enter__(self) -> _Allowance:
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._stop.clear()
                try:
                    if self._top_up():
                        self._thread = threading.Thread(
                            target=self._run, name="surveillance-allowance", daemon=True
                        )
                        self._thread.start()
                except BaseException:
                    self._users -= 1
                    self._client._inner.end_allowance()
                    raise
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._users -= 1
            if self._users:
                return
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None
            self._give_back(self._client._inner.end_allowance())


_ALLOWANCES: dict[str, Any] = {}
_COORDINATION: dict[Any, Any] = {}


def _coordination(dask_client: Any, digest: str) -> tuple[Any, ...]:
    """This process's handles on the scheduler's state of a service and key: the
    :class:`_Budget` and a ``distributed.Semaphore`` of one lease per kind of request (made
    once: each keeps its leases alive from this process)."""
    from distributed import Semaphore  # optional: distributed

    with _CLIENTS_LOCK:
        found = _COORDINATION.get((dask_client.id, digest))
        if found is None:
            turns = {
                kind: Semaphore(max_leases=1, name=f"surveillance-{kind}-{digest}")  # type: ignore[no-untyped-call, unused-ignore]
                for kind in ("read", "publish")
            }
            found = (_Budget(dask_client, digest), turns)
            _COORDINATION[(dask_client.id, digest)] = found
        return found


def _allowance(ref: _ClientRef, client: Any, budget: _Budget, limits: dict[str, Any]) -> _Allowance:
    """This process's allowance of ``client`` (one per configuration)."""
    rates = [r for r in (limits["read_per_second"], limits["publish_per_second"]) if r]
    block = max(2, min(50, math.ceil(max(rates, default=100.0) * _BLOCK_S)))
    with _CLIENTS_LOCK:
        allowance = _ALLOWANCES.get(ref.key)
        if allowance is None or allowance._client is not client:
            allowance = _Allowance(client, budget, limits["daily_requests"], block)
            _ALLOWANCES[ref.key] = allowance
        return allowance


@contextlib.contextmanager
def _limited(ref: _ClientRef, kind: str) -> Any:
    """Runs a task's ``kind`` (``"read"`` or ``"publish"``) requests within the limits of the
    client's key for the whole cluster; yields the client. Off a cluster: the client alone."""
    client = ref.get()
    dask_client = _cluster()
    if dask_client is None:
        yield client
        return
    config = client._inner.config()
    limits, digest = config["limits"], _key_digest(config)
    budget, turns = _coordination(dask_client, digest)
    rate = limits[f"{kind}_per_second"]
    paced = rate is not None or limits[f"{kind}_concurrency"] is not None
    turn = turns[kind] if paced else None
    if turn is not None:
        turn.acquire()
    try:
        quota = (
            _allowance(ref, client, budget, limits)
            if limits["daily_requests"] is not None
            else contextlib.nullcontext()
        )
        with quota:
            if turn is not None and rate is not None:
                # The last turn's requests were sent before it ended: one interval after that.
                free_at = budget.update(lambda state: state.get(f"{kind}_free_at", 0.0))
                wait = min(1.0 / rate, float(free_at) - time.time())
                if wait > 0:
                    time.sleep(wait)
            try:
                yield client
            finally:
                if turn is not None and rate is not None:
                    ended = time.time() + 1.0 / rate

                    def change(state: dict[str, Any]) -> None:
                        state[f"{kind}_free_at"] = ended

                    budget.update(change)
    finally:
        if turn is not None:
            turn.release()


# --- time slices -------------------------------------------------------------------------------
def _slices(lo: int, hi: int, partition: PartitionLike) -> list[Any]:
    """Boundaries ``[lo, b1, ..., hi]`` (epoch ms) of the slices of ``[lo, hi)``: fixed
    lengths (``"1D"``, ``"6h"``, a ``timedelta``) are aligned on multiples of the length since
    the epoch (``"1D"``: UTC midnights), calendar offsets (``"MS"``, ``"W"``) on their anchors
    at UTC midnight."""
    import pandas as pd  # optional: pandas

    offset: Any = None
    if isinstance(partition, (_dt.timedelta, pd.Timedelta)):
        step = pd.Timedelta(partition)
    else:
        try:
            offset = pd.tseries.frequencies.to_offset(partition)
        except (TypeError, ValueError):
            raise ValueError(
                "`partition` must be a pandas frequency such as '1D', '6h' or 'MS', or a "
                f"timedelta, got {partition!r}"
            ) from None
        try:
            step = pd.Timedelta(offset)
        except (TypeError, ValueError):
            step = None
    if step is not None:
        step_ms = int(step / pd.Timedelta(milliseconds=1))
        if step_ms <= 0 or step != pd.Timedelta(milliseconds=step_ms):
            raise ValueError(
                f"`partition` must be a whole number of milliseconds above zero, got {partition!r}"
            )
        first = -(-lo // step_ms) * step_ms
        if first == lo:
            first += step_ms
        if (hi - first) // step_ms + 2 > MAX_PARTITIONS:
            raise ValueError(
                f"`partition` {partition!r} cuts the range into more than {MAX_PARTITIONS:,} "
                "slices: choose a longer one"
            )
        inner = list(range(first, hi, step_ms))
    else:
        lo_ts = pd.Timestamp(lo, unit="ms", tz="UTC")
        hi_ts = pd.Timestamp(hi, unit="ms", tz="UTC")
        anchors = pd.date_range(lo_ts.normalize(), hi_ts, freq=offset)
        if len(anchors) > MAX_PARTITIONS:
            raise ValueError(
                f"`partition` {partition!r} cuts the range into more than {MAX_PARTITIONS:,} "
                "slices: choose a longer one"
            )
        ms = (anchors - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)
        inner = [int(t) for t in ms if lo < t < hi]
    return [lo, *inner, hi]


# --- what a run spends ----------------------------------------------------------------------------
class _Run:
    """One frame made by :func:`events`, to which its tasks add what they send: on this
    object in this process (the local schedulers), or in the scheduler's state (a cluster).
    Only its id travels to the workers; the client stays here, for the cost's quota."""

    def __init__(self, client: Any) -> None:
        self.id = uuid.uuid4().hex
        self._client: Any = client
        self._spent = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"id": self.id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.id, self._client, self._spent = state["id"], None, 0

    def __dask_tokenize__(self) -> Any:
        return ("surveillance.run", self.id)

    def __repr__(self) -> str:
        return f"<events run {self.id[:12]}>"

    def add(self, requests: int) -> None:
        """Adds what one task of the run sent."""
        dask_client = _cluster()
        if dask_client is None:
            with _CLIENTS_LOCK:
                self._spent += requests
            return

        def change(state: dict[str, Any]) -> None:
            state["spent"] = int(state.get("spent", 0)) + requests

        _Budget(dask_client, self.id, "cost").update(change)

    def spent(self) -> int:
        """What the run's tasks have sent: here, and on the cluster of this process's
        ``distributed`` client if it has one."""
        with _CLIENTS_LOCK:
            total = self._spent
        dask_client = _cluster() or _default_client()
        if dask_client is not None:
            on_cluster = _Budget(dask_client, self.id, "cost").update(
                lambda state: int(state.get("spent", 0))
            )
            total += int(on_cluster)
        return total


#: The runs of the frames :func:`events` made, by the frame's name.
_RUNS: weakref.WeakValueDictionary[str, _Run] = weakref.WeakValueDictionary()


def _default_client() -> Any:
    """This process's default ``distributed`` client, or None (``distributed`` is not even
    imported when nothing here has used it)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client  # optional: distributed

    try:
        return default_client()  # type: ignore[no-untyped-call, unused-ignore]
    except ValueError:
        return None


def _run_of(frame: Any) -> _Run:
    """The run of a frame that :func:`events` made, or of one computed from it."""
    names = [getattr(frame, "_name", None)]
    expr = getattr(frame, "expr", None)
    if expr is not None:
        names += [e._name for e in expr.walk()]
    for name in names:
        run = _RUNS.get(name) if isinstance(name, str) else None
        if run is not None:
            return run
    raise ValueError(
        "`frame` was not made by surveillance.dask.events (nor computed from a frame it "
        f"made), got {type(frame).__name__}"
    )


def cost(frame: Any) -> Cost:
    """What computing a frame made by :func:`events` has spent: the requests its partitions
    sent, summed over every task wherever it ran (threads of this process or workers of a
    ``dask.distributed`` cluster, each with its own client), token requests and retries
    included, over every compute of it so far (a frame computed twice reads twice, unless the
    cache of settled events serves the second). ``quota`` is where the key's daily quota
    stands by this machine's ledger.

    Args:
        frame: the frame :func:`events` returned, or one computed from it (``ddf.loc[...]``,
            ``ddf.reset_index()``): the cost is that of the reads of the frame
            :func:`events` made.

    Returns:
        :class:`~surveillance.Cost`, as :attr:`Client.last_cost
        <surveillance.Client.last_cost>` tells a single call's.

    Raises:
        ValueError: ``frame`` was not made by :func:`events`.

    Example:
        >>> import surveillance as sv, surveillance.dask as svd
        >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
        ...     ddf = svd.events(emu.client(), emu.start, emu.end)
        ...     before = svd.cost(ddf).requests
        ...     _ = ddf.compute()
        ...     spent = svd.cost(ddf).requests
        ...     sent = sum(sum(n.values()) for n in emu.stats()["requests"].values())
        >>> before, spent == sent
        (0, True)
    """
    run = _run_of(frame)
    client = run._client
    return Cost(run.spent(), None if client is None else client.quota())


# --- events --------------------------------------------------------------------------------------
def _events_schema() -> Any:
    """The Arrow schema of ``client.events(..., output="arrow")``, from the core's one
    definition."""
    import pyarrow as pa  # optional: pyarrow

    return pa.schema(_core.events_schema())


def _indexed(frame: Any) -> Any:
    return frame.set_index("startTime")


def events_meta() -> pandas.DataFrame:
    """The empty pandas DataFrame that :func:`events` partitions look like: the typing of
    ``client.events(..., output="pandas")``, indexed by ``startTime``; built without any
    request.

    >>> import surveillance.dask as svd
    >>> meta = svd.events_meta()
    >>> str(meta.index.dtype), str(meta["details.duration_sec"].dtype)
    ('datetime64[ms, UTC]', 'int64')
    """

    meta: pandas.DataFrame = _indexed(_output.to_pandas(_events_schema().empty_table()))
    return meta


def _fetch_slice(
    bounds: tuple[Any, ...], ref: _ClientRef, report_id: Optional[str], run: _Run
) -> Any:
    """One partition: the events of ``[lo, hi)`` by the client's windowed algorithm, within
    the key's limits for the whole cluster (the table becomes pandas after the turn); what it
    sent is added to ``run``, whether it ends or raises."""

    lo, hi = bounds
    with _limited(ref, "read") as client:
        meter = client._meter()
        try:
            with meter:
                table = client.events(
                    from_ms(lo), from_ms(hi), report_id, output="arrow", progress=False
                )
        finally:
            run.add(meter.requests)
    return _indexed(_output.convert(table, "pandas"))


def events(
    client: Client,
    start: TimeLike,
    end: TimeLike,
    report_id: Optional[str] = None,
    partition: PartitionLike = "1D",
) -> dask.dataframe.DataFrame:
    """Every event whose ``startTime`` is in ``[start, end)`` as a dask DataFrame, one
    partition per time slice, each fetched on a worker.

    Each partition holds exactly the events of its half-open slice ``[t_i, t_i+1)``, fetched
    by the client's windowed algorithm (dense windows, the offset ceiling, any order or bound
    inclusivity of the service: see :meth:`Client.events <surveillance.Client.events>`), so
    no event is in two partitions and none is lost: computed, the frame equals
    ``client.events(start, end, output="pandas").set_index("startTime")``, row for row.

    Partitions are indexed by ``startTime`` (``datetime64[ms, UTC]``, sorted, not unique:
    events can share a millisecond), and ``divisions`` are the slice boundaries, so
    ``ddf.loc["2026-01-05":"2026-01-06"]`` reads only the partitions it needs;
    ``ddf.reset_index()`` gives back the column. Columns and dtypes are those of
    ``client.events(..., output="pandas")`` (nested columns as ``pd.ArrowDtype``, nullable
    booleans), except that Dask stores text in its own string dtype unless its
    ``dataframe.convert-string`` setting is off. Nothing is requested until the frame is
    computed; ``meta`` comes from the events' Arrow schema, without a request.

    Args:
        client: a :class:`~surveillance.Client`; it is shipped to the workers as its
            configuration, and each worker process reuses one client (and one token) for it.
        start: aware or naive (UTC) ``datetime``, ``date``, pandas ``Timestamp`` or
            ISO-8601 string.
        end: as ``start``, exclusive; must be after it.
        report_id: only the events of this report.
        partition: the slice length: a pandas frequency (``"1D"``, ``"6h"``; boundaries on
            multiples of it since the epoch, so ``"1D"`` cuts at UTC midnights) or a calendar
            one (``"W"``, ``"MS"``: its anchors at UTC midnight), or a ``timedelta``. The first
            and last slices are cut at ``start`` and ``end``.

    Returns:
        A ``dask.dataframe.DataFrame`` (built with ``dask.dataframe.from_map``); what
        computing it spends, summed over its tasks: :func:`cost`.

    Raises:
        ValueError: ``end`` is not after ``start``, or ``partition`` is not a positive
            length.
        TypeError: ``client`` is not a :class:`~surveillance.Client`.

    Example:
        >>> import surveillance as sv, surveillance.dask as svd
        >>> with sv.Emulator(sites=3, days=2, events_per_day=500) as emu:
        ...     client = emu.client()
        ...     ddf = svd.events(client, emu.start, emu.end, partition="6h")
        ...     frame = ddf.compute()
        ...     direct = client.events(emu.start, emu.end, output="pandas")
        >>> ddf.npartitions, str(ddf.divisions[1])
        (8, '2026-01-05 06:00:00+00:00')
        >>> frame["id"].tolist() == direct["id"].tolist()
        True
    """
    import dask.dataframe as dd  # optional: dask
    import pandas as pd  # optional: pandas

    lo, hi = to_ms(start, "start"), to_ms(end, "end")
    if hi <= lo:
        raise ValueError(f"`end` must be after `start`, got [{start}, {end})")
    ref = _ClientRef(client)
    run = _Run(client)
    bounds = _slices(lo, hi, partition)
    pairs = list(zip(bounds[:-1], bounds[1:]))
    meta = events_meta()
    unit = getattr(meta.index.dtype, "unit", "ns")  # "ms" (pandas 2+; 1.5 has only "ns")
    stamps = [pd.Timestamp(b, unit="ms", tz="UTC") for b in bounds]
    divisions = tuple(t.as_unit(unit) if hasattr(t, "as_unit") else t for t in stamps)  # type: ignore[arg-type, unused-ignore]
    frame: dask.dataframe.DataFrame = dd.from_map(  # type: ignore[no-untyped-call, unused-ignore]
        _fetch_slice,
        pairs,
        args=(ref, report_id, run),
        meta=meta,
        divisions=divisions,
        label="surveillance-events",
        enforce_metadata=True,
    )
    _RUNS[frame._name] = run
    return frame


# --- publishing ------------------------------------------------------------------------------
def _publish_part(part: Any, ref: _ClientRef, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Publishes one partition; returns ``(report, size, error, requests)``: an error that
    stopped the publish (e.g. refused credentials) comes back with its report rather than
    losing the other partitions' reports, and ``requests`` is what the task sent either way."""
    records = part
    if not isinstance(part, (list, tuple)) and not hasattr(part, "iloc"):
        records = list(part)  # a bag partition may be any iterable: its size is needed
    size = len(records)
    with _limited(ref, "publish") as client:
        meter = client._meter()
        try:
            with meter:
                report = client.publish(records, **kwargs)
        except Exception as exc:
            report = getattr(exc, "report", None)
            if report is None:
                raise
            return report, size, exc, meter.requests
    return report, size, None, meter.requests


def publish(
    client: Client,
    data: Union[dask.bag.Bag, dask.dataframe.DataFrame],
    **publish_kwargs: Any,
) -> PublishReport:
    """Publishes the records of a dask Bag (of dicts) or DataFrame (one record per row),
    partitions in parallel on the workers, and returns one combined
    :class:`~surveillance.PublishReport`.

    Each partition is published by :meth:`Client.publish <surveillance.Client.publish>` on a
    worker, with the worker process's client for ``client``'s configuration (one token per
    process). The combined report accounts for every record: counts are added up, the
    failures' ``index`` is the record's position in the whole collection (partition after
    partition), ``elapsed`` is the wall time of the whole publish, and
    ``write_failures(path)`` writes every record not accepted.

    Args:
        client: a :class:`~surveillance.Client`.
        data: a ``dask.bag.Bag`` of dicts or a ``dask.dataframe.DataFrame`` (missing values
            left out of a row's record, as for a pandas DataFrame).
        **publish_kwargs: passed to :meth:`Client.publish <surveillance.Client.publish>`
            (``region``, ``batch_size``, ``validate``); ``progress`` defaults to False (use
            Dask's own progress bars).

    Returns:
        :class:`~surveillance.PublishReport`; ``client.last_cost`` is then what the whole
        publish sent, summed over its tasks (token requests included).

    Raises:
        AuthError: the service refused the credentials (``.report`` is the combined report).
        TypeError: ``data`` is not a dask Bag or DataFrame.

    Example:
        >>> import dask.bag as db, surveillance as sv, surveillance.dask as svd
        >>> rows = [{"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000,
        ...          "locationId": "store-1", "dataSourceId": "door-1",
        ...          "eventUniqueId": f"e-{i}", "eventType": "door open"} for i in range(20)]
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     report = svd.publish(emu.client(), db.from_sequence(rows, npartitions=4))
        ...     print(report.accepted, len(report.rejected), len(emu.published()))
        20 0 20
    """
    import dask  # optional: dask

    if not (hasattr(data, "to_delayed") and hasattr(data, "npartitions")):
        raise TypeError(
            f"`data` must be a dask Bag or DataFrame, got {type(data).__name__}: for a list, "
            "a pandas DataFrame or a file, use client.publish"
        )
    ref = _ClientRef(client)
    kwargs = dict(publish_kwargs)
    kwargs.setdefault("progress", False)
    task = dask.delayed(_publish_part, pure=False)  # type: ignore[attr-defined, unused-ignore]
    delayed = data.to_delayed()  # type: ignore[no-untyped-call, unused-ignore]
    parts = [task(part, ref, kwargs) for part in delayed]
    t0 = time.perf_counter()
    results = dask.compute(*parts)  # type: ignore[attr-defined, no-untyped-call, unused-ignore]
    elapsed = time.perf_counter() - t0
    report = PublishReport.combine(
        [r for r, _, _, _ in results], sizes=[n for _, n, _, _ in results], elapsed=elapsed
    )
    client._settle_cost(sum(sent for _, _, _, sent in results))
    errors = [e for _, _, e, _ in results if e is not None]
    if errors:
        error = errors[0]
        try:
            error.report = report
        except AttributeError:
            pass
        raise error
    return report
