"""Types of the records and results that :class:`~surveillance.Client` returns, for annotations
and type checkers (mypy, pyright): at run time every record is a plain ``dict``.

A record is the service's JSON, as API.md documents it: :class:`Event` (with
:class:`EventDetails` and :class:`EventCamera`), :class:`Site`, :class:`Device`,
:class:`Camera` (with :class:`Stream`) and :class:`Report`. The service may send keys these do
not name (read them with ``.get`` on ``dict(record)``), and ``details`` holds only the keys its
kind of event has (:class:`EventDetails` is ``total=False``). :class:`Quota`, :class:`Stats`,
:class:`CacheInfo` and :class:`CacheEntry` are what :meth:`~surveillance.Client.quota`,
:meth:`~surveillance.Client.stats` and :meth:`~surveillance.Client.cache_info` return: classes
of the native module, frozen, each a read-only mapping of its attributes (``quota["used"]`` is
``quota.used``; ``dict(quota)`` and ``quota.to_dict()`` are dicts).
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
import os
from collections.abc import Iterable, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Literal,
    Optional,
    Protocol,
    TypedDict,
    Union,
    runtime_checkable,
)

from ._batches import EventBatches
from ._core import CacheEntry, CacheInfo, Quota, Stats
from ._overloads import CamerasMethod, EventsMethod, ListMethod

if TYPE_CHECKING:
    import pandas

__all__ = [
    "Output",
    "TimeLike",
    "Progress",
    "SettleLike",
    "Records",
    "ArrowStream",
    "BatchSize",
    "EventBatches",
    "EventsMethod",
    "ListMethod",
    "CamerasMethod",
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

#: A time argument (``start``, ``end``, ``since``): an aware ``datetime`` (a pandas
#: ``Timestamp`` is one), a naive one (taken as UTC), a ``date`` (its UTC midnight) or an
#: ISO-8601 string such as ``"2026-01-05T09:00:00Z"``.
TimeLike = Union[_dt.datetime, _dt.date, str]

#: What ``progress=`` takes: ``"auto"`` (a bar in Jupyter and on a terminal, none otherwise),
#: ``True`` (a bar), ``False`` (none), or a callable that receives each update as a dict (its
#: keys are listed by each method that takes it).
Progress = Union[Literal["auto"], bool, Callable[[dict[str, Any]], Any]]

#: How long after it starts an event may still change (``settle=``): ``"1h"``, ``"30m"``,
#: ``"90s"``, ``"2d"``, a ``timedelta`` or seconds.
SettleLike = Union[str, _dt.timedelta, int, float]

#: Records per request of a publish (``batch_size=``): ``"auto"`` (arrays of 100, one record
#: per request where the service refuses arrays) or 1 to 100.
BatchSize = Union[Literal["auto"], int]


@runtime_checkable
class ArrowStream(Protocol):
    """Arrow data that exports itself through the Arrow C stream interface: a
    ``pyarrow.Table`` or ``RecordBatchReader``, a polars ``DataFrame``, an arro3 table, a
    duckdb relation's ``arrow()``...

    >>> import surveillance as sv, pyarrow as pa
    >>> isinstance(pa.table({"a": [1]}), sv.ArrowStream)
    True
    """

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow C stream of the data (a PyCapsule)."""


#: What :meth:`Client.publish <surveillance.Client.publish>` reads: one record (a dict), an
#: iterable or generator of them, the path of a JSON Lines, CSV or Parquet file, Arrow data
#: (:class:`ArrowStream`) or a pandas ``DataFrame`` (one record per row).
Records = Union[
    Mapping[str, Any],
    Iterable[Mapping[str, Any]],
    str,
    "os.PathLike[str]",
    ArrowStream,
    "pandas.DataFrame",
]


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
