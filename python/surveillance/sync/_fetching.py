"""Fetching a run's ranges from the service: the events of a range as Arrow tables, one per
window, in chunks that fit what remains of the day's quota, and the progress of the whole run
as one bar."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple

from .. import _core
from ..errors import SurveillanceError

#: What the sync needs of a client (a :class:`~surveillance.Client`: named only in words, so
#: that the sync, which the client's ``sync_events`` calls, does not import it back).
Client = Any

_DAY_MS = _core.DAY_MS
#: The shortest chunk of a range fetched under a daily budget (see `_fetch`).
_MIN_CHUNK_MS = 60_000
_HOUR_MS = 3_600_000


@dataclass
class _Progress:
    """How far a run's fetch has got: windows stored, and the end of the last one; ``bar``:
    the progress display of the whole run, if any; ``stream``: the fetch in progress (the
    caller stops it with :func:`_wind_down` when the run stops before its end), of the chunk
    that ends at ``chunk_end``; ``carried``: where the last run stopped, when it carried
    pages to this one, and the end of the chunk it stopped in (a chunk from there ends there
    too, so that its windows are planned again as they were, and take those pages);
    ``handed``: the window the fetch handed out last (a record batch, and its end) until
    the caller has stored it (:meth:`taken`): Ctrl-C while it is being stored leaves it to
    :func:`_wind_down` (the stream counts it as handed out, and carries none of its pages)."""

    windows: int = 0
    frontier: int = 0
    bar: Optional[_Whole] = None
    stream: Any = None
    chunk_end: int = 0
    carried: Optional[Tuple[int, int]] = None
    handed: Optional[Tuple[Any, int]] = None

    def taken(self) -> None:
        """The window handed out last is stored: the frontier moves to its end."""
        if self.handed is not None:
            self.frontier = self.handed[1]
            self.windows += 1
            self.handed = None


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
    """The events of ``[lo, hi)`` as Arrow tables, one per window, in time order; once the
    caller has stored one (:meth:`_Progress.taken`), ``progress.frontier`` is the end of that
    window (every event before it has been stored).

    Without a daily budget, the range is one fetch (memory stays bounded: a window at a
    time). Under one, it is fetched in chunks that fit what remains of the day's quota, sized
    by the density seen so far, so that the day's last requests complete a chunk rather than
    start a window of 10,000 events (100 requests) that cannot finish. When the quota runs
    out anyway, :class:`~surveillance.QuotaExhaustedError` propagates after the windows
    completed before it. When the fetch raises (the quota, Ctrl-C), ``progress.stream`` is
    still open, for the caller's :func:`_wind_down`.
    """
    progress.frontier = lo
    t = lo
    events = 0
    while t < hi:
        carried = progress.carried[1] if progress.carried and progress.carried[0] == t else None
        u = _chunk_end(client, lo, t, hi, events, carried)
        bar = None if progress.bar is None else progress.bar.fetch(t, u)
        asked = _core.EventQuery(t, u, report_id, partial=True)
        stream = client._inner.events_stream(asked, bar, 2, True, carry=True)
        progress.stream, progress.chunk_end = stream, u
        for batch in stream:
            # Held at once: from here to its end in the caller's store, the window is in
            # no other place (the stream handed it out whole, and carries none of it).
            progress.handed = (batch, stream.frontier_ms)
            table = pa.Table.from_batches([pa.record_batch(batch)])
            events += table.num_rows
            yield table
            progress.taken()
        progress.stream = None
        stream.close()
        progress.frontier = t = u


def _wind_down(
    progress: _Progress, pa: Any, consume: Callable[[Any], None]
) -> Optional[Tuple[bytes, int]]:
    """Stops the fetch in progress, if any, when the run stops before its end (Ctrl-C, the
    quota): it asks nothing more and takes the answers of the requests in flight; the window
    handed out that the caller had not stored yet (Ctrl-C while it was being stored), then
    the windows the fetch completed before, are handed to ``consume``; then what it carries
    for the next run: the pages it read of the windows it did not hand out whole (a blob for
    ``Client.hold_carried``), and the end of its chunk. None when it carries nothing."""
    stream, progress.stream = progress.stream, None
    try:
        if stream is not None:
            stream.stop()  # first: nothing more is asked while the window handed out is stored
        if progress.handed is not None:
            consume(pa.Table.from_batches([pa.record_batch(progress.handed[0])]))
            progress.taken()
        if stream is None:
            return None
        try:
            for batch in stream:
                consume(pa.Table.from_batches([pa.record_batch(batch)]))
                progress.windows += 1
                progress.frontier = stream.frontier_ms
        except SurveillanceError:
            pass  # what stopped the fetch (the quota), said again: its windows are in
        carried = stream.carried()
    finally:
        if stream is not None:
            stream.close()
    return None if carried is None else (carried, progress.chunk_end)


#: Requests of the day's remaining quota a chunk leaves aside (a token renewal, the probes).
_QUOTA_MARGIN = 3


def _chunk_end(
    client: Client, lo: int, t: int, hi: int, events: int, carried: Optional[int] = None
) -> int:
    """The end of the next chunk from ``t``: where the last run stopped, the end of the chunk
    it stopped in (``carried``, so that its windows are planned again as they were and take
    the pages it carried); otherwise ``hi`` without a daily budget, and under one as far as
    the events seen so far (``events`` in ``[lo, t)``) say the remaining quota reaches."""
    if carried is not None and t < carried <= hi:
        return int(carried)
    remaining = client.quota()["remaining"]
    if remaining is None:
        return hi
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
