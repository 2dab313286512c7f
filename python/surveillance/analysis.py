"""pandas helpers for dwell-time analysis: the steps every notebook would otherwise repeat.

They take the DataFrames the client returns (``output="pandas"``, or ``pandas.json_normalize``
of the dicts) and return new DataFrames; the inputs are never modified.

- :func:`location_tags` expands ``Brand:X``/``City:Y`` location tags into columns.
- :func:`with_local_time` adds each event's site-local wall-clock time, from its site's time
  zone.
- :func:`dwell_summary` gives the count, median and p90 of ``details.duration_sec`` per group,
  and the busiest local hour.

The same statistics without pandas, over plain lists (``surveillance demo`` uses them, and
needs no pandas): :func:`quantile`, :func:`local_hours`, :func:`bursts`, :func:`site_rows` and
:func:`brand_of`.

A typical session::

    events = client.events(start, end, output="pandas")
    sites = client.sites(output="pandas")
    df = location_tags(with_local_time(events, sites))
    dwell_summary(df, by="brand")

pandas is needed (``pip install 'surveillance[pandas]'``); importing this module is not enough
to need it.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Sequence, Union
from zoneinfo import ZoneInfo

from ._check import shown, text

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "location_tags",
    "with_local_time",
    "dwell_summary",
    "quantile",
    "local_hours",
    "bursts",
    "site_rows",
    "brand_of",
]

#: The column of the dwell time in seconds, as the client's typed tables and
#: ``pandas.json_normalize`` name it.
DURATION = "details.duration_sec"


def _pandas() -> Any:
    try:
        import pandas  # optional: pandas
    except ImportError:
        raise ImportError(
            "surveillance.analysis needs pandas: pip install 'surveillance[pandas]'"
        ) from None
    return pandas


def _frame(name: str, df: Any) -> None:
    """Refuses what is not a pandas DataFrame, naming the argument."""
    pd = _pandas()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`{name}` must be a pandas DataFrame, got {type(df).__name__}")


def _column(arg: str, column: Any, frame: str, df: Any) -> None:
    """Refuses a column name that ``df`` (the argument ``frame``) does not have."""

    if not isinstance(column, str):
        raise TypeError(f"`{arg}` must be a column name (a string), got {type(column).__name__}")
    if column not in df.columns:
        raise ValueError(
            f"`{arg}` names no column of `{frame}`: {shown(column)}; it has "
            f"{', '.join(map(repr, list(df.columns)[:8]))}"
            + (", ..." if len(df.columns) > 8 else "")
        )


def _tags(value: Any) -> dict[str, Any]:
    """``["Brand:Acme", "City:Lyon"]`` as ``{"brand": "Acme", "city": "Lyon"}`` (first wins)."""
    out: dict[str, Any] = {}
    if value is None or isinstance(value, (str, bytes, float)):  # missing (NaN) or not a list
        return out
    for tag in value:
        if isinstance(tag, str) and ":" in tag:
            key, _, text = tag.partition(":")
            out.setdefault(key.strip().lower(), text.strip())
    return out


def brand_of(location_tags: Any) -> str:
    """The brand a site's ``locationTags`` name (``Brand:Acme``), as :func:`location_tags`
    reads it; ``"(no brand)"`` without one.

    >>> brand_of(["City:Lyon", "Brand:Acme"]), brand_of(None)
    ('Acme', '(no brand)')

    Raises nothing: a value that is not a list of tags has no brand.
    """
    return _tags(location_tags).get("brand") or "(no brand)"


def location_tags(df: pd.DataFrame, column: str = "locationTags") -> pd.DataFrame:
    """Expands ``Key:Value`` location tags into one column per key, named in lower case.

    Sites and events both carry ``locationTags`` such as ``["Brand:Acme", "City:Lyon"]``;
    this adds ``brand`` and ``city`` columns (``None`` where a row has no such tag; the first
    one wins where a row has two). Tags without a colon are ignored. Existing columns of
    the same name are replaced.

    Args:
        df: a DataFrame with a column of lists of tags (lists, arrays or ``None``).
        column: the name of that column.

    Returns:
        A copy of ``df`` with a column per tag key, in order of first appearance.

    >>> import pandas as pd
    >>> from surveillance.analysis import location_tags
    >>> sites = pd.DataFrame({
    ...     "name": ["Acme Lyon", "Acme Oslo", "Bolt Oslo"],
    ...     "locationTags": [["Brand:Acme", "City:Lyon"], ["Brand:Acme", "City:Oslo"],
    ...                      ["City:Oslo", "Brand:Bolt"]],
    ... })
    >>> location_tags(sites)[["name", "brand", "city"]]
            name brand  city
    0  Acme Lyon  Acme  Lyon
    1  Acme Oslo  Acme  Oslo
    2  Bolt Oslo  Bolt  Oslo

    Raises:
        ImportError: pandas is not installed (``pip install 'surveillance[pandas]'``).
        TypeError: an input is not a pandas DataFrame, or a column name is not a string.
        ValueError: the frame has no ``locationTags`` column.
    """
    pd = _pandas()
    _frame("df", df)
    _column("column", column, "df", df)
    parsed = [_tags(v) for v in df[column]]
    keys: list[Any] = []
    for row in parsed:
        keys.extend(k for k in row if k not in keys)
    out = df.copy()
    for key in keys:
        out[key] = pd.Series([row.get(key) for row in parsed], index=df.index, dtype=object)
    return out


def with_local_time(
    events_df: pd.DataFrame,
    sites_df: pd.DataFrame,
    *,
    column: str = "startTime",
    name: str = "localStartTime",
) -> pd.DataFrame:
    """Adds each event's site-local wall-clock time, from its site's IANA time zone.

    A DataFrame column holds one time zone, and sites have many: the local time is therefore
    a naive timestamp (the wall clock at the site), with the zone beside it in ``timezone``.
    ``df[name].dt.hour`` is then the local hour of day, comparable across sites.

    Args:
        events_df: events with ``siteId`` and ``column``: UTC timestamps
            (``output="pandas"``) or the service's ISO-8601 strings (dicts).
        sites_df: sites with ``id`` and ``timezone`` (``client.sites(output="pandas")``).
        column: the event time to convert.
        name: the name of the new column.

    Returns:
        A copy of ``events_df`` with ``timezone`` and ``name`` added; both are missing
        (``None``/``NaT``) for an event whose site is not in ``sites_df``.

    >>> import pandas as pd
    >>> from surveillance.analysis import with_local_time
    >>> events = pd.DataFrame({
    ...     "siteId": ["lyon", "phoenix"],
    ...     "startTime": pd.to_datetime(["2026-01-05T12:00:00Z", "2026-01-05T12:00:00Z"]),
    ... })
    >>> sites = pd.DataFrame({"id": ["lyon", "phoenix"],
    ...                       "timezone": ["Europe/Paris", "America/Phoenix"]})
    >>> with_local_time(events, sites)[["siteId", "timezone", "localStartTime"]]
        siteId         timezone      localStartTime
    0     lyon     Europe/Paris 2026-01-05 13:00:00
    1  phoenix  America/Phoenix 2026-01-05 05:00:00

    Raises:
        ImportError: pandas is not installed (``pip install 'surveillance[pandas]'``).
        TypeError: an input is not a pandas DataFrame, or a column name is not a string.
        ValueError: a frame lacks a column it needs (``siteId``, ``startTime``; the sites' ``id``
            and ``timezone``).
    """
    pd = _pandas()

    _frame("events_df", events_df)
    _frame("sites_df", sites_df)
    _column("column", column, "events_df", events_df)
    text("name", name, longest=200)
    for frame, needed, label in (
        (events_df, ("siteId",), "events_df"),
        (sites_df, ("id", "timezone"), "sites_df"),
    ):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise ValueError(f"`{label}` has no column {missing[0]!r}")
    zones = dict(zip(sites_df["id"], sites_df["timezone"]))
    tz = pd.Series([zones.get(s) for s in events_df["siteId"]], index=events_df.index, dtype=object)
    utc = pd.to_datetime(events_df[column], utc=True)
    local = utc.dt.tz_localize(None).where(tz.notna())
    for zone in sorted(z for z in set(tz) if isinstance(z, str)):
        mask = tz == zone
        local[mask] = utc[mask].dt.tz_convert(zone).dt.tz_localize(None)
    out = events_df.copy()
    out["timezone"] = tz
    out[name] = local
    return out


def dwell_summary(
    events_df: pd.DataFrame,
    by: Union[str, Sequence[str]] = "siteId",
    *,
    duration: str = DURATION,
    local_time: str = "localStartTime",
) -> pd.DataFrame:
    """Dwell time per group: how many events, the median and p90 of their duration, and
    (when :func:`with_local_time` has added it) the busiest local hour.

    Args:
        events_df: events with a ``duration`` column (seconds).
        by: the column(s) to group by: ``"siteId"``, ``"brand"`` or ``"city"`` (after
            :func:`location_tags`), ``["brand", "city"]`` ...
        duration: the dwell-time column (``details.duration_sec`` in the client's tables
            and in ``pandas.json_normalize`` of the dicts).
        local_time: the local-time column for ``busiest_local_hour`` (left out when absent).

    Returns:
        One row per group, indexed by ``by``, busiest groups first: ``events``,
        ``median_sec``, ``p90_sec`` (linear interpolation, as ``Series.quantile``) and
        ``busiest_local_hour`` (the hour of day with the most events; the earliest on a tie).

    >>> import pandas as pd
    >>> from surveillance.analysis import dwell_summary
    >>> events = pd.DataFrame({
    ...     "brand": ["Acme", "Acme", "Acme", "Bolt"],
    ...     "details.duration_sec": [60, 120, 300, 45],
    ...     "localStartTime": pd.to_datetime(["2026-01-05 09:10", "2026-01-05 12:30",
    ...                                       "2026-01-06 12:05", "2026-01-05 18:00"]),
    ... })
    >>> dwell_summary(events, by="brand")  # doctest: +NORMALIZE_WHITESPACE
           events  median_sec  p90_sec  busiest_local_hour
    brand
    Acme        3       120.0    264.0                  12
    Bolt        1        45.0     45.0                  18

    Raises:
        ImportError: pandas is not installed (``pip install 'surveillance[pandas]'``).
        TypeError: an input is not a pandas DataFrame, or a column name is not a string.
        ValueError: the frame lacks a column it needs.
    """
    _pandas()
    _frame("events_df", events_df)
    if isinstance(by, str):
        keys = [by]
    elif isinstance(by, (list, tuple)) and by:
        keys = list(by)
    else:
        raise TypeError(f"`by` must be a column name or a list of them, got {type(by).__name__}")
    for key in keys:
        _column("by", key, "events_df", events_df)
    _column("duration", duration, "events_df", events_df)
    if not isinstance(local_time, str):
        raise TypeError(f"`local_time` must be a column name, got {type(local_time).__name__}")
    seconds = events_df[duration].astype("float64")
    groups = seconds.groupby([events_df[k] for k in keys], sort=True)
    out = groups.size().to_frame("events")
    out["median_sec"] = groups.median()
    out["p90_sec"] = groups.quantile(0.9)
    if local_time in events_df.columns:
        hours = events_df[local_time].dt.hour
        out["busiest_local_hour"] = hours.groupby([events_df[k] for k in keys]).agg(
            lambda s: int(s.value_counts().sort_index().idxmax())
        )
    return out.sort_values("events", ascending=False, kind="stable")


# --- the same statistics over plain lists, without pandas -------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` with linear interpolation, as pandas'
    ``Series.quantile`` (and so :func:`dwell_summary`'s ``p90_sec``) computes it.

    >>> quantile([60, 120, 300], 0.9)
    264.0

    Raises:
        ValueError: ``values`` is empty, or ``q`` is outside 0 to 1.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"`q` must be from 0 to 1, got {q!r}")
    if not values:
        raise ValueError("`values` is empty: a quantile needs at least one value")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (pos - low))


def local_hours(
    start_ms: Sequence[int], site_ids: Sequence[str], zones: dict[str, Any]
) -> tuple[list[int], bool]:
    """The local hour of day of each event, from its site's IANA time zone (``zones``: site id
    to zone), as :func:`with_local_time` gives it; and whether the hours are local: UTC is
    used when the time zone database is missing.

    >>> local_hours([1767614400000], ["lyon"], {"lyon": "Europe/Paris"})
    ([13], True)

    Raises nothing: a time zone that Python does not know gives UTC hours.
    """

    try:
        tz = {site: ZoneInfo(zone) for site, zone in zones.items() if zone}
    except Exception:  # no zoneinfo module, or no time zone data (Windows without tzdata)
        tz = {}
    utc = dt.timezone.utc
    hours = [
        dt.datetime.fromtimestamp(ms / 1000, tz.get(site, utc)).hour
        for ms, site in zip(start_ms, site_ids)
    ]
    return hours, bool(tz) or not zones


#: Events of one site stamped with one millisecond from which :func:`bursts` takes them for a
#: burst.
BURST = 10


def bursts(site_ids: Sequence[str], starts: Sequence[int]) -> set[Any]:
    """The ``(site, millisecond)`` of each burst: more than :data:`BURST` events of one site
    stamped with one millisecond, as a camera that uploads its backlog stamps them. Their time
    says nothing of when they happened, so statistics of the hour leave them out.

    >>> bursts(["a"] * 11 + ["b"], [5] * 12)
    {('a', 5)}

    Raises nothing of its own.
    """

    counts = Counter(zip(site_ids, starts))
    return {key for key, n in counts.items() if n > BURST}


def site_rows(
    site_ids: Sequence[str], durations: Sequence[Any], hours: Sequence[int]
) -> list[tuple[str, int, float, float, int]]:
    """Per site, as :func:`dwell_summary` gives them: ``(site, events, median, p90, busiest
    hour)``, where events, median and p90 are of the events with a duration and the busiest
    hour (the earliest on a tie) is of all its events; the busiest sites first.

    >>> site_rows(["a", "a", "a", "b"], [60, 120, 300, None], [9, 12, 12, 18])
    [('a', 3, 120.0, 264.0, 12)]

    Raises nothing of its own.
    """

    per_site: dict[str, Any] = defaultdict(list)
    per_hour: dict[str, Any] = defaultdict(lambda: [0] * 24)
    for site, seconds, hour in zip(site_ids, durations, hours):
        if seconds is not None:
            per_site[site].append(seconds)
        per_hour[site][hour] += 1
    rows = []
    for site, values in sorted(per_site.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        counts = per_hour[site]
        rows.append(
            (
                site,
                len(values),
                float(statistics.median(values)),
                quantile(values, 0.9),
                counts.index(max(counts)),
            )
        )
    return rows
