"""The one table of settings, the config file and its profiles, and how a value is chosen.

Every setting has one name (the :class:`~surveillance.Client` argument and the config file's
key), one ``SURVEILLANCE_*`` variable and one CLI flag. A value comes from the first of: the
argument (or flag), the environment, the selected profile (``[profiles.NAME]``), the file's
``[default]`` table, the built-in default. The library, the CLI, the dlt source and the Dask
helpers all resolve through :func:`resolve`.

This module is the one reader of the ``SURVEILLANCE_*`` variables: the native client takes
the settings it resolved and reads none (``tests/check_layers.py`` holds it so). Besides the
settings, it reads the variables of the config file (:func:`config_file`), of the profile
(:func:`selected_profile`) and of the quota's ledgers (:func:`quota_dir`), and a setting's
variable alone where a command takes nothing else (:func:`variable`).

A secret goes only to the address it was configured with: a profile that sets its own
``base_url`` or ``eu_base_url`` takes no credential (``api_key``, ``client_id``,
``client_secret``) from ``[default]``, as awscli's profiles are whole, and a table's credentials
are not sent to another address given as an argument or in the environment. The credentials
held back are missing: :func:`require_credentials` names them.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Optional, Union

import platformdirs

from . import _core
from .errors import ConfigError, Name, Wording, arg, worded, wording

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.9 and 3.10
    import tomli as tomllib

__all__ = [
    "Setting",
    "SETTINGS",
    "Resolved",
    "config_file",
    "resolve",
    "require_credentials",
    "PROFILE_VARIABLE",
    "CREDENTIALS",
    "selected_profile",
    "quota_dir",
    "variable",
]

#: The variable that selects a profile, as ``--profile`` and ``profile=`` do.
PROFILE_VARIABLE = "SURVEILLANCE_PROFILE"
#: The variable that names the config file, as ``AWS_CONFIG_FILE`` does for awscli.
FILE_VARIABLE = "SURVEILLANCE_CONFIG_FILE"
#: The variable of the directory of the daily quota's ledgers (a location of this machine, not
#: a setting of the account: no flag, no key in the file).
QUOTA_DIR_VARIABLE = "SURVEILLANCE_QUOTA_DIR"
#: The account's credentials: a table's go only to the address it sets.
CREDENTIALS = ("api_key", "client_id", "client_secret")
#: The addresses the credentials are sent to.
_ADDRESSES = ("base_url", "eu_base_url")
#: How the origin of a credential held back begins (its value is None).
_HELD_BACK = "not taken from "


def _short(value: Any) -> str:
    """A value as an error message shows it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {type(value).__name__}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number, got a boolean")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number, got {_short(value)}") from None
    if number != number or number < 0:
        raise ValueError(f"must be 0 or more, got {_short(value)}")
    return number


def _about(e: ConfigError, name: str) -> str:
    """What the core's error ``e`` says of the setting ``name`` after naming it (``must be
    ...``), for a message that names it in its own way."""
    said = wording(e)
    if said.names and said.names[0].key == name and said.template.startswith("{} "):
        return Wording(said.template[3:], said.names[1:]).say()
    return said.say()


def _seconds(name: str) -> Callable[[Any], float]:
    """The check of the duration setting ``name``: a number, within the core's bounds."""

    def check(value: Any) -> float:
        number = _number(value)
        try:
            _core.check_seconds(name, number)
        except ConfigError as e:
            raise ValueError(_about(e, name)) from None
        return number

    return check


