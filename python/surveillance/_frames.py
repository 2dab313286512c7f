"""pandas DataFrames into publishing: a DataFrame as the Arrow table that
:meth:`Client.publish <surveillance.Client.publish>` publishes from its columns, or as its rows
(records) where pyarrow cannot type it. (A report's records not accepted come out as a
DataFrame from the native report itself: :meth:`PublishReport.to_pandas
<surveillance.PublishReport.to_pandas>`.)"""

from __future__ import annotations

import math
from typing import Any, Iterator, Tuple

from . import _core

#: DataFrame rows converted to dicts at a time.
CHUNK = 1000

#: The field metadata key that names an Arrow extension type.
JSON_EXTENSION = b"ARROW:extension:name"


def is_frame(obj: Any) -> bool:
    """Whether ``obj`` is a pandas DataFrame."""
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "iloc")


def missing(value: Any) -> bool:
    """Absent in a DataFrame row: None, NaN, NaT, pandas.NA."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    kind = type(value).__name__
    return kind in ("NaTType", "NAType")


def _names(frame: Any) -> None:
    bad = [c for c in frame.columns if not isinstance(c, str)]
    if bad:
        raise TypeError(f"DataFrame column names must be strings, found {bad[:3]!r}")


class FrameRows:
    """The rows of a DataFrame as records, a sequence that ``publish`` reads once and a
    stopped publish reads again from its first row not read (``rows[n:]``): missing values
    left out (a column that does not apply to a row), numpy scalars as Python ones,
    Timestamps kept (sent as epoch ms)."""

    def __init__(self, frame: Any) -> None:
        _names(frame)
        self._frame = frame

    def __len__(self) -> int:
        return len(self._frame)

    def __getitem__(self, rows: slice) -> FrameRows:
        return FrameRows(self._frame.iloc[rows])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        frame = self._frame
        for start in range(0, len(frame), CHUNK):
            chunk = frame.iloc[start : start + CHUNK]
            for row in chunk.to_dict("records"):
                yield {k: v for k, v in row.items() if not missing(v)}


def frame_table(frame: Any) -> Tuple[Any, list[str]]:
    """A pandas DataFrame as a pyarrow Table (its index left out), to be published from its
    columns, and the names of its columns made lists of structs here; None for the table
    when pyarrow is missing or cannot type a column (e.g. one that mixes numbers and strings),
    which leaves the DataFrame to the row-by-row path.

    A column of Python lists and dicts (``items``) is converted by the extension, not by
    pyarrow, whose conversion of such a column costs about as much as all the rest of
    publishing. Lists of flat dicts of one shape become a list<struct> column
    (``_core.struct_list_column``), which the core writes and checks as a Table's ``items``
    (and, if the models refuse it as a column, as JSON text row by row, as the dict path
    does: ``publish``' ``loose``); other such columns become JSON text (Arrow's
    ``arrow.json`` extension type, ``_core.json_column``), written by the record writer of the
    dict path."""
    _names(frame)
    try:
        import pyarrow as pa  # optional: pyarrow
    except ImportError:
        return None, []
    unique = frame.columns.is_unique  # (pyarrow refuses a name twice: the row path says so)
    nested = [c for c in frame.columns if unique and _holds_containers(frame[c])]
    try:
        table = pa.Table.from_pandas(frame.drop(columns=nested), preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None, []
    structs = []
    for name in nested:
        values = frame[name].tolist()
        shaped = _core.struct_list_column(values)
        if shaped is not None:
            column = pa.array(shaped)
            field = pa.field(name, column.type)
            structs.append(name)
        else:
            try:
                column = pa.array(_core.json_column(values))
            except ValueError:  # a value with no JSON form: pyarrow's types say where
                try:
                    column = pa.Array.from_pandas(frame[name])
                except (pa.ArrowException, TypeError, ValueError):
                    return None, []
                field = pa.field(name, column.type)
            else:
                field = pa.field(name, column.type, metadata={JSON_EXTENSION: b"arrow.json"})
        table = table.add_column(list(frame.columns).index(name), field, column)
    return table, structs


def _holds_containers(column: Any) -> bool:
    """Whether a DataFrame column is one of Python objects whose first present value is a
    list, a tuple or a dict."""
    if column.dtype != object:
        return False
    for value in column:
        if not missing(value):
            return isinstance(value, (list, tuple, dict))
    return False
