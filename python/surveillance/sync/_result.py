"""What one run of :func:`~surveillance.sync.sync_events` did: :class:`SyncResult`, and
:class:`SyncInterrupted` when Ctrl-C stopped it."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, fields
from typing import List, Optional, Tuple

from .._core import html_table
from ..errors import QuotaExhaustedError
from ._state import _iso


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
    ...                datetime.datetime(2026, 1, 6, tzinfo=datetime.timezone.utc), 0.01)
    >>> print(r)
    nothing to fetch; synced until 2026-01-06T00:00:00.000Z
    """

    path: str
    ranges: List[Tuple[datetime.datetime, datetime.datetime]]
    windows: int
    requests: int
    added: int
    replaced: int
    partitions: List[str] = field(default_factory=list)
    synced_until: Optional[datetime.datetime] = None
    elapsed: float = 0.0
    complete: bool = True
    remaining: Optional[Tuple[datetime.datetime, datetime.datetime]] = None
    resets_at: Optional[datetime.datetime] = None
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

    def raise_if_incomplete(self) -> SyncResult:
        """Raises when the run stopped before the end of its range; returns the result
        otherwise, so that it chains: ``client.sync_events(...).raise_if_incomplete()``.

        A sync that the day's request quota stops returns ``complete=False`` without raising,
        having stored everything it fetched; a scheduler that runs it as a task would then mark
        the task done with part of the range missing. This turns that stop into an exception
        that the scheduler can retry or defer on (``resets_at`` says when).

        Returns:
            SyncResult: this result, when ``complete``.

        Raises:
            QuotaExhaustedError: the run was not complete; ``.resets_at`` is when the quota
                comes back, ``.result`` this result, and the message says what remains.

        Example:
            >>> import surveillance as sv, tempfile
            >>> with sv.Emulator(sites=2, days=1, events_per_day=50) as emu:
            ...     client = emu.client()
            ...     with tempfile.TemporaryDirectory() as path:
            ...         result = client.sync_events(path, emu.start, until=emu.end,
            ...                                     progress=False).raise_if_incomplete()
            >>> result.complete
            True
        """
        if self.complete:
            return self
        error = QuotaExhaustedError(
            f"{self.path}: the sync is incomplete: {self}", resets_at=self.resets_at
        )
        error.result = self  # type: ignore[attr-defined]
        raise error

    def _repr_html_(self) -> str:
        """Its figures as a table, for Jupyter."""
        return html_table("SyncResult", [(f.name, getattr(self, f.name)) for f in fields(self)])


def _count(n: int, word: str) -> str:
    """``1 window``, ``2 windows``, ``14,799 events``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


class SyncInterrupted(KeyboardInterrupt):
    """Ctrl-C (``KeyboardInterrupt``) stopped :func:`sync_events`: what it had fetched is
    stored, and the next run goes on from there. ``result``: the :class:`SyncResult` of the
    run (``interrupted`` true, ``remaining`` what is left); the message says what was kept.

    The windows received whole are in the dataset and the state records the end of the last
    one; the pages read past it (those of the requests in flight at the signal included) are
    kept beside the dataset (``_sync_carried.bin``), and the next run takes them instead of
    asking them again. ``carried``: the end of the range they were read of, or None.
    """

    def __init__(self, result: SyncResult, carried: Optional[datetime.datetime] = None) -> None:
        kept = (
            f"; the pages read of {_iso(result.remaining[0])} .. {_iso(carried)} are kept for it"
            if carried is not None and result.remaining is not None
            else ""
        )
        super().__init__(f"{result.path}: {result}{kept}")
        self.result = result
