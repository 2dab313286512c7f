"""Conversion of Arrow results to the output a caller asked for."""

from __future__ import annotations

from typing import Any

OUTPUTS = ("dicts", "arrow", "pandas", "polars")


def check(output: str) -> None:
    """Raises ValueError for an unknown ``output``."""
    if output not in OUTPUTS:
        raise ValueError(f"`output` must be one of {', '.join(map(repr, OUTPUTS))}, got {output!r}")


def _require(module: str, extra: str, output: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(
            f"output={output!r} needs the `{module}` package: pip install 'surveillance[{extra}]'"
        ) from None


def convert(table: Any, output: str) -> Any:
    """``table`` (an object with ``__arrow_c_stream__``) as ``output``: the object itself for
    ``"arrow"``, a pandas DataFrame (``datetime64[ms, UTC]`` timestamps) or a polars DataFrame.
    """
    if output == "arrow":
        return table
    if output == "pandas":
        _require("pandas", "pandas", output)
        pa = _require("pyarrow", "pandas", output)
        return pa.table(table).to_pandas()
    polars = _require("polars", "polars", output)
    return polars.DataFrame(table)
