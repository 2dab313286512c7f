"""Conversion of the time arguments users pass (datetime, date, pandas Timestamp, ISO string),
and the command line's relative times (``now``, ``today``, ``yesterday``, ``-7d``).

The conversions to and from epoch milliseconds are the native module's, one for the binding
and the package: :func:`to_datetime` (any time as an aware UTC datetime; naive values are
taken as UTC), :func:`to_ms` (as Unix epoch milliseconds, sub-millisecond parts truncated)
and :func:`from_ms` (epoch milliseconds as an aware UTC datetime).

>>> to_datetime("2026-01-05T10:00:00+01:00").isoformat()
'2026-01-05T09:00:00+00:00'
>>> to_datetime(_dt.date(2026, 1, 5)).isoformat()
'2026-01-05T00:00:00+00:00'
>>> to_ms("1970-01-01T00:00:01.5Z"), from_ms(0).isoformat()
(1500, '1970-01-01T00:00:00+00:00')
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Optional

from . import _core
from ._check import text
from ._core import from_ms as from_ms
from .errors import arg, worded
from .types import TimeLike


def to_datetime(value: TimeLike, name: str = "time") -> _dt.datetime:
    """``value`` as an aware UTC datetime (the native conversion); an error names ``name``."""
    try:
        return _core.to_datetime(value, name)
    except (ValueError, TypeError) as e:
        raise _named(e, name) from None


def to_ms(value: TimeLike, name: str = "time") -> int:
    """``value`` as Unix epoch milliseconds (the native conversion); an error names ``name``."""
    try:
        return _core.to_ms(value, name)
    except (ValueError, TypeError) as e:
        raise _named(e, name) from None


def _named(e: Exception, name: str) -> Exception:
    """The native conversion's error, which begins with the argument's name, with that name
    kept apart in its ``wording`` (the command line says its option instead)."""
    said, head = str(e), f"`{name}`"
    if not said.startswith(head):
        return e
    return worded(type(e), arg(name), said[len(head) :])


def time_range(start: TimeLike, end: TimeLike, report_id: object) -> tuple[Any, ...]:
    """``(start_ms, end_ms, report_id)`` of the arguments of an events call, checked."""

    lo, hi = to_ms(start, "start"), to_ms(end, "end")
    return lo, hi, text("report_id", report_id, optional=True, longest=100)


#: A relative time of the command line: ``-`` and one or more ``<number><unit>`` parts.
RELATIVE = re.compile(r"-(?:\d+(?:\.\d+)?(?:w|d|h|m|s))+", re.I)
_PART = re.compile(r"(\d+(?:\.\d+)?)(w|d|h|m|s)", re.I)
_UNIT_S = {"w": 7 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}


def relative(text: str, now: Optional[_dt.datetime] = None) -> Optional[_dt.datetime]:
    """The instant a relative time of the command line names, in UTC, or None when ``text``
    is none (an ISO-8601 time, say): ``now``; ``today`` and ``yesterday`` (their midnight,
    UTC); ``-7d``, ``-2h``, ``-30m``, ``-1h30m`` (that long before now; units ``w``, ``d``,
    ``h``, ``m``, ``s``). A time before the year 1 is a ``ValueError``.

    >>> now = _dt.datetime(2026, 1, 7, 15, 30, tzinfo=_dt.timezone.utc)
    >>> [relative(t, now).isoformat() for t in ("now", "today", "yesterday", "-7d", "-1h30m")]
    ['2026-01-07T15:30:00+00:00', '2026-01-07T00:00:00+00:00', '2026-01-06T00:00:00+00:00', \
'2025-12-31T15:30:00+00:00', '2026-01-07T14:00:00+00:00']
    >>> relative("2026-01-05") is None
    True
    """
    word = text.strip().lower()
    now = now or _dt.datetime.now(_dt.timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "now":
        return now
    if word == "today":
        return midnight
    if word == "yesterday":
        return midnight - _dt.timedelta(days=1)
    if RELATIVE.fullmatch(word):
        seconds = sum(float(n) * _UNIT_S[u] for n, u in _PART.findall(word))
        try:
            return now - _dt.timedelta(seconds=seconds)
        except OverflowError:  # past a datetime's range (before the year 1)
            shown = word if len(word) <= 20 else word[:17] + "..."
            raise ValueError(
                f"the time `{shown}` is before the year 1: give a time within the calendar"
            ) from None
    return None
