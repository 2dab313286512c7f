"""What a test scripts on the :class:`~surveillance.Emulator`: its faults, hostile answers,
limits, semantics and dialect, its clock and tokens, and changes to its events; the emulator's
``state/`` (src/emulator/state/) holds them."""

from __future__ import annotations

from typing import Any, Optional

from . import _check, _core
from ._time import to_ms
from .types import TimeLike


class Scripting:
    """The methods of :class:`~surveillance.Emulator` that script how it behaves."""

    _inner: _core.Emulator
    _limits: dict[str, Any]

    #: Each setting of :meth:`set_dialect` and its values, the default first (``token_requests``:
    #: ``(None, int)``, None or a number of requests).
    DIALECTS: dict[str, tuple[Any, ...]] = dict(_core.Emulator.DIALECTS)

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

        Args:
            mode: one of the modes above, or None to answer normally again.
            path: the requests whose path starts with it are answered so.
            count: how many of them (None: all, from now on).
            size: the bytes of ``"huge_string"``'s title.
            status: the status of ``"status"`` and ``"echo"``.

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

        Args:
            seconds: how long the port stays closed (0 to a day).
            after: requests answered before the outage begins.

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

        Example:
            >>> import surveillance as sv
            >>> with sv.Emulator(sites=2, days=1, events_per_day=300) as own:
            ...     own.set_semantics(order="shuffled", bounds="[]")
            ...     len(own.client().events(own.start, own.end))  # the same events
            300
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

        Args:
            read_per_second: requests a second to the read endpoints; None lifts it.
            read_concurrency: read requests in flight at once.
            publish_per_second: requests a second to the webhook.
            publish_concurrency: webhook requests in flight at once.
            daily_requests: the day's requests of the key, all endpoints together.

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

        Args:
            seconds: the lifetime, from 1 s.

        Raises:
            ValueError: ``seconds`` is out of range (``TypeError`` when not an int).

        Example:
            >>> import surveillance as sv
            >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as own:
            ...     own.set_token_lifetime(60)
            ...     client = own.client()
            ...     _ = client.sites()
            ...     own.advance_clock(120)  # the token has expired: the client gets another
            ...     len(client.sites()), own.stats()["tokens_issued"]
            (2, 2)
        """
        self._inner.set_token_lifetime(_check.integer("seconds", seconds, 1, 10**9))

    def advance_clock(self, seconds: float) -> None:
        """Moves the emulator's clock forward (or back, with a negative ``seconds``): tokens
        expire as after that much real time, the ``Date`` of its answers moves, and the daily
        quota counts in the UTC day the clock is then in. The clients made by :meth:`client`
        and :meth:`async_client` read the day of their quota from this clock (a client whose
        budget is spent gets a new one when the emulator's day changes); any other client
        learns the new day from the ``Date`` of the next answer, as from a real service.

        Args:
            seconds: how far, from -1e11 to 1e11.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     emu.advance_clock(4 * 3600)  # the tokens issued before have expired

        Raises:
            ValueError: ``seconds`` is out of range (``TypeError`` when not a number).
        """
        self._inner.advance_clock(_check.number("seconds", seconds, -1e11, 1e11))

    def revoke_tokens(self) -> None:
        """Every token issued so far is refused (401, or as :meth:`set_dialect`'s
        ``expired_token`` says) from now on.

        Raises nothing.

        Example:
            >>> import surveillance as sv
            >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as own:
            ...     client = own.client()
            ...     _ = client.sites()
            ...     own.revoke_tokens()
            ...     len(client.sites()), own.stats()["tokens_issued"]  # a new token
            (2, 2)
        """
        self._inner.revoke_tokens()

    def add_events(
        self,
        at: TimeLike,
        count: int = 1,
        *,
        site_id: Optional[str] = None,
        created_at: Optional[TimeLike] = None,
    ) -> list[str]:
        """Inserts ``count`` events whose startTime is exactly ``at``.

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

        Returns:
            The new events' ids.

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

        Returns:
            The event as the service now serves it.

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
