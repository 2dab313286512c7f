"""Conversion of the time arguments users pass (datetime, date, pandas Timestamp, ISO string)."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Union

TimeLike = Union[_dt.datetime, _dt.date, str]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_datetime(value: TimeLike, name: str = "time") -> _dt.datetime:
    """Returns `value` as an aware UTC datetime; naive values are taken as UTC.

    >>> to_datetime("2026-01-05T10:00:00+01:00").isoformat()
    '2026-01-05T09:00:00+00:00'
    >>> to_datetime(_dt.date(2026, 1, 5)).isoformat()
    '2026-01-05T00:00:00+00:00'
    """
    if _missing(value):
        raise ValueError(f"`{name}` is a missing time ({value!r}): give a time")
    if isinstance(value, _dt.datetime):  # pandas.Timestamp is a datetime subclass
        dt = value
    elif isinstance(value, _dt.date):
        dt = _dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = _dt.datetime.fromisoformat(text)
        except ValueError:
            from ._check import shown

            raise ValueError(
                f"`{name}` must be an ISO-8601 timestamp such as `2026-01-05T09:00:00Z`, "
                f"got {shown(value)}"
            ) from None
    else:
        raise TypeError(
            f"`{name}` must be a datetime, date, pandas Timestamp or ISO-8601 string, "
            f"got {type(value).__name__}"
        )
    if dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    try:
        return dt.astimezone(_dt.timezone.utc)
    except (OverflowError, ValueError) as e:  # the year 1 or 9999 pushed past by an offset
        raise ValueError(f"`{name}` is out of the range of dates ({value!r}): {e}") from None


def _missing(value: object) -> bool:
    """pandas' NaT (a datetime that is not one) and NA."""
    return type(value).__name__ in ("NaTType", "NAType")


def time_range(start: TimeLike, end: TimeLike, report_id: object) -> tuple[Any, ...]:
    """``(start_ms, end_ms, report_id)`` of the arguments of an events call, checked."""
    from ._check import text

    lo, hi = to_ms(start, "start"), to_ms(end, "end")
    return lo, hi, text("report_id", report_id, optional=True, longest=100)


def to_ms(value: TimeLike, name: str = "time") -> int:
    """Returns `value` as Unix epoch milliseconds (sub-millisecond parts are truncated).

    >>> to_ms("1970-01-01T00:00:01.5Z")
    1500
    """
    delta = to_datetime(value, name) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> _dt.datetime:
    """Returns epoch milliseconds as an aware UTC datetime.

    >>> from_ms(0).isoformat()
    '1970-01-01T00:00:00+00:00'
    """
    return _EPOCH + _dt.timedelta(milliseconds=ms)
