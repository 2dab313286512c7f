"""The ``config``, ``quota`` and ``cache`` commands."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from typing import Optional

from .. import _config, _core
from .._time import to_ms
from ._common import _client, _client_arguments, _given


def _config_arguments(p: argparse.ArgumentParser) -> None:
    _client_arguments(p)


def _config_show(args: argparse.Namespace) -> int:
    """Prints each effective setting, its value (secrets masked) and where it came from, as
    ``aws configure list`` does; sends no request."""
    profile = getattr(args, "profile", None)
    resolved = _config.resolve(_given(args), profile=profile)
    path = _config.config_file()
    origins = {"argument": "option", "environment": "env"}
    rows = []
    for setting in _config.SETTINGS:
        value, origin = resolved[setting.name]
        where = origins.get(origin, origin)
        if origin == "environment":
            where = f"env {setting.variable}"
        elif origin == "argument":
            where = f"option {setting.flag}"
        elif origin != "default":
            where = f"{origin} ({path})"
        shown = _config.shown(setting, value)
        if setting.name == "cache":
            shown = _cache_rule(value, resolved["base_url"].value)
        rows.append((setting.name, shown, where))
    chosen = _config.selected_profile(profile) or "-"
    print(f"config file: {path}{'' if os.path.exists(path) else ' (none)'}")
    print(f"profile: {chosen}")
    width = max(len(r[0]) for r in rows)
    value_width = min(40, max(len(r[1]) for r in rows))
    for name, shown, where in rows:
        print(f"  {name:<{width}}  {shown:<{value_width}}  {where}")
    return 0


def _cache_rule(value: Optional[str], base_url: Optional[str]) -> str:
    """Whether the cache is on, in words: the rule of ``Client(cache=...)``."""
    if value is None:
        host = (base_url or "").split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
        if host in ("localhost", "127.0.0.1", "[::1]") or host.startswith("127."):
            return "off (loopback base URL; set cache = 1 to keep one)"
        return "on (the user's cache directory)"
    on = _core.CACHE_SWITCHES.get(value.strip().lower())
    if on is False:
        return f"off ({value})"
    if on:
        return f"on ({value}: the user's cache directory)"
    return f"on, in {value}"


# --- emulator -------------------------------------------------------------------------


def _quota_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object instead of the lines")
    _client_arguments(p)


def _quota(args: argparse.Namespace) -> int:
    """Prints where the day's request quota of the key and service stands, read from this
    machine's ledger: no request is sent."""
    client = _client(args)
    q = client.quota()
    resets = q["resets_at"].astimezone(dt.timezone.utc)
    if args.json:
        shown = dict(q, resets_at=resets.strftime("%Y-%m-%dT%H:%M:%SZ"))
        print(json.dumps(shown))
        return 0
    left = max(0, int((resets - dt.datetime.now(dt.timezone.utc)).total_seconds()) // 60)
    limit = q["limit"]
    rows = [
        ("limit", "none (--daily-requests 0)" if limit is None else f"{limit:,} requests a day"),
        ("used", f"{q['used']:,} today (the service's UTC day)"),
        ("remaining", "no limit" if q["remaining"] is None else f"{q['remaining']:,}"),
        ("resets at", f"{resets:%Y-%m-%d %H:%M} UTC (in {left // 60} h {left % 60:02d} min)"),
    ]
    print(f"daily request quota of this API key at {client._inner.base_url.rstrip('/')}")
    for name, value in rows:
        print(f"  {name:<10} {value}")
    print("  counted by every client of this machine (other machines with the key count apart)")
    return 0


# --- events ---------------------------------------------------------------------------
#: The forms of a time option, in its help.


# --- cache ----------------------------------------------------------------------------
def _cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("info", "clear"),
        help="info: what the cache of settled events holds; clear: empty it",
    )
    p.add_argument(
        "--dir",
        metavar="DIR",
        help="the cache directory, as `cache=` names it (default: SURVEILLANCE_CACHE when it "
        "names one, else the user's cache directory's); clear refuses one that the cache did "
        "not mark as its own (CACHEDIR.TAG)",
    )
    p.add_argument("--json", action="store_true", help="info: one JSON object instead of lines")


def _cache(args: argparse.Namespace) -> int:
    """Shows or empties the cache of settled events; no request is sent."""

    where = args.dir if args.dir else _core.cache_location(_config.variable("cache"))
    if where is None:
        raise ValueError("no cache directory: pass --dir DIR or set SURVEILLANCE_CACHE")
    # The cache's root: `where`, or the cache's own folder in it (a file is refused).
    info = _core.cache_info_at(where)
    if args.action == "clear":
        removed = _core.clear_cache_at(where)
        print(f"removed {removed:,} cached window{'' if removed == 1 else 's'} from {info['path']}")
        return 0
    if args.json:
        # As the cache's files hold it: the ranges in epoch ms (no client, so nothing saved).
        shown = info.to_dict()
        del shown["requests_saved"]
        for entry in shown["entries"]:
            entry["ranges"] = [[to_ms(lo), to_ms(hi)] for lo, hi in entry["ranges"]]
        print(json.dumps(shown))
        return 0

    def when(time: dt.datetime) -> str:
        return f"{time:%Y-%m-%d %H:%M:%S}"

    print(
        f"cache of settled events at {info['path']}: {info['files']:,} files, "
        f"{info['bytes']:,} bytes"
    )
    for e in info["entries"]:
        report = f" report {e['report_id']}" if e["report_id"] else ""
        print(
            f"  {e['base_url'] or '(unknown service)'} account {e['account'][:12]}"
            f" {e['endpoint']}{report}: {e['events']:,} events, {e['bytes']:,} bytes"
        )
        for lo, hi in e["ranges"]:
            print(f"    {when(lo)} to {when(hi)} UTC")
    return 0
