"""The list methods of both clients (``sites``, ``devices``, ``cameras``, ``reports``), typed
per ``output``: with the core's list table (``src/client/lists.rs``), the emulator's
(``src/emulator/data.rs``) and the record's ``TypedDict`` (:mod:`surveillance.types`), the
one place a new list endpoint is added to. The CLI and the dlt source take the lists from
the core's table (``_core.LISTS``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Optional, overload

from . import _check, _output
from ._meter import ametered, metered
from .types import Camera, Device, Report, Site

if TYPE_CHECKING:
    # For the return types of ``output=`` only: none of them is needed at run time.
    import pandas
    import polars
    import pyarrow


class Lists:
    """The lists of :class:`~surveillance.Client`."""

    _inner: Any

    def _list(self, kind: str, output: str, *filters: Optional[str]) -> Any:
        _output.check(output)
        if output == "dicts":
            return self._inner.list_dicts(kind, *filters)
        return _output.convert(self._inner.list_arrow(kind, *filters), output)

    @overload
    def sites(self, output: Literal["dicts"] = ...) -> list[Site]: ...
    @overload
    def sites(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    def sites(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    def sites(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @metered
    def sites(self, output: str = "dicts") -> Any:
        """Every site of the account (all pages).

        Args:
            output: ``"dicts"`` (a list of dicts exactly as the service sends them),
                ``"arrow"``, ``"pandas"`` or ``"polars"`` (a typed table).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return self._list("sites", output)

    @overload
    def devices(self, output: Literal["dicts"] = ...) -> list[Device]: ...
    @overload
    def devices(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    def devices(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    def devices(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @metered
    def devices(self, output: str = "dicts") -> Any:
        """Every recording device of the account (all pages).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return self._list("devices", output)

    @overload
    def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["dicts"] = ...,
    ) -> list[Camera]: ...
    @overload
    def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["arrow"]
    ) -> pyarrow.Table: ...
    @overload
    def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["arrow"],
    ) -> pyarrow.Table: ...
    @overload
    def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["pandas"]
    ) -> pandas.DataFrame: ...
    @overload
    def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["pandas"],
    ) -> pandas.DataFrame: ...
    @overload
    def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["polars"]
    ) -> polars.DataFrame: ...
    @overload
    def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["polars"],
    ) -> polars.DataFrame: ...
    @metered
    def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: str = "dicts",
    ) -> Any:
        """Every camera, optionally of one site (all devices of a multi-device site) and/or
        one device. A list longer than the service can page (10,000) is fetched per site,
        then per device, so it is never cut short.

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return self._list("cameras", output, site_id, device_id)

    @overload
    def reports(self, output: Literal["dicts"] = ...) -> list[Report]: ...
    @overload
    def reports(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    def reports(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    def reports(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @metered
    def reports(self, output: str = "dicts") -> Any:
        """Every report the caller may read (its ``id`` is a ``report_id`` for events).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return self._list("reports", output)


class AsyncLists:
    """The lists of :class:`~surveillance.AsyncClient`, as coroutines."""

    _inner: Any

    async def _list(self, kind: str, output: str, *filters: Optional[str]) -> Any:
        _output.check(output)
        if output == "dicts":
            return await self._inner.list_dicts_async(kind, *filters)
        return _output.convert(await self._inner.list_arrow_async(kind, *filters), output)

    @overload
    async def sites(self, output: Literal["dicts"] = ...) -> list[Site]: ...
    @overload
    async def sites(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    async def sites(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    async def sites(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @ametered
    async def sites(self, output: str = "dicts") -> Any:
        """Every site of the account (see :meth:`Client.sites`).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return await self._list("sites", output)

    @overload
    async def devices(self, output: Literal["dicts"] = ...) -> list[Device]: ...
    @overload
    async def devices(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    async def devices(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    async def devices(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @ametered
    async def devices(self, output: str = "dicts") -> Any:
        """Every recording device of the account (see :meth:`Client.devices`).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return await self._list("devices", output)

    @overload
    async def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        output: Literal["dicts"] = ...,
    ) -> list[Camera]: ...
    @overload
    async def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["arrow"]
    ) -> pyarrow.Table: ...
    @overload
    async def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["arrow"],
    ) -> pyarrow.Table: ...
    @overload
    async def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["pandas"]
    ) -> pandas.DataFrame: ...
    @overload
    async def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["pandas"],
    ) -> pandas.DataFrame: ...
    @overload
    async def cameras(
        self, site_id: Optional[str], device_id: Optional[str], output: Literal["polars"]
    ) -> polars.DataFrame: ...
    @overload
    async def cameras(
        self,
        site_id: Optional[str] = ...,
        device_id: Optional[str] = ...,
        *,
        output: Literal["polars"],
    ) -> polars.DataFrame: ...
    @ametered
    async def cameras(
        self,
        site_id: Optional[str] = None,
        device_id: Optional[str] = None,
        output: str = "dicts",
    ) -> Any:
        """Every camera, optionally of one site and/or device (see :meth:`Client.cameras`).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        _check.text("site_id", site_id, optional=True, longest=100)
        _check.text("device_id", device_id, optional=True, longest=100)
        return await self._list("cameras", output, site_id, device_id)

    @overload
    async def reports(self, output: Literal["dicts"] = ...) -> list[Report]: ...
    @overload
    async def reports(self, output: Literal["arrow"]) -> pyarrow.Table: ...
    @overload
    async def reports(self, output: Literal["pandas"]) -> pandas.DataFrame: ...
    @overload
    async def reports(self, output: Literal["polars"]) -> polars.DataFrame: ...
    @ametered
    async def reports(self, output: str = "dicts") -> Any:
        """Every report the caller may read (see :meth:`Client.reports`).

        Raises:
            ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string).
            AuthError: the service refused the credentials.
            QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
                left (``.resets_at`` says when it comes back); nothing more was sent.
            ApiError: the service answered an error status, or an answer that is not its own, after
                the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
                (429) or ``ServerError`` (5xx).
            TransportError: no usable answer (connection, TLS or timeout) after the retries.
        """
        return await self._list("reports", output)
