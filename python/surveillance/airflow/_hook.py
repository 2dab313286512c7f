"""The Airflow hook: a connection of type ``surveillance`` as a client of the service."""

from __future__ import annotations

import json
from typing import Any, Optional, Tuple

from .. import _scheduling
from .._airflow_provider import CONN_TYPE, HOOK_NAME
from ..aio import AsyncClient
from ..client import Client
from ..errors import ConfigError

try:
    from airflow.sdk import BaseHook  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - Airflow 2
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef, attr-defined, import-not-found, unused-ignore]

#: The connection's fields that hold settings, and the setting each holds; every other setting
#: is a key of its extra.
_FIELDS = {"base_url": "host", "client_id": "login", "client_secret": "password"}
#: What a client cannot do without, and where the connection keeps it.
_REQUIRED = {
    "base_url": "host (the service's base URL)",
    "client_id": "login (the OAuth client id)",
    "client_secret": "password (the OAuth client secret)",
    "api_key": "`api_key` in its extra",
}


class SurveillanceHook(BaseHook):  # type: ignore[misc, unused-ignore]
    """A client of the service from an Airflow connection of type ``surveillance``.

    The connection holds every setting of the settings table (see
    :doc:`/guide/configuration`): the host is the base URL (``https://api.example.com``; a host
    without a scheme is taken as ``https://``, with the connection's port when it has one),
    the login the client id, the password the client secret, and the extra a JSON object of
    the other settings under their names: ``api_key`` (required), ``region``,
    ``eu_base_url``, ``audience``, ``ca_bundle``, ``timeout``, ``max_outage``, the limits
    (``read_per_second``, ``read_concurrency``, ``publish_per_second``,
    ``publish_concurrency``, ``daily_requests``; 0 lifts one) and ``cache``. The connection
    comes from wherever the deployment keeps them: the metadata database, an
    ``AIRFLOW_CONN_SURVEILLANCE_DEFAULT`` variable, or a secrets backend (Vault, AWS Secrets
    Manager, Google Secret Manager ...).

    Args:
        surveillance_conn_id: the connection's id.

    Example:
        >>> import json, os, surveillance as sv
        >>> from surveillance.airflow import SurveillanceHook
        >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        ...     os.environ["AIRFLOW_CONN_SURVEILLANCE_DEFAULT"] = json.dumps({
        ...         "conn_type": "surveillance", "host": emu.url, "login": emu.client_id,
        ...         "password": emu.client_secret,
        ...         "extra": {"api_key": emu.api_key, "audience": emu.audience,
        ...                   "daily_requests": 0}})
        ...     with SurveillanceHook().get_client() as client:
        ...         len(client.sites())
        2
        >>> del os.environ["AIRFLOW_CONN_SURVEILLANCE_DEFAULT"]
    """

    conn_name_attr = "surveillance_conn_id"
    default_conn_name = "surveillance_default"
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, surveillance_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.surveillance_conn_id = surveillance_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form of Airflow's UI: the fields renamed after what they hold, the
        unused ones hidden, and the extra's settings shown as a placeholder."""
        return {
            "hidden_fields": ["schema"],
            "relabeling": {
                "host": "Base URL",
                "login": "Client ID",
                "password": "Client secret",
            },
            "placeholders": {
                "host": "https://api.example.com",
                "extra": json.dumps(
                    {"api_key": "...", "region": "us", "daily_requests": 2400, "cache": "1"}
                ),
            },
        }

    def settings(self) -> dict[str, Any]:
        """The connection's settings by name, checked (secrets included: never log them).

        Raises:
            ConfigError: a field the client needs is missing (the message names the connection
                and the field), the extra is not a JSON object, or holds an unknown setting or
                a bad value.
        """
        conn = self.get_connection(self.surveillance_conn_id)
        where = f"the Airflow connection `{self.surveillance_conn_id}`"
        extra = _extra(conn, where)
        clashes = sorted(set(extra) & set(_FIELDS))
        if clashes:
            raise ConfigError(
                f"{where}: {', '.join(f'`{k}`' for k in clashes)} belongs in the connection's "
                f"{' and '.join(_FIELDS[k] for k in clashes)}, not in its extra"
            )
        values: dict[str, Any] = dict(extra)
        values["base_url"] = _base_url(conn.host, conn.port)
        values["client_id"] = conn.login or None
        values["client_secret"] = conn.password or None
        _scheduling.require(values, _REQUIRED, where)
        return _scheduling.client_arguments(values, where)

    def get_client(self, **kwargs: Any) -> Client:
        """A :class:`~surveillance.Client` of the connection's settings (``kwargs`` override
        them: ``max_retries=``, ``trust_env=`` ...). Close it when done (``with``).

        Raises:
            ConfigError: see :meth:`settings`.
        """
        return Client(**{**self.settings(), **kwargs})

    def get_async_client(self, **kwargs: Any) -> AsyncClient:
        """An :class:`~surveillance.AsyncClient` of the connection's settings, for a trigger
        or other asyncio code (see :meth:`get_client`).

        Raises:
            ConfigError: see :meth:`settings`.
        """
        return AsyncClient(**{**self.settings(), **kwargs})

    def get_conn(self) -> Client:
        """:meth:`get_client`, under the name Airflow's hooks share."""
        return self.get_client()

    def test_connection(self) -> Tuple[bool, str]:
        """The test button of Airflow's connection form: whether the service issues a token
        for the connection's credentials (one request to its token endpoint, none of the
        daily quota's data requests)."""
        try:
            settings = self.settings()
            with Client(**settings) as client:
                client.access_token()
            return True, f"connected: {settings['base_url']} issued a token"
        except Exception as e:  # the form shows the reason; the message holds no secret
            return False, f"{type(e).__name__}: {e}"


def _extra(conn: Any, where: str) -> dict[str, Any]:
    """The connection's extra, a JSON object."""
    try:
        extra = conn.extra_dejson
    except Exception:  # Airflow 2 logs and returns {} where 3 raises
        extra = None
    if not isinstance(extra, dict) or (not extra and (conn.extra or "").strip() not in ("", "{}")):
        raise ConfigError(f"{where}: its extra must be a JSON object of settings by name")
    return extra


def _base_url(host: Optional[str], port: Optional[int]) -> Optional[str]:
    """The base URL of a connection's host: as it is when it has a scheme, else ``https://``
    (a URI-form connection, ``surveillance://id:secret@api.example.com``, has a bare host)."""
    if not host or not host.strip():
        return None
    host = host.strip()
    if "://" not in host:
        host = f"https://{host}"
        if port:
            host = f"{host}:{port}"
    return host
