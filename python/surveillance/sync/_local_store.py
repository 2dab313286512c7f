"""A dataset in a local directory (a path, or a ``file://`` URI): one file a date, each replaced
by an atomic rename, the state replaced last, under an ``flock`` (points 1 to 4 of
:mod:`surveillance.sync`)."""

from __future__ import annotations

import json
import os
import secrets
from typing import Any, Callable, List, Optional

from .. import _check
from ..errors import ConfigError, arg, worded
from ._locks import _Lock
from ._partitions import _read_partition
from ._state import CARRIED_FILE, STATE_FILE, _parse_state

#: The one data file of each partition.
PART_FILE = "part-0.parquet"
_TMP_SUFFIX = ".tmp"


class _LocalStore:
    """A dataset in a local directory: one file a date, replaced by atomic renames, under an
    ``flock`` (points 1 to 4 of :mod:`surveillance.sync`)."""

    def __init__(self, root: str) -> None:
        self.root = self.shown = root

    def create(self) -> None:
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise worded(
                ConfigError, arg("path"), f" {_check.shown(self.root)} cannot be a directory: {why}"
            ) from None

    def lock(self) -> _Lock:
        return _Lock(self.root)

    def heartbeat(self) -> None:
        """Nothing to renew: the kernel holds the lock as long as the process lives."""

    def begin(self) -> Optional[dict[str, Any]]:
        """The state, once the temporary files of a killed run are removed (under the lock)."""
        _remove_temporaries(self.root)
        return _read_state(self.root)

    def read_state(self) -> Optional[dict[str, Any]]:
        return _read_state(self.root)

    def read_partition(self, name: str, pq: Any) -> Any:
        target = os.path.join(self.root, f"date={name}", PART_FILE)
        if not os.path.exists(target):
            return None
        return _read_partition(pq, target, target)

    def write_partition(self, name: str, write: Callable[[Any], None]) -> None:
        _atomic_write(os.path.join(self.root, f"date={name}"), PART_FILE, write)

    def write_state(self, state: dict[str, Any]) -> None:
        _write_state(self.root, state)

    def read_carried(self) -> Optional[bytes]:
        """The pages the last run carried to this one, if any (see :data:`CARRIED_FILE`)."""
        try:
            with open(os.path.join(self.root, CARRIED_FILE), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_carried(self, data: Optional[bytes]) -> None:
        """Keeps ``data`` for the next run (None: nothing, the file removed)."""
        if data is not None:
            _atomic_write(self.root, CARRIED_FILE, lambda f: f.write(data))
            return
        try:
            os.unlink(os.path.join(self.root, CARRIED_FILE))
        except FileNotFoundError:
            return
        _fsync_dir(self.root)

    def files(self) -> List[str]:
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        found = (os.path.join(self.root, d, PART_FILE) for d in names if d.startswith("date="))
        return [f for f in found if os.path.isfile(f)]


def _atomic_write(directory: str, name: str, write: Any) -> None:
    """Writes ``directory/name`` through a temporary file, fsync and :func:`os.replace`."""
    fresh = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    if fresh:
        _fsync_dir(os.path.dirname(directory) or ".")
    tmp = os.path.join(directory, f".{name}.{os.getpid()}-{secrets.token_hex(4)}{_TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_temporaries(root: str) -> None:
    """Deletes the temporary files a killed run left (only ours: hidden and ``.tmp``)."""
    for directory in [root] + [
        os.path.join(root, d)
        for d in os.listdir(root)
        if d.startswith("date=") and os.path.isdir(os.path.join(root, d))
    ]:
        for name in os.listdir(directory):
            if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass


def _read_state(root: str) -> Optional[dict[str, Any]]:
    file = os.path.join(root, STATE_FILE)
    try:
        with open(file, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return _parse_state(data, file)


def _write_state(root: str, state: dict[str, Any]) -> None:
    text = json.dumps(state, indent=2) + "\n"
    _atomic_write(root, STATE_FILE, lambda f: f.write(text.encode("utf-8")))
