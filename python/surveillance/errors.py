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

An error about a setting, an argument or a call knows what it names: its :attr:`wording`
(:class:`Wording`) is its message as a template and the names in it (:class:`Name`: the
Python name, and how the library writes it), so that another surface names them in its own
words (the command line says ``--report`` where the library says ``report_id``) without
rewriting the text. Errors of the standard types (``ValueError``, ``TypeError``) raised for a
bad argument carry it too; :func:`wording` reads it of any exception.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, TypeVar, Union

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


class Name(NamedTuple):
    """A setting, argument or call that an error's message names.

    Attributes:
        key: its Python name (``"client_id"``, ``"daily_requests"``, ``"sync_events"``), by
            which another surface finds its own word for it.
        said: how the library writes it in the message, backticks included
            (``"`client_id=`"``, ``"`Limits(daily_requests=...)`"``).
    """

    key: str
    said: str


class Wording(NamedTuple):
    """An error's message as a template and what it names.

    Attributes:
        template: the message as a :meth:`str.format` template, with one ``{}`` where each
            name goes (literal braces doubled).
        names: the :class:`Name` of each ``{}``, in order.

    >>> from surveillance.errors import Name, Wording
    >>> w = Wording("{} must be after {}", (Name("end", "`end`"), Name("start", "`start`")))
    >>> w.say()
    '`end` must be after `start`'
    >>> w.say({"end": "`--end`", "start": "`--start`"}.get)
    '`--end` must be after `--start`'
    """

    template: str
    names: tuple[Name, ...] = ()

    def say(self, word: Optional[Callable[[str], Optional[str]]] = None) -> str:
        """The message with each name in ``word(key)``'s words, or in the library's where
        ``word`` is None or returns None."""
        said = [(None if word is None else word(n.key)) or n.said for n in self.names]
        return self.template.format(*said)

    def __str__(self) -> str:
        return self.say()


_E = TypeVar("_E", bound=BaseException)


def arg(name: str) -> Name:
    """The :class:`Name` of a Python name written as the library writes it: ``"start"``
    (`` `start` ``), ``"client_id="`` (the keyword: `` `client_id=` ``)."""
    return Name(name.removesuffix("="), f"`{name}`")


def worded(error: Callable[..., _E], *parts: Union[str, Name], **extra: Any) -> _E:
    """An error made by ``error`` whose message is ``parts`` one after the other: text, and
    the :class:`Name` of each setting, argument or call it names (:func:`arg`), which it keeps
    apart in its ``wording``. ``extra`` goes to ``error``.

    >>> from surveillance.errors import arg, worded
    >>> e = worded(ValueError, arg("end"), " must be after ", arg("start"), " {here}")
    >>> str(e), e.wording.names[0].key
    ('`end` must be after `start` {here}', 'end')
    """
    template = "".join(
        "{}" if isinstance(p, Name) else p.replace("{", "{{").replace("}", "}}") for p in parts
    )
    wording = Wording(template, tuple(p for p in parts if isinstance(p, Name)))
    e = error(wording.say(), **extra)
    e.wording = wording  # type: ignore[attr-defined]
    return e


def wording(e: BaseException) -> Wording:
    """What ``e`` says and what it names: its ``wording``, or its text, naming nothing.

    >>> from surveillance.errors import wording
    >>> wording(KeyError("x{y}")).say()
    "'x{y}'"
    """
    found = getattr(e, "wording", None)
    if isinstance(found, Wording):
        return found
    return Wording(str(e).replace("{", "{{").replace("}", "}}"))


class SurveillanceError(Exception):
    """Base class of every error raised by :mod:`surveillance`.

    Attributes:
        wording: the message as a :class:`Wording`, when it names settings, arguments or
            calls (None otherwise; :func:`wording` reads it of any exception).

    >>> import surveillance as sv
    >>> issubclass(sv.ApiError, sv.SurveillanceError)
    True
    """

    wording: Optional[Wording] = None


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
