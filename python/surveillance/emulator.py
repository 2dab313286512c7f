"""The local emulator of the service, for the demo, tests and offline pipelines."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from typing import TYPE_CHECKING, Any, Optional

from . import _check, _config, _core
from ._time import TimeLike, from_ms, time_range, to_ms
from .aio import AsyncClient
from .client import Client, Limits

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

__all__ = ["Emulator"]


class Emulator:
    """Runs the service locally: a Rust (axum) server on a free loopback port.

    The data is deterministic from ``seed``: ``sites`` sites (IANA time zones, ``Brand:`` and
    ``City:`` location tags, multi-device sites, cameras with streams) and ``events_per_day``
    dwell-time events a day for ``days`` UTC days from ``start``, following each site's opening
    hours in local time, with dense bursts of events that share one millisecond. It serves the
    seven endpoints of the service with its rules (tokens, 100 records a page, offset ceiling,
    webhook validation), and misbehaves on request (:meth:`set_faults`, :meth:`set_limits`,
    :meth:`set_semantics`, :meth:`set_hostile`, :meth:`set_webhook`). Where the service's
    documentation shows nothing (the webhook's answer, error bodies, ``Retry-After``, the token's
    body, expired tokens) it speaks any of the plausible answers (:meth:`set_dialect`). Every
    answer carries a ``Date`` header from the emulator's own clock, which :meth:`advance_clock`
    moves.

    Example:
        >>> import surveillance as sv
        >>> with sv.Emulator(seed=0, sites=3, days=1, events_per_day=100) as emu:
        ...     emu.url.startswith("http://127.0.0.1:")
        ...     len(emu.truth(emu.start, emu.end))
        True
        100
    """

    #: Each setting of :meth:`set_dialect` and its values, the default first (``token_requests``:
    #: ``(None, int)``, None or a number of requests).
    DIALECTS: dict[str, tuple[Any, ...]] = dict(_core.Emulator.DIALECTS)
    #: The defaults of the data (``seed``, ``sites``, ``days``, ``events_per_day``, ``start``),
    #: as the native emulator states them; ``surveillance emulator`` and ``demo`` take them too.
    DATA_DEFAULTS: dict[str, Any] = dict(_core.Emulator.DATA_DEFAULTS)

    def __init__(
        self,
        seed: int = DATA_DEFAULTS["seed"],
        sites: int = DATA_DEFAULTS["sites"],
        days: int = DATA_DEFAULTS["days"],
        events_per_day: int = DATA_DEFAULTS["events_per_day"],
        latency_ms: int = 0,
        *,
        start: TimeLike = DATA_DEFAULTS["start"],
        port: int = 0,
        tls: bool = False,
    ) -> None:
        # The arguments as given, before any other name is bound: the native emulator takes
        # them as keywords.
        settings = dict(locals())
        del settings["self"]
        # Where its clients' ledgers are, forgotten when it stops.
        settings["quota_dir"] = _config.quota_dir()
        _check.integer("seed", seed, 0, 2**64 - 1, config=True)
        _check.integer("sites", sites, 1, 10_000, config=True)
        _check.integer("days", days, 1, 3_660, config=True)
        _check.integer("events_per_day", events_per_day, 0, 10_000_000, config=True)
        if days * events_per_day > MAX_EVENTS:
            raise _check._error(True)(
                f"`events_per_day` × `days` is {days * events_per_day:,} events: the emulator "
                f"holds at most {MAX_EVENTS:,} (about 70 MB a million)"
            )
        _check.integer("latency_ms", latency_ms, 0, 60_000, config=True)
        _check.integer("port", port, 0, 65_535, config=True)
        _check.flag("tls", tls)
        day = _as_date(start)
        settings["start"] = str(day)[:10]
        self._inner = _core.Emulator(**settings)
        self._limits: dict[str, Any] = {}
        self._ca_dir: Optional[tempfile.TemporaryDirectory[str]] = None

    # --- connection details -------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL of the service, without ``/v2`` (``http://127.0.0.1:PORT``)."""
        return self._inner.url

    @property
    def ca_bundle(self) -> Optional[str]:
        """With ``tls=True``: the path of a PEM file that trusts the emulator's certificate
        (made when it started, for ``127.0.0.1``, ``localhost`` and ``emulator.test``), for
        ``Client(ca_bundle=...)`` or ``SSL_CERT_FILE``; None without TLS. Removed by
        :meth:`stop`.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10, tls=True) as emu:
        ...     emu.url.startswith("https://"), len(emu.client(ca_bundle=emu.ca_bundle).sites())
        (True, 2)
        """
        pem = self._inner.ca_pem
        if pem is None:
            return None
        if self._ca_dir is None:
            self._ca_dir = tempfile.TemporaryDirectory(prefix="surveillance-emulator-")
            with open(os.path.join(self._ca_dir.name, "ca.pem"), "w") as f:
                f.write(pem)
        return os.path.join(self._ca_dir.name, "ca.pem")

    def set_hostile(
        self,
        mode: Optional[str] = None,
        *,
        path: str = "/v2/events",
        count: Optional[int] = None,
        size: int = 50 * 1024 * 1024,
        status: int = 500,
    ) -> None:
        """Answers like a hostile server, or a broken proxy in front of one, to the next
        ``count`` requests (all when None) whose path starts with ``path``; ``mode=None``
        lifts it.

        Modes: ``"truncated"`` (the JSON body cut in half), ``"not_array"`` (an object where
        the list belongs), ``"html"`` (an HTML error page with status 200), ``"huge_string"``
        (one record's ``title`` holds ``size`` bytes), ``"slow_body"`` (a body that trickles
        forever), ``"no_answer"`` (the request is read, nothing is ever answered),
        ``"status"`` (``status`` with a JSON error body: with ``path="/v2/oauth/token"``, a
        token endpoint that fails), ``"echo"`` (``status`` with a JSON error body that echoes
        the request back, as many servers and proxies do: ``"request": {"method", "path"``
        (with the query), ``"headers"`` (every one, ``x-api-key`` and ``authorization``
        included), ``"body"`` (as text)``}``, and the same in plain text in ``"message"``
        (``"400 Bad Request: POST /v2/oauth/token; ...; x-api-key: KEY; ...; body: ..."``),
        so the secrets appear verbatim; a 429 also carries ``Retry-After: 0``; on the token
        endpoint the body holds the client secret). Wrong field types:
        ``set_faults(corrupt_rate=...)``.

        Hostile answers apply to the token endpoint before its credentials are checked, and to
        the other endpoints after the bearer token is (a request refused 401 is not echoed).

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.set_hostile("html", path="/v2/sites")
        ...     emu.client(max_retries=0).sites()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        surveillance.errors.ApiError: cannot decode the answer of `/v2/sites`: ...

        Raises:
            ValueError: an unknown ``mode``, or a number out of range (``TypeError`` for a value of
                the wrong type).
        """
        _check.choice("mode", mode, _HOSTILE_MODES, optional=True)
        _check.text("path", path, longest=200)
        _check.integer("count", count, 0, 2**32, optional=True)
        _check.integer("size", size, 0, 1 << 30)
        _check.integer("status", status, 100, 599)
        self._inner.set_hostile(mode, path, count, size, status)

    @property
    def eu_url(self) -> str:
        """Base URL of the EU webhook (``{url}/eu``; the webhook is ``{eu_url}/v2/webhook``)."""
        return self._inner.eu_url

    @property
    def api_key(self) -> str:
        """The API key the emulator accepts (``x-api-key``)."""
        return self._inner.api_key

    @property
    def client_id(self) -> str:
        """The client id the emulator accepts."""
        return self._inner.client_id

    @property
    def client_secret(self) -> str:
        """The client secret the emulator accepts."""
        return self._inner.client_secret

    @property
    def audience(self) -> str:
        """The audience the emulator accepts."""
        return self._inner.audience

    @property
    def start(self) -> _dt.datetime:
        """First instant of the generated events (aware UTC)."""
        return from_ms(self._inner.start_ms)

    @property
    def end(self) -> _dt.datetime:
        """End of the generated events, exclusive (aware UTC)."""
        return from_ms(self._inner.end_ms)

    @property
    def restricted_report_id(self) -> str:
        """A report that exists but that the caller may not read (events of it answer 403)."""
        return self._inner.restricted_report_id

    # --- behaviour ----------------------------------------------------------------------
    def set_faults(
        self,
        error_rate: float = 0.0,
        rate_limit_rate: float = 0.0,
        drop_rate: float = 0.0,
        latency_ms: int = 0,
        retry_after: int = 0,
        corrupt_rate: float = 0.0,
        token_endpoint: bool = False,
    ) -> None:
        """Injects faults into the data and webhook calls, and on request the token endpoint
        (calling it again replaces them).

        Args:
            error_rate: probability of a 500 or 503 answer.
            rate_limit_rate: probability of a 429 whatever the load: the fault for sporadic
                429s, as per-node limits or a neighbour's burst give. The answer is status 429,
                ``Retry-After: retry_after`` and ``{"error": "rate_limited", "message": "too
                many requests (injected rate limit); retry after N s"}``. These 429s are not
                counted in ``stats()["rate_limited"]`` (the 429s of :meth:`set_limits`), only
                by route and status in ``stats()["requests"]``.
            drop_rate: probability that the connection is closed without any answer.
            latency_ms: added before every answer (the token endpoint's included).
            retry_after: seconds sent in ``Retry-After`` by the injected 429s.
            corrupt_rate: probability that an events page holds one event whose
                ``details.duration_sec`` is a string (the JSON stays valid).
            token_endpoint: whether the errors, 429s and drops apply to the token endpoint
                ``POST /v2/oauth/token`` too, as a service that throttles every endpoint.

        Errors, 429s and drops apply to the reads (``GET /v2/...``) and the webhook (both
        regions), and to the token endpoint only with ``token_endpoint=True`` (its other
        failures :meth:`set_hostile` scripts). ``Retry-After`` takes the form that
        :meth:`set_dialect`'s ``retry_after`` says. Which request gets which fault is drawn from the
        emulator's seed and the request's rank since the emulator started: the same seed and
        the same sequence of requests give the same faults.

        >>> import surveillance as sv
        >>> with sv.Emulator(seed=3, sites=2, days=1, events_per_day=10) as emu:
        ...     emu.set_faults(rate_limit_rate=0.2, retry_after=0)
        ...     len(emu.client(max_retries=10).sites())  # the client retries the 429s
        2

        Raises:
            ValueError: a rate outside 0 to 1, or a latency or ``retry_after`` out of range
                (``TypeError`` for a value of the wrong type).
        """
        faults = dict(locals())  # the faults as given, by name
        del faults["self"]
        for name, rate in (
            ("error_rate", error_rate),
            ("rate_limit_rate", rate_limit_rate),
            ("drop_rate", drop_rate),
            ("corrupt_rate", corrupt_rate),
        ):
            _check.number(name, rate, 0, 1)
        _check.integer("latency_ms", latency_ms, 0, 60_000)
        _check.integer("retry_after", retry_after, 0, 86_400)
        _check.flag("token_endpoint", token_endpoint)
        self._inner.set_faults(**faults)

    def outage(self, seconds: float, after: int = 0) -> None:
        """A restart of the service: once ``after`` more requests have come, the next one is
        dropped, and the emulator closes its port and every connection for ``seconds``
        (connections are refused), then listens on the same port again, with the same data,
        tokens and published records. Returns at once.

        Raises:
            ValueError: ``seconds`` is outside 0 to a day, or ``after`` is negative (``TypeError``
                when either is not a number).

        >>> import surveillance as sv, time
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     client = emu.client()
        ...     emu.outage(1.0)
        ...     t = time.monotonic()
        ...     n = len(client.sites())  # rides out the outage (`max_outage`)
        ...     n, time.monotonic() - t >= 1.0
        (2, True)
        """
        _check.number("seconds", seconds, 0, 86_400)
        _check.integer("after", after, 0, 2**32)
        self._inner.outage(float(seconds), int(after))

    def set_semantics(self, order: str = "asc", bounds: str = "[)") -> None:
        """Sets how ``/v2/events`` orders and bounds a window.

        Args:
            order: ``"asc"`` or ``"desc"`` by startTime, or ``"shuffled"`` (stable per query).
            bounds: ``"[)"``, ``"[]"``, ``"()"`` or ``"(]"``: which ends of
                ``[startTime, endTime]`` are included.

        Raises:
            ValueError: an ``order`` or ``bounds`` it does not know.
        """
        _check.choice("order", order, ("asc", "desc", "shuffled"))
        _check.choice("bounds", bounds, ("[)", "[]", "()", "(]"))
        self._inner.set_semantics(order, bounds)

    def set_dialect(
        self,
        *,
        webhook_answer: str = "accepted_count",
        webhook_errors: str = "indexed",
        error_body: str = "error_message",
        retry_after: str = "seconds",
        token_answer: str = "standard",
        expired_token: str = "401",
        token_requests: Optional[int] = None,
    ) -> None:
        """Speaks a dialect where the service's documentation shows nothing (calling it again
        replaces every setting: one left out is its default). The defaults are the emulator's
        usual answers; the other values mimic what the real service, or something in front of
        it, may answer instead, to test a pipeline against each. :attr:`DIALECTS` lists them.

        Args:
            webhook_answer: the webhook's answer to a body whose records are all valid (they
                are stored, but under ``"proxy_html"``):
                ``"accepted_count"`` 200 ``{"accepted": n}``;
                ``"status_object"`` 200 ``{"status": "accepted", "transactionId": KEY,
                "upserted": false}``, KEY the first record's ``transactionId`` (for an
                ``other`` record its upsert key, ``"locationId"`` and ``"eventUniqueId"``);
                ``"empty_object"`` 200 ``{}``;
                ``"status_ok"`` 200 ``{"status": "ok"}``;
                ``"success_flag"`` 200 ``{"success": true}``;
                ``"received_count"`` 200 ``{"received": n}``;
                ``"no_content"`` 204 without a body;
                ``"empty_200"`` 200, ``Content-Type: application/json`` and an empty body;
                ``"queued"`` 202 ``{"status": "queued"}``;
                ``"plain_ok"`` 200 ``text/plain`` ``OK``;
                ``"proxy_html"`` a captive portal or login proxy in front of the service:
                every webhook request that passes the key and token checks is answered 200
                with an HTML login page, whatever its body, and nothing is stored.
            webhook_errors: the webhook's 400 answer to a body holding invalid records (a
                single object is record 0). The valid records of an array are stored, as the
                provider processes records independently, but under ``"all_or_nothing"``:
                ``"indexed"`` ``{"error": "validation_failed", "message": ..., "errors":
                [{"index", "path", "message"}], "accepted": n}``;
                ``"by_transaction_id"`` ``{"error": "validation_failed", "failed":
                [{"transactionId": KEY, "reason": "PATH: MESSAGE"}]}`` (for an ``other``
                record its upsert key, ``"locationId"`` and ``"eventUniqueId"``; ``"index": i``
                instead for a record without a key);
                ``"failures_list"`` ``{"error": "validation_error", "failures": [{"record":
                i, "field": PATH, "reason": MESSAGE}]}``;
                ``"message_only"`` ``{"message": "one or more records failed validation"}``,
                naming no record;
                ``"all_or_nothing"`` as ``"indexed"``, but nothing of the body is stored and
                ``accepted`` is 0.
            error_body: the body of every other error answer (401, 403, 404, 413, 415, 429,
                5xx, a bad offset, a refused token request...), usually ``{"error": CODE,
                "message": TEXT}``:
                ``"error_message"`` that;
                ``"detail"`` ``{"detail": TEXT}``;
                ``"errors_list"`` ``{"errors": [{"code": CODE, "message": TEXT}]}``;
                ``"oauth"`` ``{"error": CODE, "error_description": TEXT}``;
                ``"plain_text"`` TEXT as ``text/plain``;
                ``"html"`` a ``text/html`` page whose title and heading are the status and
                its reason (``404 Not Found``) and whose paragraph is TEXT;
                ``"empty"`` no body at all.
                The webhook's validation answer and :meth:`set_hostile`'s ``echo`` keep their
                own bodies.
            retry_after: the form of every ``Retry-After`` sent (on 429s; 503s send none):
                ``"seconds"``;
                ``"http_date"`` the instant the wait ends as an HTTP date, on the emulator's
                clock (that of ``Date``);
                ``"absent"`` no header at all.
            token_answer: the token endpoint's answer:
                ``"standard"`` ``{"access_token", "expires_in": 14399, "token_type":
                "Bearer"}``;
                ``"no_expires_in"`` without ``expires_in``;
                ``"string_expires_in"`` ``"expires_in": "14399"``;
                ``"zero_expires_in"`` ``"expires_in": 0``;
                ``"no_token_type"`` without ``token_type``.
                Whatever it says, a token lives its real lifetime.
            expired_token: the answer to an expired, revoked or unknown bearer token:
                ``"401"`` 401, the error body saying which;
                ``"403_message"`` 403, the error body saying ``the access token has
                expired``, ``... has been revoked`` or ``... is not valid``;
                ``"403_www_authenticate"`` 403, ``WWW-Authenticate: Bearer
                error="invalid_token"`` and the error body's text ``forbidden``.
                A request without a token stays 401, and a bad ``x-api-key`` 403 ``missing or
                invalid `x-api-key` header``.
            token_requests: None, or the number of data requests (reads and webhooks) each
                token is accepted for; past them it is refused as ``expired_token`` says an
                expired token is, as a service that shortens tokens' lives without notice.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.set_dialect(webhook_answer="no_content", error_body="html", token_requests=5)
        ...     len(emu.client().sites())
        ...     emu.set_dialect()  # every setting back to its default
        2
        >>> sv.Emulator.DIALECTS["retry_after"]
        ('seconds', 'http_date', 'absent')

        Raises:
            ValueError: a setting's value is not one of ``Emulator.DIALECTS``, or ``token_requests``
                is out of range.
        """
        dialect = dict(locals())  # the settings as given, by name
        del dialect["self"]
        for name, value in dialect.items():
            if name != "token_requests":
                _check.choice(name, value, self.DIALECTS[name])
        _check.integer("token_requests", token_requests, 1, 2**32, optional=True)
        self._inner.set_dialect(**dialect)

    def set_limits(
        self,
        read_per_second: Optional[float] = None,
        read_concurrency: Optional[int] = None,
        publish_per_second: Optional[float] = None,
        publish_concurrency: Optional[int] = None,
        daily_requests: Optional[int] = None,
    ) -> None:
        """Enforces the provider's published limits (None lifts one): past a limit the
        emulator answers 429 with ``Retry-After``. Reads are the GET endpoints; publishing
        is the webhook; the daily quota counts every request.

        The daily quota is per UTC day of the emulator's clock (:meth:`advance_clock` moves
        it): every request with the right ``x-api-key`` counts against the day it arrives in,
        whatever its answer (those refused by the quota or another limit, faults and hostile
        answers included). Past ``daily_requests`` the answer is 429 with ``Retry-After`` =
        the seconds until the next UTC midnight and a message that says when the quota resets
        (``... it resets at 2026-11-24T00:00:00Z``); at midnight the count starts again at 0.
        ``stats()["daily"]`` shows the counts. Setting a quota where there was none, or lifting
        it, starts the counts anew; changing its value keeps them. The bounds are those of
        :class:`~surveillance.Limits`.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     # the provider's published limits:
        ...     emu.set_limits(read_per_second=1, read_concurrency=3, publish_per_second=100,
        ...                    publish_concurrency=200, daily_requests=2400)
        ...     daily = emu.stats()["daily"]
        >>> daily["used"], daily["limit"]
        (0, 2400)

        Raises:
            ValueError: an argument is out of range or malformed, named in the message
                (``TypeError`` when it is of the wrong type).
        """
        limits = dict(locals())  # the limits as given, by name
        del limits["self"]
        # The types here; the bounds are the core's, the same as a client's Limits.
        self._inner.set_limits(**_check.limit_values(limits))
        self._limits = limits

    def set_webhook(self, arrays: bool = True) -> None:
        """Sets how the webhook takes its bodies.

        Args:
            arrays: True (the default): a body is one record or a JSON array of up to 100, as
                the provider documents. False: a service that refuses arrays as such; a body
                that is a JSON array is answered 400 ``{"error": "array_not_supported",
                "message": "the body must be one JSON object; arrays are not accepted"}`` and
                nothing of it is stored; single objects are taken as before.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.set_webhook(arrays=False)  # one record per request, from now on

        Raises:
            TypeError: ``arrays`` is not True or False.
        """
        self._inner.set_webhook(_check.flag("arrays", arrays))

    def set_token_lifetime(self, seconds: int) -> None:
        """Sets ``expires_in`` (and the real lifetime) of the tokens issued from now on.

        Raises:
            ValueError: ``seconds`` is out of range (``TypeError`` when not an int).
        """
        self._inner.set_token_lifetime(_check.integer("seconds", seconds, 1, 10**9))

    def advance_clock(self, seconds: float) -> None:
        """Moves the emulator's clock forward (or back, with a negative ``seconds``): tokens
        expire as after that much real time, the ``Date`` of its answers moves, and the daily
        quota counts in the UTC day the clock is then in. The clients made by :meth:`client`
        and :meth:`async_client` read the day of their quota from this clock (a client whose
        budget is spent gets a new one when the emulator's day changes); any other client
        learns the new day from the ``Date`` of the next answer, as from a real service.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.advance_clock(4 * 3600)  # the tokens issued before have expired

        Raises:
            ValueError: ``seconds`` is out of range (``TypeError`` when not a number).
        """
        self._inner.advance_clock(_check.number("seconds", seconds, -1e11, 1e11))

    def revoke_tokens(self) -> None:
        """Every token issued so far is refused (401, or as :meth:`set_dialect`'s
        ``expired_token`` says) from now on."""
        self._inner.revoke_tokens()

    def add_events(
        self,
        at: TimeLike,
        count: int = 1,
        *,
        site_id: Optional[str] = None,
        created_at: Optional[TimeLike] = None,
    ) -> list[Any]:
        """Inserts ``count`` events whose startTime is exactly ``at``; returns their ids.

        Use it for dense bursts (many events in one millisecond) and for events created late:
        inserted after a sync has read ``at``'s range, they appear only to the reads that
        follow, as events the service creates after they start do.

        Args:
            at: the startTime of the new events (a time as :meth:`truth` takes).
            count: how many.
            site_id: their site (default: one picked from the seed).
            created_at: their ``createTime`` (default: a few seconds after they end); their
                dwell time is shortened when needed so that they end by then. Must not be
                before ``at``.

        >>> import surveillance as sv, datetime as dt
        >>> with sv.Emulator(sites=2, days=1, events_per_day=50) as emu:
        ...     [new] = emu.add_events("2026-01-05T10:00:00Z", created_at="2026-01-05T10:40:00Z")
        ...     [event] = [e for e in emu.client().events(emu.start, emu.end) if e["id"] == new]
        >>> dt.datetime.fromisoformat(event["createTime"]).astimezone(dt.timezone.utc)
        datetime.datetime(2026, 1, 5, 10, 40, tzinfo=datetime.timezone.utc)

        Raises:
            ValueError: an argument is out of range or malformed, named in the message
                (``TypeError`` when it is of the wrong type).
        """
        created = None if created_at is None else to_ms(created_at, "created_at")
        _check.integer("count", count, 0, 1_000_000)
        _check.text("site_id", site_id, optional=True, longest=100)
        return self._inner.add_events(to_ms(at, "at"), count, site_id, created)

    def update_event(
        self,
        event_id: str,
        *,
        end_time: Optional[TimeLike] = None,
        confirmed: Optional[bool] = None,
        site_id: Optional[str] = None,
    ) -> dict[str, Any]:
        """Changes an existing event as the service revises one, and returns it as now served.

        Its id, ``startTime`` and ``createTime`` stay; what follows from the change moves with
        it (``endTime``, ``details.duration_sec`` and the subtitle with the end; ``deviceId``,
        ``cameras``, the site's tags and the UTC offset of its times with the site). The
        service's event has no update time, so nothing in it says that it changed: every later
        read serves the new version, and a read of a range that settled before the change (a
        cache, a sync) keeps the old one until it reads that range again.

        Args:
            event_id: the event's ``id``.
            end_time: its new ``endTime`` (a time as :meth:`truth` takes), not before its
                ``startTime`` and within 49 days of it.
            confirmed: its new ``details.confirmed``.
            site_id: the site it now belongs to (a camera of that site in the same zone when
                there is one).

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=20) as emu:
        ...     first = emu.client().events(emu.start, emu.end)[0]
        ...     changed = emu.update_event(first["id"], end_time=first["startTime"])
        ...     again = emu.client().events(emu.start, emu.end)[0]
        >>> changed["details"]["duration_sec"], again == changed
        (0, True)
        >>> again["endTime"] == first["startTime"]
        True

        Raises:
            ValueError: no event has ``event_id``, or a value is out of range (``TypeError`` for a
                value of the wrong type).
        """
        _check.text("event_id", event_id, longest=100)
        end = None if end_time is None else to_ms(end_time, "end_time")
        confirmed = None if confirmed is None else _check.flag("confirmed", confirmed)
        _check.text("site_id", site_id, optional=True, longest=100)
        return self._inner.update_event(event_id, end, confirmed, site_id)

    def client(self, **kwargs: Any) -> Client:
        """A :class:`~surveillance.Client` configured for this emulator.

        Its limits are lifted (:meth:`Limits.unlimited`) unless the emulator enforces some
        with :meth:`set_limits`, in which case the client uses the same ones (the daily quota
        too: the client then refuses the request past it before sending). Keyword
        arguments override (``timeout=``, ``max_retries=``, ``limits=`` ...). The client reads
        the day of its quota from the emulator's clock, so :meth:`advance_clock` moves its day
        too.

        Raises:
            ValueError: a setting is out of range, as for :class:`Client` (``TypeError`` for the
                wrong type).
        """

        if "limits" not in kwargs:
            lim = self._limits
            enforced = any(v is not None for v in lim.values())
            kwargs["limits"] = Limits(**lim) if enforced else Limits.unlimited()
        settings: dict[str, Any] = {
            "api_key": self.api_key,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "base_url": self.url,
            "eu_base_url": self.eu_url,
            "audience": self.audience,
        }
        settings.update(kwargs)
        client = Client(**settings)
        client._inner.follow_clock(self._inner)
        return client

    def env(self) -> dict[str, str]:
        """The ``SURVEILLANCE_*`` variables that make a client of another process talk to this
        emulator, as :meth:`client` does: ``sv.Client()``, the ``surveillance`` command, a
        scheduler's task or a cron job started with them reads the base URLs, the credentials
        and the limits from them.

        The limits are the emulator's: lifted (``0``) unless it enforces some with
        :meth:`set_limits`, in which case the same ones (the daily quota too); with
        ``tls=True``, ``SURVEILLANCE_CA_BUNDLE`` names the PEM file that trusts it. Such a
        client learns the emulator's day from the ``Date`` of its answers, as from a real
        service (only the clients of :meth:`client` follow :meth:`advance_clock` at once).

        Returns:
            dict[str, str]: the variables, ready for ``subprocess.run(..., env={**os.environ,
            **emu.env()})``.

        Example:
            >>> import os, subprocess, sys, surveillance as sv
            >>> code = "import surveillance as sv; print(len(sv.Client().sites()))"
            >>> with sv.Emulator(sites=3, days=1, events_per_day=10) as emu:
            ...     run = subprocess.run([sys.executable, "-c", code], text=True,
            ...                          env={**os.environ, **emu.env()}, capture_output=True)
            >>> run.stdout
            '3\\n'
        """
        env = {
            "SURVEILLANCE_BASE_URL": self.url,
            "SURVEILLANCE_EU_BASE_URL": self.eu_url,
            "SURVEILLANCE_API_KEY": self.api_key,
            "SURVEILLANCE_CLIENT_ID": self.client_id,
            "SURVEILLANCE_CLIENT_SECRET": self.client_secret,
            "SURVEILLANCE_AUDIENCE": self.audience,
        }
        # 0 lifts a limit, as None does in `Limits`: the limits the emulator does not enforce
        # are lifted for its clients, as `client()` lifts them.
        for name in _LIMIT_NAMES:
            value = self._limits.get(name)
            env[f"SURVEILLANCE_{name.upper()}"] = "0" if value is None else str(value)
        if self.ca_bundle is not None:
            env["SURVEILLANCE_CA_BUNDLE"] = self.ca_bundle
        return env

    def async_client(self, **kwargs: Any) -> AsyncClient:
        """An :class:`~surveillance.AsyncClient` configured for this emulator, as
        :meth:`client` (same limits, same keyword overrides).

        >>> import asyncio, surveillance as sv
        >>> with sv.Emulator(sites=3, days=1, events_per_day=10) as emu:
        ...     len(asyncio.run(emu.async_client().sites()))
        3

        Raises:
            ValueError: a setting is out of range, as for :class:`AsyncClient` (``TypeError`` for
                the wrong type).
        """

        return AsyncClient._of(self.client(**kwargs)._inner)  # type: ignore[no-any-return]

    # --- inspection ---------------------------------------------------------------------
    def published(self, region: Optional[str] = None) -> list[Any]:
        """Webhook records stored (upserted by key), in order of first arrival.

        Args:
            region: ``"us"`` or ``"eu"`` for the records posted to that route; None for all.

        Raises:
            ValueError: ``region`` is neither ``"us"`` nor ``"eu"``.
        """
        _check.choice("region", region, tuple(_core.REGIONS), optional=True)
        return self._inner.published(region)

    def clear_published(self) -> None:
        """Forgets the stored webhook records."""
        self._inner.clear_published()

    def resources(self, kind: str) -> list[Any]:
        """Every record of a list (``"sites"``, ``"devices"``, ``"cameras"``, ``"reports"``),
        exactly as its endpoint serves them (all pages together); an unknown ``kind`` is a
        ``ValueError`` that names the lists.

        Raises:
            ValueError: the emulator has no list ``kind`` (the message names the lists).
        """
        _check.text("kind", kind, longest=100)  # the emulator says which lists it has
        return self._inner.resources(kind)

    def truth(self, start: TimeLike, end: TimeLike, report_id: Optional[str] = None) -> list[Any]:
        """Ids of the events a perfect client returns for ``[start, end)``, sorted by
        ``(startTime, id)``, whatever the semantics set.

        Raises:
            ValueError: ``end`` is not after ``start``, or a time cannot be read.
        """
        lo, hi, report_id = time_range(start, end, report_id)
        return self._inner.truth(lo, hi, report_id)

    def stats(self) -> dict[str, Any]:
        """Requests by ``"METHOD /path"`` and status, tokens issued, webhook records stored and
        upserted, 429s from limits, connections open and accepted, and the daily quota's counts.

        ``"daily"`` is ``{"day": "2026-11-23", "used": n, "limit": N or None, "days":
        {"2026-11-22": n, ...}}``: the emulator's current UTC day, the requests counted in it
        (those past the quota included: ``used <= limit`` means none was sent past it), the
        quota, and the count of every day since the quota was last set anew (see
        :meth:`set_limits`), so that a test can check that no day went past its budget.
        :meth:`reset_stats` leaves it alone. ``"in_flight"`` counts the requests being served
        now (``token``, ``read``, ``publish``).

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     _ = emu.client().sites()
        ...     stats = emu.stats()
        >>> stats["requests"]["GET /v2/sites"], stats["tokens_issued"], stats["daily"]["used"]
        ({'200': 1}, 1, 2)
        """
        return self._inner.stats()

    def reset_stats(self) -> None:
        """Zeroes :meth:`stats`, but its ``"daily"`` counts (the quota's state)."""
        self._inner.reset_stats()

    # --- lifecycle ----------------------------------------------------------------------
    def stop(self) -> None:
        """Stops the server and closes its connections; calling it again does nothing."""
        self._inner.stop()
        if self._ca_dir is not None:
            self._ca_dir.cleanup()
            self._ca_dir = None

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Emulator(url={self.url!r})"


#: The settings of :class:`~surveillance.Limits`, each a ``SURVEILLANCE_*`` variable.
_LIMIT_NAMES = (
    "read_per_second",
    "read_concurrency",
    "publish_per_second",
    "publish_concurrency",
    "daily_requests",
)


def _as_date(value: Any) -> _dt.date:
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value.strip()[:10])
        except ValueError:
            pass
        raise ValueError(f"`start` must be a date such as `2026-01-05`, got {_check.shown(value)}")
    raise TypeError(f"`start` must be a date or `YYYY-MM-DD`, got {type(value).__name__}")


#: Events an emulator holds at most (``days`` × ``events_per_day``).
MAX_EVENTS = 50_000_000
_HOSTILE_MODES = (
    "truncated",
    "not_array",
    "html",
    "huge_string",
    "slow_body",
    "no_answer",
    "status",
    "echo",
)
