"""The local emulator of the service, for the demo, tests and offline pipelines."""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from typing import TYPE_CHECKING, Any, Optional

from . import _check, _config, _core
from ._emulator_script import Scripting
from ._time import from_ms, time_range
from .aio import AsyncClient
from .client import Client, Limits
from .types import TimeLike

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

__all__ = ["Emulator"]


class Emulator(Scripting):
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

    Args:
        seed: the seed of the data (and of the faults' draws).
        sites: how many sites (1 to 10,000).
        days: how many UTC days of events (1 to 3,660).
        events_per_day: events a day, all sites together (``days * events_per_day`` at most
            50,000,000).
        latency_ms: added before every answer.
        start: the first day of the events (a ``date``, a ``datetime`` or ``"YYYY-MM-DD"``).
        port: the loopback port to listen on; 0 (the default) takes a free one.
        tls: serve HTTPS with a certificate of its own (see :attr:`ca_bundle`).

    Raises:
        ConfigError: a number out of its bounds (``TypeError`` for a value of the wrong type).
        OSError: ``port`` cannot be listened on.

    Example:
        >>> import surveillance as sv
        >>> with sv.Emulator(seed=0, sites=3, days=1, events_per_day=100) as emu:
        ...     emu.url.startswith("http://127.0.0.1:")
        ...     len(emu.truth(emu.start, emu.end))
        True
        100
    """

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

    def client(self, **kwargs: Any) -> Client:
        """A :class:`~surveillance.Client` configured for this emulator.

        Its limits are lifted (:meth:`Limits.unlimited`) unless the emulator enforces some
        with :meth:`set_limits`, in which case the client uses the same ones (the daily quota
        too: the client then refuses the request past it before sending). Keyword
        arguments override (``timeout=``, ``max_retries=``, ``limits=`` ...). The client reads
        the day of its quota from the emulator's clock, so :meth:`advance_clock` moves its day
        too.

        Args:
            **kwargs: settings of :class:`~surveillance.Client` that override the emulator's.

        Returns:
            The :class:`~surveillance.Client`.

        Example:
            >>> patient = emu.client(timeout=30, max_retries=5)
            >>> len(patient.sites())
            3

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

        Raises nothing.

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

        Args:
            **kwargs: settings of :class:`~surveillance.AsyncClient` that override the
                emulator's.

        Returns:
            The :class:`~surveillance.AsyncClient`.

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
    def published(self, region: Optional[str] = None) -> list[dict[str, Any]]:
        """Webhook records stored (upserted by key), in order of first arrival.

        Args:
            region: ``"us"`` or ``"eu"`` for the records posted to that route; None for all.

        Returns:
            The records, as dicts.

        Example:
            >>> record = {"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000,
            ...           "locationId": "store-9", "dataSourceId": "door-1",
            ...           "eventUniqueId": "e-1", "eventType": "door open"}
            >>> client.publish(record, region="eu", progress=False).accepted
            1
            >>> record in emu.published("eu")
            True

        Raises:
            ValueError: ``region`` is neither ``"us"`` nor ``"eu"``.
        """
        _check.choice("region", region, tuple(_core.REGIONS), optional=True)
        return self._inner.published(region)

    def clear_published(self) -> None:
        """Forgets the stored webhook records.

        Raises nothing.

        Example:
            >>> emu.clear_published()
            >>> emu.published()
            []
        """
        self._inner.clear_published()

    def resources(self, kind: str) -> list[dict[str, Any]]:
        """Every record of a list, exactly as its endpoint serves them (all pages together).

        Args:
            kind: ``"sites"``, ``"devices"``, ``"cameras"`` or ``"reports"``.

        Returns:
            The records, as dicts.

        Example:
            >>> emu.resources("sites") == client.sites()
            True

        Raises:
            ValueError: the emulator has no list ``kind`` (the message names the lists).
        """
        _check.text("kind", kind, longest=100)  # the emulator says which lists it has
        return self._inner.resources(kind)

    def truth(self, start: TimeLike, end: TimeLike, report_id: Optional[str] = None) -> list[str]:
        """Ids of the events a perfect client returns for ``[start, end)``, sorted by
        ``(startTime, id)``, whatever the semantics set.

        Args:
            start, end, report_id: as for :meth:`Client.events <surveillance.Client.events>`.

        Returns:
            The events' ids.

        Example:
            >>> ids = [e["id"] for e in client.events(emu.start, emu.end)]
            >>> ids == emu.truth(emu.start, emu.end)
            True

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

        Returns:
            The counters, as a dict.

        Raises nothing.

        >>> import surveillance as sv
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     _ = emu.client().sites()
        ...     stats = emu.stats()
        >>> stats["requests"]["GET /v2/sites"], stats["tokens_issued"], stats["daily"]["used"]
        ({'200': 1}, 1, 2)
        """
        return self._inner.stats()

    def reset_stats(self) -> None:
        """Zeroes :meth:`stats`, but its ``"daily"`` counts (the quota's state).

        Raises nothing.

        Example:
            >>> import surveillance as sv
            >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as own:
            ...     _ = own.client().sites()
            ...     own.reset_stats()
            ...     own.stats()["tokens_issued"], own.stats()["daily"]["used"]
            (0, 2)
        """
        self._inner.reset_stats()

    # --- lifecycle ----------------------------------------------------------------------
    def stop(self) -> None:
        """Stops the server and closes its connections; calling it again does nothing. A
        ``with`` block stops it at its end.

        Raises nothing.

        Example:
            >>> import surveillance as sv
            >>> own = sv.Emulator(sites=2, days=1, events_per_day=10)
            >>> own.stop()
            >>> own.stop()  # again: nothing
        """
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
