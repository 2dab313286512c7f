"""The lock of a dataset, which refuses a second run while one runs: on an object store, a lock
object with a lease that the run renews ("Locking" in :mod:`surveillance.sync`); in a local
directory, an ``flock`` on ``_sync.lock`` that the kernel releases when its process ends."""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from typing import Any, Callable, Optional, Protocol

from .._time import to_ms
from ..errors import SyncLockedError
from ._state import _iso_ms, _now_ms


class _Objects(Protocol):
    """What the lease lock needs of an object store (:class:`._object_store._ObjectStore`):
    its shown name, this run's id, and reading, writing and deleting one object."""

    shown: str
    run: str

    def _get(self, name: str) -> Optional[bytes]: ...

    def _put(self, name: str, write: Callable[[Any], None]) -> None: ...

    def _delete(self, name: str) -> None: ...


#: Name of the lock file inside the dataset directory (an object, on an object store).
LOCK_FILE = "_sync.lock"

#: How long the lock of a run on an object store lasts unless renewed, and how often the run
#: renews it (between windows and partitions).
_LEASE_MS = 5 * 60_000
_RENEW_S = 60.0
#: How long a run waits, once it has written its lock, before reading it back: two runs that
#: both found no lock then both read the one written last, and only its run goes on.
_LOCK_SETTLE_S = 1.0


class _ObjectLock:
    """The lock of a dataset in an object store, which has no flock: the object
    ``_sync.lock`` names the run that holds it and when its lease ends ("Locking" in
    :mod:`surveillance.sync`)."""

    def __init__(self, store: _Objects) -> None:
        self.store = store
        self.started = _iso_ms(_now_ms())
        self.renewed = 0.0
        self.held = False

    def __enter__(self) -> _ObjectLock:
        holder = self._read()
        if holder is not None and _lease_lasts(holder):
            raise self._refusal(holder)
        self.held = True
        try:
            self._write()
            time.sleep(_LOCK_SETTLE_S)
            holder = self._read()
            if not self._ours(holder):
                self.held = False
                raise self._refusal(holder)
        except BaseException:
            self.__exit__()  # a Ctrl-C during the wait leaves no lock behind
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.held:
            return
        self.held = False
        try:
            if self._ours(self._read()):
                self.store._delete(LOCK_FILE)
        except OSError:
            pass  # the lease ends by itself

    def renew(self) -> None:
        """Extends the lease, at most every ``_RENEW_S`` seconds, if this run still holds it."""
        if self.held and time.monotonic() - self.renewed >= _RENEW_S:
            self.confirm()
            self._write()

    def confirm(self) -> None:
        """Raises SyncLockedError unless this run still holds the lock."""
        holder = self._read()
        if not self._ours(holder):
            self.held = False
            shown = self.store.shown
            raise SyncLockedError(
                f"another sync took the lock of `{shown}` while this one ran "
                f"({_holder(holder)}): this run recorded nothing (the next run deletes the "
                "files it wrote); make sure that one run at a time syncs a dataset",
                path=shown,
            )

    def _ours(self, holder: Optional[dict[str, Any]]) -> bool:
        return holder is not None and holder.get("run") == self.store.run

    def _read(self) -> Optional[dict[str, Any]]:
        data = self.store._get(LOCK_FILE)
        if data is None:
            return None
        try:
            holder = json.loads(data.decode("utf-8"))
        except ValueError:
            return {}  # not a lock this version writes: no lease
        return holder if isinstance(holder, dict) else {}

    def _write(self) -> None:
        holder = {
            "run": self.store.run,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self.started,
            "expires_at": _iso_ms(_now_ms() + _LEASE_MS),
        }
        text = json.dumps(holder, indent=2) + "\n"
        self.store._put(LOCK_FILE, lambda f: f.write(text.encode("utf-8")))
        self.renewed = time.monotonic()

    def _refusal(self, holder: Optional[dict[str, Any]]) -> SyncLockedError:
        shown = self.store.shown
        until = f" until {holder['expires_at']}" if holder and holder.get("expires_at") else ""
        return SyncLockedError(
            f"another sync is running on `{shown}` ({_holder(holder)}): wait for it to "
            f"finish; the lock of a run that was killed lasts{until} (or delete "
            f"`{shown}/{LOCK_FILE}`, once sure that no run goes on)",
            path=shown,
        )


def _lease_lasts(holder: dict[str, Any]) -> bool:
    try:
        return to_ms(holder.get("expires_at")) > _now_ms()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _holder(holder: Optional[dict[str, Any]]) -> str:
    """Who holds a lock object, in words."""
    if not holder:
        return "its lock changed hands"
    return (
        f"run {holder.get('run')} on host {holder.get('host')}, pid {holder.get('pid')}, "
        f"since {holder.get('started_at')}"
    )


class _Lock:
    """An exclusive, non-blocking lock on ``root/_sync.lock`` (``flock``; the kernel drops it
    when its process dies)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.file = os.path.join(root, LOCK_FILE)
        self.fd: Optional[int] = None

    def __enter__(self) -> _Lock:
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _try_lock(fd)
        except OSError as e:
            if e.errno not in _LOCKED_ERRNOS:
                os.close(fd)
                raise
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (pid {holder})" if holder else ""
            raise SyncLockedError(
                f"another sync is running on `{self.root}`{who}: wait for it to finish; "
                "the lock is released when that process ends",
                path=self.root,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


#: What a non-blocking lock attempt fails with when another process holds the lock.
_LOCKED_ERRNOS = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, getattr(errno, "EDEADLK", -1)}


def _try_lock(fd: int) -> None:
    try:
        import fcntl  # platform: fcntl
    except ImportError:  # Windows
        import msvcrt  # platform: msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _read_pid(fd: int) -> Optional[int]:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except (OSError, AttributeError):
        return None
