"""What the schedulers' integrations share (:mod:`surveillance.airflow`,
:mod:`surveillance.dagster`): the settings a scheduler's own store holds, checked as the
settings table says and turned into a :class:`~surveillance.Client`'s arguments, and the wait
until a daily quota comes back."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Mapping, Optional

from . import _config
from .client import _LIMITS, Limits
from .errors import ConfigError

#: The settings a scheduler's store may hold, by name: every one of the settings table.
SETTING_NAMES = tuple(s.name for s in _config.SETTINGS)
_BY_NAME = {s.name: s for s in _config.SETTINGS}


def client_arguments(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``values`` (settings by name; None: not set) as :class:`~surveillance.Client`'s
    keyword arguments: each checked as the settings table says (a bad one is a
    :class:`ConfigError` naming ``where`` and the setting), the limits gathered in one
    :class:`~surveillance.Limits` (0 lifts one, an absent one is the provider's published
    limit). What ``values`` leaves out, the client reads as ``Client()`` does: from the
    ``SURVEILLANCE_*`` variables, then the config file.

    >>> client_arguments({"base_url": "http://127.0.0.1:8080", "daily_requests": 0}, "here")
    {'base_url': 'http://127.0.0.1:8080', 'limits': Limits(read_per_second=1.0, \
read_concurrency=3, publish_per_second=100.0, publish_concurrency=200, daily_requests=None)}

    Raises:
        ConfigError: an unknown setting, or a value the setting refuses.
    """
    unknown = sorted(set(values) - set(SETTING_NAMES))
    if unknown:
        raise ConfigError(
            f"{where}: unknown setting {', '.join(f'`{k}`' for k in unknown)}; the settings are "
            f"{', '.join(SETTING_NAMES)}"
        )
    given = {k: _config.check(_BY_NAME[k], v, where) for k, v in values.items() if v is not None}
    out = {k: v for k, v in given.items() if k not in _LIMITS}
    if any(k in given for k in _LIMITS):
        published = Limits()
        out["limits"] = Limits(
            **{n: (given[n] or None) if n in given else getattr(published, n) for n in _LIMITS}
        )
    return out


def require(values: Mapping[str, Any], names: Mapping[str, str], where: str) -> None:
    """Raises :class:`ConfigError` naming ``where`` and the first of ``names`` (setting: where
    it is written) that ``values`` lacks."""
    for name, field in names.items():
        value = values.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ConfigError(f"{where} has no {field}: set it to the {_what(name)}")


def _what(name: str) -> str:
    return _BY_NAME[name].help or name


def seconds_until(moment: Optional[_dt.datetime], *, least: float = 1.0) -> float:
    """Seconds from now until ``moment`` (at least ``least``; ``least`` when None)."""
    if moment is None:
        return least
    now = _dt.datetime.now(_dt.timezone.utc)
    return max(least, (moment - now).total_seconds())
