"""Types of the records and dicts that :class:`~surveillance.Client` returns, for annotations
and type checkers (mypy, pyright): at run time every record is a plain ``dict``.

A record is the service's JSON, as API.md documents it: :class:`Event` (with
:class:`EventDetails` and :class:`EventCamera`), :class:`Site`, :class:`Device`,
:class:`Camera` (with :class:`Stream`) and :class:`Report`. The service may send keys these do
not name (read them with ``.get`` on ``dict(record)``), and ``details`` holds only the keys its
kind of event has (:class:`EventDetails` is ``total=False``). :class:`Quota`, :class:`Stats`,
:class:`CacheInfo` and :class:`CacheEntry` are what :meth:`~surveillance.Client.quota`,
:meth:`~surveillance.Client.stats` and :meth:`~surveillance.Client.cache_info` return.
:data:`Output` names the tables ``output=`` takes.

>>> import surveillance as sv
>>> def dwell_seconds(events: list[sv.Event]) -> int:
...     return sum(e["details"].get("duration_sec", 0) for e in events)
>>> with sv.Emulator(sites=2, days=1, events_per_day=20) as emu:
...     events: list[sv.Event] = emu.client().events(emu.start, emu.end, progress=False)
>>> type(events[0]).__name__, dwell_seconds(events) > 0
('dict', True)
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal, Optional, TypedDict

__all__ = [
    "Output",
    "Event",
    "EventDetails",
    "EventCamera",
    "Site",
    "Device",
    "Camera",
    "Stream",
    "StreamDimensions",
    "Report",
    "Quota",
    "Stats",
    "CacheInfo",
    "CacheEntry",
]

#: What ``output=`` takes: ``"dicts"`` (a list of records), ``"arrow"`` (a ``pyarrow.Table``),
#: ``"pandas"`` or ``"polars"`` (a ``DataFrame``).
Output = Literal["dicts", "arrow", "pandas", "polars"]


class EventDetails(TypedDict, total=False):
    """The ``details`` of an :class:`Event`: keys vary by kind of event, so each may be absent.
    These are the documented ones; descriptive keys (``zone``, ``visitors``, ...) come besides.

    >>> import surveillance as sv
    >>> details: sv.EventDetails = {"duration_sec": 324, "confirmed": True}
    >>> details.get("marker") is None
    True
    """

    duration_sec: int
    confirmed: bool
    origin: str
    #: Local time of the event, epoch milliseconds.
    localTime: int
    generatedByEventStandard: bool
    marker: str


class EventCamera(TypedDict):
    """A camera of an :class:`Event` (its ``cameras`` items).

    >>> import surveillance as sv
    >>> camera: sv.EventCamera = {"id": "cacee3a3-b9d7-479e-9b24-5ca45f517313", "name": "Door"}
    """

    id: str
    name: str


class Event(TypedDict):
    """An event, as :meth:`Client.events <surveillance.Client.events>` and
    :meth:`~surveillance.Client.iter_events` give it: the service's JSON (times are ISO-8601
    text with milliseconds and a UTC offset, e.g. ``"2026-01-04T15:21:15.754-10:00"``).

    >>> import surveillance as sv
    >>> def titles(events: list[sv.Event]) -> list[str]:
    ...     return [e["title"] for e in events]
    """

    id: str
    startTime: str
    endTime: str
    #: e.g. ``"bookmark"``.
    type: str
    #: e.g. ``"ai-dwellTime"``.
    subtype: str
    siteId: str
    deviceId: str
    title: str
    subtitle: str
    #: ``"Key:Value"`` strings, e.g. ``"City:Phoenix"``.
    locationTags: list[str]
    createTime: str
    details: EventDetails
    cameras: list[EventCamera]


class Site(TypedDict):
    """A site (a physical location, such as a store), as :meth:`Client.sites
    <surveillance.Client.sites>` gives it.

    >>> import surveillance as sv
    >>> def by_id(sites: list[sv.Site]) -> dict[str, str]:
    ...     return {s["id"]: s["name"] for s in sites}
    """

    id: str
    customerId: str
    primaryDeviceId: str
    motionAlarmScheduleId: str
    cloudStoragePackageId: Optional[str]
    name: str
    address: str
    #: An IANA time zone name.
    timezone: str
    #: e.g. ``"STANDARD"``.
    type: str
    #: The customer's own store identifier; may be None or empty.
    externalId: Optional[str]
    #: e.g. ``"ACTIVE"``, ``"VIRTUAL"``.
    status: str
    #: e.g. ``"VISIBLE"``.
    visibilityStatus: str
    #: Epoch seconds.
    updatedAt: int
    #: Epoch seconds; 0 when not deleted.
    deletedAt: int
    tags: list[str]
    locationTags: list[str]
    deviceCount: int
    cameraCount: int
    onlineCameraCount: int
    offlineCameraCount: int


class Device(TypedDict):
    """A recording device, as :meth:`Client.devices <surveillance.Client.devices>` gives it.

    >>> import surveillance as sv
    >>> def online(devices: list[sv.Device]) -> int:
    ...     return sum(d["status"] == "online" for d in devices)
    """

    id: str
    customerId: str
    name: str
    #: e.g. ``"online"``.
    status: str
    address: str
    #: An IANA time zone name.
    timezoneId: str
    totalCameras: int
    offlineCameras: int
    siteId: str


class StreamDimensions(TypedDict):
    """The ``dimensions`` of a :class:`Stream`, in pixels.

    >>> import surveillance as sv
    >>> size: sv.StreamDimensions = {"width": 1920, "height": 1080}
    """

    width: int
    height: int


class Stream(TypedDict):
    """A video stream of a :class:`Camera`.

    >>> import surveillance as sv
    >>> def hd(camera: sv.Camera) -> list[sv.Stream]:
    ...     return [s for s in camera["streams"] if s["dimensions"]["height"] >= 720]
    """

    id: str
    #: e.g. ``"HD"``.
    name: str
    retention: int
    dimensions: StreamDimensions
    fps: float
    average_bps: int
    #: Numeric text marking the earliest stored segment.
    earliestSegmentDate: str


class Camera(TypedDict):
    """A camera, as :meth:`Client.cameras <surveillance.Client.cameras>` gives it.

    >>> import surveillance as sv
    >>> def models(cameras: list[sv.Camera]) -> set[str]:
    ...     return {c["model"] or "unknown" for c in cameras}
    """

    id: str
    deviceId: str
    name: str
    #: e.g. ``"online"``.
    status: str
    siteId: str
    streams: list[Stream]
    ip: str
    manufacturer: Optional[str]
    model: Optional[str]
    serialNumber: Optional[str]


class Report(TypedDict):
    """A saved report, as :meth:`Client.reports <surveillance.Client.reports>` gives it: its
    ``id`` is a ``report_id`` for events; ``name`` and ``description`` map locale tags
    (``"en-US"``) to text.

    >>> import surveillance as sv
    >>> def names(reports: list[sv.Report]) -> list[str]:
    ...     return [r["name"].get("en-US", r["id"]) for r in reports]
    """

    id: str
    name: dict[str, str]
    description: dict[str, str]


class Quota(TypedDict):
    """Where the daily request quota stands (:meth:`Client.quota
    <surveillance.Client.quota>`): ``limit`` (requests a day, None without a budget),
    ``used`` (requests sent today), ``remaining`` (None without a limit) and ``resets_at``
    (an aware UTC datetime).

    >>> import surveillance as sv
    >>> def left(quota: sv.Quota) -> str:
    ...     return "unlimited" if quota["remaining"] is None else f"{quota['remaining']:,}"
    """

    limit: Optional[int]
    used: int
    remaining: Optional[int]
    resets_at: _dt.datetime


class Stats(TypedDict):
    """The counters of a client (:meth:`Client.stats <surveillance.Client.stats>`).

    >>> import surveillance as sv
    >>> def event_requests(stats: sv.Stats) -> int:
    ...     return stats["requests"].get("GET /v2/events", 0)
    """

    #: Requests sent by ``"METHOD /path"``, retries and token requests included.
    requests: dict[str, int]
    retries: int
    rate_limited: int
    tokens: int
    bytes_received: int
    #: Event requests that the cache of settled events saved.
    requests_saved: int
    quota: Quota


class CacheEntry(TypedDict):
    """What the cache of settled events holds of one account and endpoint (an item of
    :class:`CacheInfo`'s ``entries``).

    >>> import surveillance as sv
    >>> def hours(entry: sv.CacheEntry) -> float:
    ...     return sum((hi - lo).total_seconds() for lo, hi in entry["ranges"]) / 3600
    """

    #: A hash of the base URL, API key and client id (never a secret).
    account: str
    base_url: Optional[str]
    #: e.g. ``"GET /v2/events"``.
    endpoint: str
    report_id: Optional[str]
    #: The ranges held, ``[start, end)`` pairs of aware UTC datetimes.
    ranges: list[tuple[_dt.datetime, _dt.datetime]]
    events: int
    #: Requests the reads that filled it spent: what a read of all it holds saves.
    requests: int
    bytes: int
    files: int


class CacheInfo(TypedDict):
    """What the cache of settled events holds (:meth:`Client.cache_info
    <surveillance.Client.cache_info>`).

    >>> import surveillance as sv
    >>> def events_held(info: sv.CacheInfo) -> int:
    ...     return sum(entry["events"] for entry in info["entries"])
    """

    path: str
    bytes: int
    files: int
    #: Requests this client's reads did not send, thanks to the cache.
    requests_saved: int
    entries: list[CacheEntry]
