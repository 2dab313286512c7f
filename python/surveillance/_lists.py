"""The list methods of both clients (``sites``, ``devices``, ``cameras``, ``reports``), typed
per ``output``: with the core's list table (``src/client/lists.rs``), the emulator's
(``src/emulator/data/listings.rs``) and the record's ``TypedDict``
(:mod:`surveillance.types`), the one place a new list endpoint is added to. The CLI and the
dlt source take the lists from the core's table (``_core.LISTS``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from . import _check, _output, _overloads
from ._meter import ametered, metered
from ._raises import OUTPUT, REQUEST, raises
from .types import Camera, Device, Output, Report, Site

if TYPE_CHECKING:
    # The results of ``output=``, for the signatures that help() and the reference show.
    import pandas
    import polars
    import pyarrow


#: What a list gives, whatever its records: each method's annotation names its own.
_Listed = Union[list[Any], "pyarrow.Table", "pandas.DataFrame", "polars.DataFrame"]


class Lists:
    """The lists of :class:`~surveillance.Client`."""

    _inner: Any

    def _list(self, kind: str, output: str, *filters: Optional[str]) -> _Listed:
        _output.check(output)
        listed: _Listed
        if output == "dicts":
            listed = self._inner.list(kind, *filters)
        else:
            listed = _output.convert(self._inner.list(kind, *filters, arrow=True), output)
        return listed

    @_overloads.rows_of(Site).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def sites(
        self, output: Output = "dicts"
    ) -> Union[list[Site], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every site of the account (all pages).

        Args:
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"`` (a ``pyarrow.Table``), ``"pandas"`` or ``"polars"`` (a
                ``DataFrame``): a typed table, the same columns on every call.

        Returns:
            A list of :class:`~surveillance.types.Site` for ``output="dicts"``, else the
            table asked for, one row per site.

        Example:
            >>> sites = client.sites()
            >>> len(sites), all(site["timezone"] for site in sites)  # IANA names
            (3, True)
            >>> client.sites(output="pandas").shape[0]
            3
        """
        return self._list("sites", output)

    @_overloads.rows_of(Device).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def devices(
        self, output: Output = "dicts"
    ) -> Union[list[Device], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every recording device of the account (all pages).

        Args:
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"`` (a ``pyarrow.Table``), ``"pandas"`` or ``"polars"`` (a
                ``DataFrame``): a typed table, the same columns on every call.

        Returns:
            A list of :class:`~surveillance.types.Device` for ``output="dicts"``, else the
            table asked for, one row per device.

        Example:
            >>> devices = client.devices()
            >>> {d["siteId"] for d in devices} <= {s["id"] for s in client.sites()}
            True
        """
        return self._list("devices", output)

    @_overloads.CAMERAS.sync
    @metered
    @raises(OUTPUT, REQUEST)
    def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: Output = "dicts",
    ) -> Union[list[Camera], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every camera, optionally of one site (all devices of a multi-device site) and/or
        one device. A list longer than the service can page (10,000) is fetched per site,
        then per device, so it is never cut short.

        Args:
            site_id: only the cameras of this site (see :meth:`sites`).
            device_id: only the cameras of this device (see :meth:`devices`).
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"`` (a ``pyarrow.Table``), ``"pandas"`` or ``"polars"`` (a
                ``DataFrame``): a typed table, the same columns on every call.

        Returns:
            A list of :class:`~surveillance.types.Camera` for ``output="dicts"``, else the
            table asked for, one row per camera.

        Example:
            >>> site = client.sites()[0]["id"]
            >>> cameras = client.cameras(site_id=site)
            >>> all(c["siteId"] == site for c in cameras)
            True
            >>> client.cameras(site_id=site, output="arrow").num_rows == len(cameras)
            True
        """
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return self._list("cameras", output, site_id, device_id)

    @_overloads.rows_of(Report).sync
    @metered
    @raises(OUTPUT, REQUEST)
    def reports(
        self, output: Output = "dicts"
    ) -> Union[list[Report], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every report the caller may read (its ``id`` is a ``report_id`` for events).

        Args:
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"`` (a ``pyarrow.Table``), ``"pandas"`` or ``"polars"`` (a
                ``DataFrame``): a typed table, the same columns on every call.

        Returns:
            A list of :class:`~surveillance.types.Report` for ``output="dicts"``, else the
            table asked for, one row per report.

        Example:
            >>> report = client.reports()[0]
            >>> events = client.events(emu.start, emu.end, report_id=report["id"])
            >>> len(events) <= len(client.events(emu.start, emu.end))
            True
        """
        return self._list("reports", output)


class AsyncLists:
    """The lists of :class:`~surveillance.AsyncClient`, as coroutines."""

    _inner: Any

    async def _list(self, kind: str, output: str, *filters: Optional[str]) -> _Listed:
        _output.check(output)
        arrow = output != "dicts"
        listed: _Listed = await self._inner.list(kind, *filters, arrow=arrow, awaitable=True)
        if arrow:
            listed = _output.convert(listed, output)
        return listed

    @_overloads.rows_of(Site).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def sites(
        self, output: Output = "dicts"
    ) -> Union[list[Site], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every site of the account (see :meth:`Client.sites`).

        Args:
            output: as for :meth:`Client.sites`.

        Returns:
            A coroutine of what :meth:`Client.sites` returns.

        Example:
            >>> import asyncio
            >>> len(asyncio.run(async_client.sites()))
            3
        """
        return await self._list("sites", output)

    @_overloads.rows_of(Device).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def devices(
        self, output: Output = "dicts"
    ) -> Union[list[Device], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every recording device of the account (see :meth:`Client.devices`).

        Args:
            output: as for :meth:`Client.devices`.

        Returns:
            A coroutine of what :meth:`Client.devices` returns.

        Example:
            >>> import asyncio
            >>> len(asyncio.run(async_client.devices())) == len(client.devices())
            True
        """
        return await self._list("devices", output)

    @_overloads.CAMERAS.awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: Output = "dicts",
    ) -> Union[list[Camera], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every camera, optionally of one site and/or device (see :meth:`Client.cameras`).

        Args:
            site_id, device_id, output: as for :meth:`Client.cameras`.

        Returns:
            A coroutine of what :meth:`Client.cameras` returns.

        Example:
            >>> import asyncio
            >>> len(asyncio.run(async_client.cameras(output="polars"))) == len(client.cameras())
            True
        """
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return await self._list("cameras", output, site_id, device_id)

    @_overloads.rows_of(Report).awaited
    @ametered
    @raises(OUTPUT, REQUEST)
    async def reports(
        self, output: Output = "dicts"
    ) -> Union[list[Report], pyarrow.Table, pandas.DataFrame, polars.DataFrame]:
        """Every report the caller may read (see :meth:`Client.reports`).

        Args:
            output: as for :meth:`Client.reports`.

        Returns:
            A coroutine of what :meth:`Client.reports` returns.

        Example:
            >>> import asyncio
            >>> reports = asyncio.run(async_client.reports())
            >>> [r["id"] for r in reports] == [r["id"] for r in client.reports()]
            True
        """
        return await self._list("reports", output)
