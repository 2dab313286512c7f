"""The state of a dataset (``_sync_state.json``): its name, the version of its format and its
check, and the times it records, written as results and messages also write them."""

from __future__ import annotations

import datetime as _dt
import json
import time
from typing import Any, Optional

from .._time import from_ms, to_ms
from ..errors import ConfigError

#: Name of the state file inside the dataset directory (an object, on an object store).
STATE_FILE = "_sync_state.json"

#: Name of the file (an object, on an object store) that keeps the pages a stopped run read of
#: the windows it did not store whole, for the next run (a checked blob of the client's).
CARRIED_FILE = "_sync_carried.bin"

_STATE_VERSION = 1


def _parse_state(data: bytes, file: str) -> dict[str, Any]:
    """The state read from ``file`` (the bytes ``data``), checked."""
    try:
        state = json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise ConfigError(
            f"the sync state `{file}` is not valid JSON ({e}): restore it, or sync into a new "
            "directory"
        ) from None
    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        raise ConfigError(
            f"the sync state `{file}` is not one this version writes: sync into a new directory"
        )
    for key in ("start", "synced_until"):
        _parse_iso_ms(state.get(key, ""), file)
    return state


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _iso_ms(ms: int) -> str:
    return _iso(from_ms(ms))


def _iso(t: Optional[_dt.datetime]) -> str:
    if t is None:
        return "-"
    t = t.astimezone(_dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _parse_iso_ms(text: Any, file: str = STATE_FILE) -> int:
    try:
        return to_ms(text)
    except (TypeError, ValueError):
        raise ConfigError(
            f"the sync state `{file}` holds `{text}` where a time was expected: restore it, "
            "or sync into a new directory"
        ) from None
