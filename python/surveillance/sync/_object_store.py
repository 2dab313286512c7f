"""A dataset under a prefix of an object store (``s3://``, ``gs://`` ...): the files of each run
under names of their own, then the state that names the live ones, then the replaced files
deleted ("On an object store" in :mod:`surveillance.sync`)."""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any, Callable, Dict, List, Optional

from .. import _store
from ..errors import ConfigError, arg, worded
from ._local_store import PART_FILE
from ._locks import _ObjectLock
from ._partitions import _read_partition
from ._state import CARRIED_FILE, STATE_FILE, _parse_state

#: A data file that a run writes in an object store: its date, and the id of the run.
_RUN_FILE = re.compile(r"date=(\d{4}-\d{2}-\d{2})/part-\d{8}T\d{6}Z-[0-9a-f]{8}\.parquet")
#: A data file that the state of an object store may name: a run's, or the local layout's (a
#: dataset copied from a directory).
_DATA_FILE = re.compile(r"date=(\d{4}-\d{2}-\d{2})/part-[A-Za-z0-9_.-]+\.parquet")


def _names_data_files(files: Any) -> bool:
    """Whether ``files`` (a state's) maps dates to data files of those dates."""
    if not isinstance(files, dict):
        return False
    for date, file in files.items():
        match = _DATA_FILE.fullmatch(file) if isinstance(file, str) else None
        if match is None or match.group(1) != date:
            return False
    return True


def _run_id() -> str:
    """A new run's id: its UTC start, to the second, and 8 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


class _ObjectStore:
    """A dataset under a prefix of an object store (S3, GCS ...), which has no rename and no
    flock: each run writes the partitions it changes under names of its own, then the state
    that names the live file of each date, then deletes the files the state no longer names
    ("On an object store" in :mod:`surveillance.sync`)."""

    def __init__(self, location: _store.Location) -> None:
        self.location = location
        self.fs = location.filesystem
        self.root = location.path
        self.shown = location.shown
        self.run = _run_id()
        #: The live file of each date, relative to the root: as this run leaves them.
        self.live: Dict[str, str] = {}
        #: ... and as the state written last names them.
        self.named: Dict[str, str] = {}
        self._lock = _ObjectLock(self)

    def create(self) -> None:
        why = _store.unusable(self.location)
        if why:
            raise worded(
                ConfigError, arg("path"), f" {self.shown}: {why}: create it, or sync elsewhere"
            )

    def lock(self) -> _ObjectLock:
        return self._lock

    def heartbeat(self) -> None:
        self._lock.renew()

    def begin(self) -> Optional[dict[str, Any]]:
        """The state, once the files that no state names (the leftovers of a run that stopped
        before writing its state) are deleted (under the lock)."""
        state = self.read_state()
        self.named = dict(self.live)
        named = set(self.named.values())
        for name in self._listing():
            if _RUN_FILE.fullmatch(name) and name not in named:
                self._delete(name)
        return state

    def read_state(self) -> Optional[dict[str, Any]]:
        self.live = {}
        data = self._get(STATE_FILE)
        if data is None:
            return None
        state = _parse_state(data, self._show(STATE_FILE))
        files = state.get("files")
        if files is None:
            # A dataset copied from a directory: the one file of each date, as named there.
            files = {}
            for name in self._listing():
                match = _DATA_FILE.fullmatch(name)
                if match and name.endswith(f"/{PART_FILE}"):
                    files[match.group(1)] = name
        elif not _names_data_files(files):
            raise ConfigError(
                f"the sync state `{self._show(STATE_FILE)}` names files that are not the "
                "dataset's: restore it, or sync into a new location"
            )
        self.live = dict(files)
        return state

    def read_partition(self, name: str, pq: Any) -> Any:
        file = self.live.get(name)
        if file is None:
            return None
        try:
            source = self.fs.open_input_file(self._path(file))
        except FileNotFoundError:
            raise worded(
                ConfigError,
                arg("path"),
                f": the dataset file `{self._show(file)}`, which the sync state names, "
                "is missing: restore it, or sync into a new location",
            ) from None
        with source:
            return _read_partition(pq, source, self._show(file))

    def write_partition(self, name: str, write: Callable[[Any], None]) -> None:
        file = f"date={name}/part-{self.run}.parquet"
        self._put(file, write)
        self.live[name] = file
        self._lock.renew()

    def write_state(self, state: dict[str, Any]) -> None:
        self._lock.confirm()
        text = json.dumps(dict(state, files=dict(sorted(self.live.items()))), indent=2) + "\n"
        self._put(STATE_FILE, lambda f: f.write(text.encode("utf-8")))
        replaced = [f for d, f in self.named.items() if self.live.get(d) != f]
        self.named = dict(self.live)
        for file in replaced:
            self._delete(file)

    def read_carried(self) -> Optional[bytes]:
        """The pages the last run carried to this one, if any (see :data:`CARRIED_FILE`)."""
        return self._get(CARRIED_FILE)

    def write_carried(self, data: Optional[bytes]) -> None:
        """Keeps ``data`` for the next run (None: nothing, the object deleted)."""
        if data is None:
            self._delete(CARRIED_FILE)
        else:
            self._put(CARRIED_FILE, lambda f: f.write(data))

    def files(self) -> List[str]:
        return [self._path(f) for _, f in sorted(self.live.items())]

    # The store's operations, on names relative to the root.
    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _show(self, name: str) -> str:
        return f"{self.shown}/{name}"

    def _get(self, name: str) -> Optional[bytes]:
        try:
            with self.fs.open_input_stream(self._path(name)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def _put(self, name: str, write: Callable[[Any], None]) -> None:
        """Writes ``name`` in one upload of the whole content (encoded first, in memory): the
        object appears whole or not at all."""
        import pyarrow as pa  # optional: pyarrow

        sink = pa.BufferOutputStream()
        write(sink)
        data = sink.getvalue()
        with self.fs.open_output_stream(self._path(name)) as out:
            out.write(data)

    def _delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except OSError:
            pass  # gone already, or not deletable now: the next run deletes it

    def _listing(self) -> List[str]:
        """The names of the files under the root, relative to it."""
        import pyarrow.fs as pafs  # optional: pyarrow

        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        start = len(self.root) + 1
        return [
            i.path[start:] for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File
        ]
