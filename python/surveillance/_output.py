"""Conversion of Arrow results to the output a caller asked for."""

from __future__ import annotations

import os
from typing import Any, Union

from . import _check, _core

OUTPUTS = ("dicts", "arrow", "pandas", "polars")


def check(output: str) -> None:
    """Raises TypeError or ValueError for an unknown ``output``."""

    _check.choice("output", output, OUTPUTS)


def _require(module: str, extra: str, output: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(
            f"output={output!r} needs the `{module}` package: pip install 'surveillance[{extra}]'"
        ) from None


def to_pandas(table: Any) -> Any:
    """A pandas DataFrame of ``table`` (anything with ``__arrow_c_stream__``): timestamps as
    ``datetime64[ms, UTC]``, booleans as the nullable ``boolean`` dtype (a gap stays ``<NA>``),
    and nested columns (lists, structs, maps) as ``pd.ArrowDtype``, kept in Arrow memory
    rather than copied into millions of Python lists and dicts."""
    pd = _require("pandas", "pandas", "pandas")
    pa = _require("pyarrow", "pandas", "pandas")
    nested = (pa.types.is_list, pa.types.is_struct, pa.types.is_map, pa.types.is_large_list)

    def mapper(dtype: Any) -> Any:
        if pa.types.is_boolean(dtype):
            return pd.BooleanDtype()
        if any(is_(dtype) for is_ in nested):
            return pd.ArrowDtype(dtype)
        return None

    return pa.table(table).to_pandas(types_mapper=mapper)


def convert(table: Any, output: str) -> Any:
    """``table`` (an object with ``__arrow_c_stream__``) as ``output``: for ``"arrow"`` a
    ``pyarrow.Table`` (without a copy) when pyarrow is installed, else the object itself (any
    Arrow reader takes it: ``polars.DataFrame(x)``, duckdb); a pandas DataFrame (see
    :func:`to_pandas`) or a polars DataFrame.
    """
    if output == "arrow":
        try:
            import pyarrow as pa  # optional: pyarrow
        except ImportError:
            return table
        return pa.table(table)
    if output == "pandas":
        return to_pandas(table)
    polars = _require("polars", "polars", output)
    return polars.DataFrame(table)


def write_parquet(data: Any, path: Union[str, os.PathLike[str]]) -> int:
    """Writes Arrow data to the Parquet file ``path`` (snappy-compressed), in Rust: no pyarrow
    needed.

    The file is written under a temporary name and renamed when complete: a failure leaves
    nothing (and an older file at ``path`` as it was). The events schema is kept exactly, UTC
    timestamps included, so pandas, polars, duckdb and Spark read it typed.

    Args:
        data: anything with ``__arrow_c_stream__`` or ``__arrow_c_array__``: a table from
            ``output="arrow"``, a stream from :meth:`Client.event_batches` (written window by
            window, with bounded memory), a pyarrow Table or RecordBatchReader, a polars
            DataFrame.
        path: the file to write (replaced if it exists).

    Returns:
        The number of rows written.

    >>> import os, tempfile, surveillance as sv
    >>> with sv.Emulator(sites=2, days=1, events_per_day=300) as emu, \\
    ...         tempfile.TemporaryDirectory() as d:
    ...     client = emu.client()
    ...     path = os.path.join(d, "events.parquet")
    ...     sv.write_parquet(client.event_batches(emu.start, emu.end), path)
    300

    Raises:
        TypeError: ``data`` is not Arrow data (nothing with ``__arrow_c_stream__``).
        OSError: the file cannot be written; nothing is left at ``path``.
    """
    if not (hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__")):
        raise TypeError(
            "`data` must be Arrow data (an object with `__arrow_c_stream__`, such as "
            f"`client.events(..., output='arrow')` or `client.event_batches(...)`), got "
            f"{type(data).__name__}"
        )

    return _core.write_parquet(data, _check.path("path", path))
