"""The stream that :meth:`Client.event_batches <surveillance.Client.event_batches>` returns: the
native reader (``__arrow_c_stream__``), iterable without arro3, whose classes the reader's own
iteration builds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import pyarrow


class EventBatches:
    """The events as a stream of Arrow record batches, one per window: an object with
    ``__arrow_c_stream__`` (read it once), for ``pyarrow.RecordBatchReader.from_stream``,
    ``surveillance.write_parquet`` or any reader of the Arrow C stream interface.

    Iterating it yields the batches as arro3 ``RecordBatch`` objects where ``arro3-core`` is
    installed, else as ``pyarrow.RecordBatch`` objects; with neither, it says what to install.
    Other attributes are the native reader's (an arro3 ``RecordBatchReader``).
    """

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow C stream of the batches (a PyCapsule); the stream can be read once."""
        return self._reader.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> Any:
        """The batches' Arrow schema (a PyCapsule)."""
        return self._reader.__arrow_c_schema__()

    def __iter__(self) -> Iterator[pyarrow.RecordBatch]:
        try:
            # optional: arro3
            import arro3.core  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            pass
        else:
            return iter(self._reader)
        try:
            import pyarrow as pa  # optional: pyarrow
        except ImportError:
            raise ImportError(
                "iterating event_batches needs pyarrow or arro3-core: pip install "
                "'surveillance[pandas]' (pyarrow), or pass the stream to a reader of the Arrow "
                "C stream interface (surveillance.write_parquet, polars.from_arrow ...)"
            ) from None
        return iter(pa.RecordBatchReader.from_stream(self._reader))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)