def _limited(name: str, check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The check of the limit ``name``: ``check``, then the core's bounds (0: no limit)."""

    def checked(value: Any) -> Any:
        number = check(value)
        try:
            _core.check_limits(**{name: number or None})
        except ConfigError as e:
            raise ValueError(_about(e, name)) from None
        return number

    return checked


def _count(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("must be a whole number, got a boolean")
    try:
        number = int(str(value).strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a whole number, got {_short(value)}") from None
    if number != value and not isinstance(value, str) or number < 0:
        raise ValueError(f"must be a whole number, 0 or more, got {_short(value)}")
    return number


def _switch(value: Any) -> bool:
    """On or off: a TOML bool, or ``1``/``0``, ``true``/``false``, ``on``/``off``,
    ``yes``/``no`` in a variable or an option."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no"):
        return False
    raise ValueError(f"must be 1 or 0 (true or false), got `{_short(value)}`")


def _region(value: Any) -> str:
    region = _text(value).strip().lower()
    if region not in _core.REGIONS:
        raise ValueError(f"must be {' or '.join(_core.REGIONS)}, got {_short(value)}")
    return region


def _cache(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return _text(value)


@dataclass(frozen=True)
class Setting:
    """One setting: its name (the :class:`~surveillance.Client` argument and the config
    file's key), its environment variable, its CLI flag, its built-in default (None: none),
    the check that turns a text or TOML value into the setting's value, whether it is a
    secret (never printed; read from a config file only when the file is private to the
    user), and a line of help."""

    name: str
    variable: str
    flag: str
    default: Any
    check: Callable[[Any], Any]
    secret: bool = False
    help: str = ""


def _setting(
    name: str, default: Any, check: Callable[[Any], Any], secret: bool, help: str
) -> Setting:
    """The setting ``name``, its variable and flag named after it."""
    variable, flag = f"SURVEILLANCE_{name.upper()}", "--" + name.replace("_", "-")
    return Setting(name, variable, flag, default, check, secret, help)


def _limit(
    name: str, check: Callable[[Any], Any], help: str
) -> tuple[str, Any, Callable[[Any], Any], bool, str]:
    """The row of the limit ``name``, its default the provider's published limit as the core
    states it (``_core.PUBLISHED_LIMITS``), never restated here."""
    return (name, _core.PUBLISHED_LIMITS[name], _limited(name, check), False, help)


#: Every setting, in the order ``surveillance config`` shows them; the defaults of the timeout,
#: the outage and the limits are the core's. Rates and the daily quota take 0 for "no limit".
SETTINGS: tuple[Setting, ...] = tuple(
    _setting(*row)
    for row in [
        ("base_url", None, _text, False, "the service's address, without /v2"),
        ("api_key", None, _text, True, "the organization's API key"),
        ("client_id", None, _text, False, "OAuth client id"),
        ("client_secret", None, _text, True, "OAuth client secret"),
        ("eu_base_url", None, _text, False, "the EU webhook's address"),
        ("region", _core.REGIONS[0], _region, False, "us or eu: where publish posts"),
        ("audience", None, _text, False, "the token audience (default: the base URL)"),
        ("ca_bundle", None, _text, False, "extra trusted certificates (a PEM file)"),
        ("timeout", _core.DEFAULT_TIMEOUT_S, _seconds("timeout"), False, "seconds per request"),
        (
            "max_outage",
            _core.DEFAULT_MAX_OUTAGE_S,
            _seconds("max_outage"),
            False,
            "seconds a call rides out an unreachable service",
        ),
        _limit("read_per_second", _number, "read requests a second (0: no limit)"),
        _limit("read_concurrency", _count, "read requests in flight (0: no limit)"),
        _limit("publish_per_second", _number, "webhook posts a second (0: no limit)"),
        _limit("publish_concurrency", _count, "webhook posts in flight (0: no limit)"),
        _limit("daily_requests", _count, "requests a day with the key (0: no limit)"),
        (
            "trace_context",
            True,
            _switch,
            False,
            "send the W3C traceparent of the caller's trace (0: never)",
        ),
        (
            "cache",
            None,
            _cache,
            False,
            "the cache of settled events: 1, 0 or a directory (default: on, but off for a "
            "loopback base URL)",
        ),
    ]
)
_BY_NAME = {s.name: s for s in SETTINGS}


class Resolved(NamedTuple):
    """A setting's effective value and where it came from: ``"argument"``, ``"environment"``,
    ``"profile NAME"``, ``"[default]"`` or ``"default"`` (built in); a credential of the file
    held back (its value None) says why: ``"not taken from [default]: profile NAME sets its
    own `base_url`"``."""

    value: Any
    origin: str


def _environ(environ: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def config_file(environ: Optional[Mapping[str, str]] = None) -> str:
    """The config file's path: ``SURVEILLANCE_CONFIG_FILE``, else ``config.toml`` in the
    user's config directory (platformdirs: ``~/.config/surveillance`` on Linux)."""
    named = _environ(environ).get(FILE_VARIABLE)
    if named:
        return os.path.expanduser(named)

    return os.path.join(
        platformdirs.user_config_dir("surveillance", appauthor=False), "config.toml"
    )


def selected_profile(
    profile: Optional[str] = None, environ: Optional[Mapping[str, str]] = None
) -> Optional[str]:
    """The profile chosen: ``profile``, else ``SURVEILLANCE_PROFILE``, else None (the file's
    ``[default]`` alone)."""
    return profile if profile is not None else _environ(environ).get(PROFILE_VARIABLE) or None


def quota_dir(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The directory of the daily quota's ledgers that ``SURVEILLANCE_QUOTA_DIR`` names, or
    None (blank too) for the user's cache directory's, as the native client places it."""
    named = _environ(environ).get(QUOTA_DIR_VARIABLE)
    return named if named is not None and named.strip() else None


def variable(name: str, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The text of the variable of the setting ``name`` alone, stripped, or None when it is
    unset or blank: for a command that reads no config file (``surveillance cache``)."""
    raw = _environ(environ).get(_BY_NAME[name].variable)
    return raw.strip() if raw is not None and raw.strip() else None


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
            mode = os.fstat(f.fileno()).st_mode
    except FileNotFoundError:  # no file: no profile, as for awscli
        return {}
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"the config file {path} is not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"the config file {path} cannot be read: {e.strerror}") from None
    data["__private__"] = os.name != "posix" or not (mode & (stat.S_IRWXG | stat.S_IRWXO))
    return data


def _refuse_shared_secrets(data: Mapping[str, Any], path: str) -> None:
    """Refuses a file that other users can read and that holds a secret in any of its tables,
    the profiles not selected included (as ssh refuses such a key file)."""
    if data.get("__private__", True):
        return
    profiles = data.get("profiles")
    tables = [data.get("default")]
    tables += list(profiles.values()) if isinstance(profiles, dict) else []
    for table in tables:
        for key in table if isinstance(table, dict) else ():
            setting = _BY_NAME.get(key)
            if setting is not None and setting.secret:
                raise ConfigError(
                    f"{path} holds the secret `{key}` but other users can read it: "
                    f"run `chmod 600 {path}`"
                )


def _table(path: str, where: str, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} in {path} must be a table")
    out = {}
    for key, value in table.items():
        setting = _BY_NAME.get(key)
        if setting is None:
            known = ", ".join(_BY_NAME)
            raise ConfigError(f"unknown key `{key}` in {where} of {path} (known: {known})")
        out[key] = _checked(setting, value, f"`{key}` in {where} of {path}")
    return out


def check(setting: Setting, value: Any, where: str) -> Any:
    """``value`` checked as ``setting`` says; a bad one is a :class:`ConfigError` that names
    ``where`` it came from and the setting."""
    return _checked(setting, value, arg(setting.name), f" of {where}")


def _checked(setting: Setting, value: Any, *where: Union[str, Name]) -> Any:
    """``setting.check(value)``; a bad value is a :class:`ConfigError` saying ``where`` (text,
    and the names it holds) it came from, then what is wrong."""
    try:
        return setting.check(value)
    except ValueError as e:
        raise worded(ConfigError, *where, f" {e}") from None


def resolve(
    given: Optional[Mapping[str, Any]] = None,
    *,
    profile: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> dict[str, Resolved]:
    """Every setting's effective value and origin: the argument in ``given`` (None: not
    given), else its ``SURVEILLANCE_*`` variable, else the selected profile (``profile``,
    else ``SURVEILLANCE_PROFILE``), else the file's ``[default]``, else the built-in default.
    A credential is held back (None) where it would go to another address than that of the
    table it comes from (see the module).

    Raises:
        ConfigError: the file is not valid TOML, has an unknown key or a bad value, holds a
            secret while other users can read it, or the selected profile is not in it.
    """
    env = _environ(environ)
    given = given or {}
    path = config_file(env)
    data = _read_file(path)
    _refuse_shared_secrets(data, path)
    tables: list[tuple[str, dict[str, Any]]] = []
    name = selected_profile(profile, env)
    if name is not None:
        profiles = data.get("profiles", {})
        if not isinstance(profiles, dict) or name not in profiles:
            raise ConfigError(
                f"no profile `{name}` in {path}: add a [profiles.{name}] table, or choose "
                f"another with --profile or {PROFILE_VARIABLE}"
            )
        tables.append((f"profile {name}", _table(path, f"[profiles.{name}]", profiles[name])))
    if "default" in data:
        tables.append(("[default]", _table(path, "[default]", data["default"])))
    out = {}
    for s in SETTINGS:
        if given.get(s.name) is not None:
            out[s.name] = Resolved(given[s.name], "argument")
            continue
        raw = env.get(s.variable)
        if raw is not None and raw.strip() != "":
            where = (f"`{s.variable}` (the variable of ", arg(s.name), ")")
            out[s.name] = Resolved(_checked(s, raw, *where), "environment")
            continue
        for origin, table in tables:
            if s.name in table:
                out[s.name] = Resolved(table[s.name], origin)
                break
        else:
            out[s.name] = Resolved(s.default, "default")
    for key, why in _held_back(tables, out).items():
        out[key] = Resolved(None, why)
    return out


def _address(value: Any) -> Optional[str]:
    """A base URL as written, compared without the ``/v2`` and ``/`` that may end it."""
    if value is None:
        return None
    text = str(value).strip().rstrip("/")
    return text[: -len("/v2")].rstrip("/") if text.endswith("/v2") else text


def _held_back(
    tables: list[tuple[str, dict[str, Any]]], out: Mapping[str, Resolved]
) -> dict[str, str]:
    """The credentials that ``out`` takes from a table of the file but that would go to another
    address than the table's, each with why (the origin ``surveillance config`` shows)."""
    origins = [origin for origin, _ in tables]
    profile = tables[0] if origins and origins[0].startswith("profile ") else None
    own = [a for a in _ADDRESSES if profile is not None and a in profile[1]]
    held = {}
    for key in CREDENTIALS:
        origin = out[key].origin
        if origin not in origins:
            continue
        if origin == "[default]" and profile is not None and own:
            addresses = " and ".join(f"`{a}`" for a in own)
            held[key] = f"{_HELD_BACK}[default]: {profile[0]} sets its own {addresses}"
            continue
        # The addresses the table sets, or inherits from [default].
        chain = [table for _, table in tables[origins.index(origin) :]]
        for a in _ADDRESSES:
            configured = next((t[a] for t in chain if a in t), None)
            if configured is not None and _address(out[a].value) != _address(configured):
                given = "an argument" if out[a].origin == "argument" else "the environment"
                held[key] = f"{_HELD_BACK}{origin}: `{a}` is another, given by {given}"
                break
    return held


def require_credentials(resolved: Mapping[str, Resolved], *, path: Optional[str] = None) -> None:
    """Raises :class:`ConfigError` when :func:`resolve` held back credentials of the config
    file (a secret goes only to the address it was configured with), naming the profile and
    each of them, and where to give them."""
    held = [k for k in CREDENTIALS if resolved[k].value is None and _held(resolved[k].origin)]
    if not held:
        return
    why = resolved[held[0]].origin.removeprefix(_HELD_BACK)
    names = ", ".join(f"`{k}`" for k in held)
    variables = ", ".join(_BY_NAME[k].variable for k in held)
    table, reason = why.split(": ", 1)
    if reason.startswith("profile "):
        name = reason.split(" ")[1]
        where = f"add them to [profiles.{name}]" + (f" of {path}" if path else "")
    else:
        where = "give them with that address (argument or environment)"
    raise ConfigError(
        f"missing {names}: not taken from {table}, as {reason} (a secret goes only to the "
        f"address it was configured with); {where}, or set {variables}"
    )


def _held(origin: str) -> bool:
    """Whether ``origin`` is that of a credential held back."""
    return origin.startswith(_HELD_BACK)


def shown(setting: Setting, value: Any) -> str:
    """The value as ``surveillance config`` prints it: a secret masked but for its last 4
    characters when it is long enough (as ``aws configure list`` does), None as ``-``."""
    if value is None:
        return "-"
    if setting.secret:
        text = str(value)
        return "****" + text[-4:] if len(text) >= 16 else "****"
    return str(value)
