"""The list methods of both clients (``sites``, ``devices``, ``cameras``, ``reports``), typed
per ``output``: with the core's list table (``src/client/lists.rs``), the emulator's
(``src/emulator/data/listings.rs``) and the record's ``TypedDict``
(:mod:`surveillance.types`), the one place a new list endpoint is added to. The CLI and the
dlt source take the lists from the core's table (``_core.LISTS``)."""

from __future__ import annotations

from typing import Any, Optional

from . import _check, _output, _overloads
from ._meter import ametered, metered
from ._raises import OUTPUT, REQUEST, raises
from .types import Device, Report, Site


class Lists:
    """The lists of :class:`~surveillance.Client`."""

    _inner: Any

    def _list(self, kind: str, output: str, *filters: Optional[str]) -> Any:
        _output.check(output)
        if output == "dicts":
            return self._inner.list(kind, *filters)
        return _output.convert(self._inner.list(kind, *filters, arrow=True), output)

    @_overloads.rows_of(Site).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def sites(self, output: str = "dicts") -> Any:
        """Every site of the account (all pages).

        Args:
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"``, ``"pandas"`` or ``"polars"`` (a typed table).
        """
        return self._list("sites", output)

    @_overloads.rows_of(Device).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def devices(self, output: str = "dicts") -> Any:
        """Every recording device of the account (all pages)."""
        return self._list("devices", output)

    @_overloads.CAMERAS.sync
    @metered
    @raises(OUTPUT, REQUEST)
    def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: str = "dicts",
    ) -> Any:
        """Every camera, optionally of one site (all devices of a multi-device site) and/or
        one device. A list longer than the service can page (10,000) is fetched per site,
        then per device, so it is never cut short.
        """
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return self._list("cameras", output, site_id, device_id)

    @_overloads.rows_of(Report).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def reports(self, output: str = "dicts") -> Any:
        """Every report the caller may read (its ``id`` is a ``report_id`` for events)."""
        return self._list("reports", output)


class AsyncLists:
    """The lists of :class:`~surveillance.AsyncClient`, as coroutines."""

    _inner: Any

    async def _list(self, kind: str, output: str, *filters: Optional[str]) -> Any:
        _output.check(output)
        arrow = output != "dicts"
        listed = await self._inner.list(kind, *filters, arrow=arrow, awaitable=True)
        return _output.convert(listed, output) if arrow else listed

    @_overloads.rows_of(Site).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def sites(self, output: str = "dicts") -> Any:
        """Every site of the account (see :meth:`Client.sites`)."""
        return await self._list("sites", output)

    @_overloads.rows_of(Device).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def devices(self, output: str = "dicts") -> Any:
        """Every recording device of the account (see :meth:`Client.devices`)."""
        return await self._list("devices", output)

    @_overloads.CAMERAS.awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: str = "dicts",
    ) -> Any:
        """Every camera, optionally of one site and/or device (see :meth:`Client.cameras`)."""
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return await self._list("cameras", output, site_id, device_id)

    @_overloads.rows_of(Report).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def reports(self, output: str = "dicts") -> Any:
        """Every report the caller may read (see :meth:`Client.reports`)."""
        return await self._list("reports", output)
