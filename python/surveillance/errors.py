"""Exceptions raised by :mod:`surveillance`.

Every error the package raises on purpose is a :class:`SurveillanceError`::

    SurveillanceError
    ├── ConfigError          a setting is missing or wrong (names the argument and the variable)
    ├── AuthError            bad credentials, or the service refused them (401/403)
    ├── ApiError             the service answered with an error status (.status, .body, .url)
    │   ├── BadRequestError  400
    │   ├── NotFoundError    404
    │   ├── RateLimitError   429 after every retry
    │   └── ServerError      5xx after every retry
    ├── TransportError       connect, TLS or timeout: no usable answer
    ├── ValidationError      columns that do not fit the models: nothing sent (.problems)
    ├── DenseWindowError     more than 10,000 events share one millisecond
    ├── QuotaExhaustedError  the day's request quota is used up: nothing was sent (.resets_at)
    ├── SyncLockedError      another sync_events run holds the dataset's lock (.path)
    └── PublishError         PublishReport.raise_on_failure(): records not accepted (.report)

    KeyboardInterrupt
    ├── PublishInterrupted   Ctrl-C during Client.publish (.report: the partial PublishReport)
    └── SyncInterrupted      Ctrl-C during Client.sync_events: what it fetched is kept (.result)

PublishError is defined here, where the native report that raises it finds it (the native
module imports nothing else of the package), and named by :mod:`surveillance.publish`;
PublishInterrupted is defined beside the publish report, in :mod:`surveillance.publish`, and
SyncInterrupted beside its SyncResult, in :mod:`surveillance.sync`;
``surveillance.PublishError``, ``surveillance.PublishInterrupted`` and
``surveillance.SyncInterrupted`` name them, as they name these. This module needs nothing of
the package.

Messages never contain a secret, an API key or a token.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

if TYPE_CHECKING:
    from ._core import PublishReport

__all__ = [
    "SurveillanceError",
    "ConfigError",
    "AuthError",
    "ApiError",
    "BadRequestError",
    "NotFoundError",
    "RateLimitError",
    "ServerError",
    "TransportError",
    "ValidationError",
    "DenseWindowError",
    "QuotaExhaustedError",
    "SyncLockedError",
]


class Problem(NamedTuple):
    """One finding about a record: where, what, and how serious.

    Attributes:
        path: location in the record, e.g. ``"locationId"`` or ``"items[3].unitPrice"``;
            empty for the record as a whole.
        message: what is wrong, lowercase, naming the offending value.
        severity: ``"error"`` (the service would refuse the record) or ``"warning"`` (it
            conforms, but something looks wrong or relies on unstated behaviour).
    """

    path: str
    message: str
    severity: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SurveillanceError(Exception):
    """Base class of every error raised by :mod:`surveillance`.

    >>> import surveillance as sv
    >>> issubclass(sv.ApiError, sv.SurveillanceError)
    True
    """


class ConfigError(SurveillanceError, ValueError):
    """A setting is missing or invalid; the message names the argument and the variable."""


class AuthError(SurveillanceError):
    """The credentials were refused (token creation failed, or 401/403 on a call)."""


class ApiError(SurveillanceError):
    """The service answered with an error status.

    Attributes:
        status: the HTTP status code.
        body: the response body (text, truncated to a few KiB).
        url: the request URL, without query secrets.
    """

    def __init__(self, message: str, status: int = 0, body: str = "", url: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.url = url

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.status, self.body, self.url))


class BadRequestError(ApiError):
    """The service refused the request as malformed (400)."""


class NotFoundError(ApiError):
    """The resource does not exist (404)."""


class RateLimitError(ApiError):
    """Still rate limited (429) after every retry."""


class ServerError(ApiError):
    """The service failed (5xx) after every retry."""


class TransportError(SurveillanceError):
    """No usable answer: connection refused or reset, TLS failure, or timeout."""


class ValidationError(SurveillanceError, ValueError):
    """Records do not conform to their standard model, and nothing was sent: raised by
    :meth:`Client.publish <surveillance.Client.publish>` for columns (a DataFrame, an Arrow
    table, a Parquet file) whose schema does not fit the models (e.g. a legacy ``storeId``
    column, a ``locationId`` column of numbers), once for the whole input.

    Attributes:
        problems: the problems found (:class:`~surveillance.errors.Problem`: ``path``,
            ``message`` and ``severity``).
    """

    def __init__(self, message: str, problems: Optional[list[Any]] = None) -> None:
        super().__init__(message)
        # Dicts from the native module; Problems again when unpickled.
        self.problems = [
            Problem(**p) if isinstance(p, dict) else Problem(*p) for p in problems or []
        ]

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.problems))


class DenseWindowError(SurveillanceError):
    """More than 10,000 events share one millisecond: the range cannot be split further.

    Attributes:
        timestamp: the ISO-8601 millisecond that holds too many events.
    """

    def __init__(self, message: str, timestamp: str = "") -> None:
        super().__init__(message)
        self.timestamp = timestamp

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.timestamp))


class QuotaExhaustedError(SurveillanceError):
    """The daily request quota of the API key is used up (the provider allows 2,400 requests a
    day per key, all endpoints, and every client of the machine counts against the same
    budget), or the service answered 429 asking for a wait longer than the client's
    ``max_wait``. Raised before sending: the request that would have gone past the budget was
    not sent, and what was fetched or posted before is kept (``iter_events`` yields it first;
    ``sync_events`` stores it and resumes on its next run).

    Attributes:
        resets_at: when requests are taken again (an aware UTC datetime: the service's next
            UTC midnight, by its own clock, or the end of the wait it asked for).
        used: requests counted today with this key.
        limit: requests a day (None when no limit was set and the service refused).

    >>> import surveillance as sv
    >>> issubclass(sv.QuotaExhaustedError, sv.SurveillanceError)
    True
    """

    def __init__(
        self, message: str, resets_at: Any = None, used: int = 0, limit: Optional[int] = None
    ) -> None:
        super().__init__(message)
        if isinstance(resets_at, (int, float)):
            resets_at = _dt.datetime.fromtimestamp(resets_at / 1000, tz=_dt.timezone.utc)
        self.resets_at: Optional[_dt.datetime] = resets_at
        self.used = used
        self.limit = limit

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.resets_at, self.used, self.limit))


class SyncLockedError(SurveillanceError):
    """Another :meth:`~surveillance.Client.sync_events` run holds the lock of the same dataset
    directory: this run was refused at once, before reading or writing anything.

    The lock is an ``flock`` that the operating system releases when the holding process ends
    (even when killed), so retrying after that run finishes is always safe. On an object store
    (``s3://...``) it is an object whose lease a killed run leaves for 5 minutes; a run that
    found another one holding it in its course raises it too, having recorded nothing (see
    :mod:`surveillance.sync`).

    Attributes:
        path: the dataset directory, or its URI.

    >>> import surveillance as sv
    >>> issubclass(sv.SyncLockedError, sv.SurveillanceError)
    True
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.path))


class PublishError(SurveillanceError):
    """Raised by :meth:`PublishReport.raise_on_failure
    <surveillance.PublishReport.raise_on_failure>` when records were not accepted.

    Attributes:
        report: the :class:`~surveillance.PublishReport`; ``report.rejected`` lists the
            records and why, ``report.write_failures(path)`` writes them to publish again.
    """

    def __init__(self, message: str, report: Optional[PublishReport] = None) -> None:
        super().__init__(message)
        self.report: Optional[PublishReport] = report

    def __reduce__(self) -> Any:
        return (type(self), (str(self), None))
