"""Destinations given as URIs (``s3://bucket/key``, ``gs://bucket/key``, ``file:///path``):
resolved with :func:`pyarrow.fs.FileSystem.from_uri`, checked with one request before the first
request to the service, and shown in messages without what may hold a credential."""

from __future__ import annotations

import os
import re
import urllib.parse
import urllib.request
from typing import Any, NamedTuple, Optional

from .errors import ConfigError, arg, worded

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(path: str) -> bool:
    """Whether ``path`` is a URI (``scheme://...``) rather than a local path.

    >>> is_uri("s3://bucket/events"), is_uri("events"), is_uri("C:\\\\data\\\\events")
    (True, False, False)
    """
    return _URI.match(path) is not None


def shown(path: str) -> str:
    """``path`` as messages show it: a URI without its user info and query string, where
    credentials may be written (``s3://KEY:SECRET@bucket/...``, ``?session_token=...``).

    >>> shown("s3://KEY:SECRET@bucket/ds?region=eu-west-1&endpoint_override=h:9000")
    's3://bucket/ds'
    >>> shown("events/2026")
    'events/2026'
    """
    if not is_uri(path):
        return path
    parts = urllib.parse.urlsplit(path)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def suffix(path: str) -> str:
    """The file-name suffix of ``path``, a URI's query string aside.

    >>> suffix("s3://b/x.parquet?endpoint_override=127.0.0.1:9000"), suffix("e.CSV")
    ('.parquet', '.CSV')
    """
    if is_uri(path):
        path = urllib.parse.urlsplit(path).path
    return os.path.splitext(path)[1]


class Location(NamedTuple):
    """Where a destination lies: a local path (``filesystem`` None), or a path inside a
    ``pyarrow.fs.FileSystem``; ``shown`` is what messages say."""

    filesystem: Any
    path: str
    shown: str


def local_path(path: str, name: str) -> Optional[str]:
    """``path`` itself when it is local, the path of a ``file://`` URI, None for another URI.

    >>> local_path("events", "path"), local_path("file:///data/my%20events", "path")
    ('events', '/data/my events')
    """
    if not is_uri(path):
        return path
    parts = urllib.parse.urlsplit(path)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost") or not parts.path or parts.query:
        raise worded(
            ConfigError,
            arg(name),
            f" {shown(path)}: a file URI names a file of this machine, as file:///absolute/path",
        )
    return urllib.request.url2pathname(parts.path)


def resolve(path: str, name: str) -> Location:
    """Where ``path`` (a local path or a URI, for the argument ``name``) lies. A URI other than
    ``file://`` is opened with pyarrow, credentials and endpoint from its usual environment
    (``AWS_*`` variables, ``?endpoint_override=`` in the URI ...): a scheme it does not know
    raises :class:`ConfigError`, and a missing pyarrow ImportError, before anything is sent."""
    local = local_path(path, name)
    if local is not None:
        return Location(None, local, shown(path))
    scheme = path.split(":", 1)[0].lower()
    try:
        import pyarrow.fs as pafs  # optional: pyarrow
    except ImportError:
        raise worded(
            ImportError,
            arg(name),
            f" {shown(path)}: a {scheme}:// destination is opened with pyarrow: "
            "pip install 'surveillance[pandas]'",
        ) from None
    try:
        # A scheme is case-insensitive (RFC 3986), pyarrow's are lowercase: S3:// is s3://.
        filesystem, inner = pafs.FileSystem.from_uri(scheme + path[len(scheme) :])
    except (ValueError, NotImplementedError) as e:  # ArrowInvalid, ArrowNotImplementedError
        why = clean(str(e), path)
        if "Unrecognized filesystem type" in why:
            why = (
                f"pyarrow does not know the scheme `{scheme}`: name a local path or a URI "
                "that pyarrow opens (s3://, gs://, file://, hdfs://, abfs://)"
            )
        raise worded(ConfigError, arg(name), f" {shown(path)}: {why}") from None
    except OSError as e:  # e.g. the bucket's region could not be asked
        raise worded(OSError, arg(name), f" {shown(path)}: {clean(str(e), path)}") from None
    if isinstance(filesystem, pafs.LocalFileSystem):
        return Location(None, inner, shown(path))
    inner = inner.rstrip("/")
    if not inner:
        raise worded(
            ConfigError, arg(name), f" {shown(path)} names no bucket: name one, as s3://bucket/key"
        )
    return Location(filesystem, inner, shown(path).rstrip("/"))


def unusable(location: Location, *, file: bool = False) -> Optional[str]:
    """Why nothing can be written at ``location`` (in an object store), as far as a request
    on its bucket tells (and, for a ``file``, one on the object: it must not be a directory),
    or None. Errors of the store (access denied, unreachable) raise OSError."""
    import pyarrow.fs as pafs  # optional: pyarrow

    bucket = location.path.split("/", 1)[0]
    try:
        found = location.filesystem.get_file_info(bucket).type
        if found == pafs.FileType.NotFound:
            return f"the bucket `{bucket}` does not exist"
        if found != pafs.FileType.Directory:
            return f"`{bucket}` is not a bucket"
        if file and location.filesystem.get_file_info(location.path).type == (
            pafs.FileType.Directory
        ):
            return "it is a directory"
    except OSError as e:
        raise OSError(f"{location.shown}: {clean(str(e), location.shown)}") from None
    return None


def upload(local: str, location: Location) -> None:
    """Copies the local file ``local`` to ``location`` in one call: the object appears when the
    copy is complete (pyarrow finishes the call before Python sees Ctrl-C)."""
    import pyarrow.fs as pafs  # optional: pyarrow

    pafs.copy_files(
        local,
        location.path,
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=location.filesystem,
    )


def download(location: Location, local: str) -> None:
    """Copies the object at ``location`` to the local file ``local`` (:func:`upload`'s
    converse)."""
    import pyarrow.fs as pafs  # optional: pyarrow

    pafs.copy_files(
        location.path,
        local,
        source_filesystem=location.filesystem,
        destination_filesystem=pafs.LocalFileSystem(),
    )


def uploaded(local: str, location: Location) -> bool:
    """Whether the object at ``location`` has the size of ``local`` (an upload interrupted by
    Ctrl-C has completed); False when that cannot be told."""
    try:
        return bool(location.filesystem.get_file_info(location.path).size == os.path.getsize(local))
    except OSError:
        return False


def clean(message: str, uri: str) -> str:
    """``message`` of pyarrow about ``uri`` without the URI's credentials or query values."""
    message = message.replace(uri, shown(uri))
    parts = urllib.parse.urlsplit(uri) if is_uri(uri) else None
    if parts is not None:
        secrets = [v for vs in urllib.parse.parse_qs(parts.query).values() for v in vs]
        if "@" in parts.netloc:
            secrets += parts.netloc.rpartition("@")[0].split(":")
        # Not a value of a few characters (`true`, `http`): none is a secret, and replacing
        # each of its occurrences would garble the message.
        for value in sorted((v for v in secrets if len(v) > 4), key=len, reverse=True):
            message = message.replace(value, "...")
    return message.strip()
