"""Readable reprs of the results users get back, in a terminal and in Jupyter: the figures of a
result (a dataclass's fields, a mapping's items, in their own order) as short text
(:func:`fields`), and as an HTML table (:func:`table`, a ``_repr_html_``). The native results
(``surveillance._core``'s plan, cost, quota, stats and cache info) are drawn here too. The
shape of each result is its own class's, never restated here."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html
from collections.abc import Mapping
from typing import Any, Iterable, Tuple


def text(value: Any, sep: bool = True) -> str:
    """A value as a person reads it: times in ISO 8601 UTC, counts with separators, ranges
    as ``a .. b``, lists and dicts item by item.

    >>> text(_dt.datetime(2026, 1, 5, 6, tzinfo=_dt.timezone.utc)), text(14799), text(None)
    ('2026-01-05T06:00:00Z', '14,799', 'None')
    >>> text({"GET /v2/events": 3}), text([("a", "b")])
    ('{GET /v2/events: 3}', '[a .. b]')

    ``sep``: counts with separators (``14,799``; without, for a repr's ``name=value``).
    """
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if sep else str(value)
    if isinstance(value, float):
        return f"{value:,.2f}" if sep else f"{value:.2f}"
    if isinstance(value, _dt.datetime):
        value = value.astimezone(_dt.timezone.utc)
        frac = f".{value.microsecond // 1000:03d}" if value.microsecond else ""
        return str(value.strftime("%Y-%m-%dT%H:%M:%S")) + frac + "Z"
    if isinstance(value, tuple) and len(value) == 2:
        return f"{text(value[0], sep)} .. {text(value[1], sep)}"
    if _is_result(value):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {text(v, sep)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple, set)):
        return "[" + ", ".join(text(v, sep) for v in value) + "]"
    return str(value)


def _is_result(value: Any) -> bool:
    """Whether ``value`` is a result of its own, shown by its repr (a native one, nested in
    another: the stats' quota, the cache's entries)."""
    return hasattr(value, "_repr_html_") and hasattr(value, "to_dict")


def items(obj: Any) -> Iterable[Tuple[str, Any]]:
    """The figures of a result: a dataclass's fields, or a mapping's items."""
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return list(obj.items())


def table(title: str, obj: Any) -> str:
    """``obj``'s figures as an HTML table under ``title``; a list of mappings (a cache's
    entries) becomes a table of its own, one row each."""
    esc = html.escape
    rows, nested = [], []
    for name, value in items(obj):
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            nested.append((name, value))
            continue
        rows.append(
            f"<tr><th style='text-align:left'>{esc(name)}</th><td>{esc(text(value))}</td></tr>"
        )
    out = [f"<b>{esc(title)}</b><table>{''.join(rows)}</table>"]
    for name, values in nested:
        columns = list(dict.fromkeys(k for v in values for k in v))
        head = "".join(f"<th>{esc(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(text(v.get(c)))}</td>" for c in columns) + "</tr>"
            for v in values
        )
        out.append(f"<p>{esc(name)}</p><table><tr>{head}</tr>{body}</table>")
    return "".join(out)


def fields(name: str, obj: Any) -> str:
    """``obj``'s figures as ``name(a=1, b=None, ...)``: times in ISO 8601 UTC, a nested
    result by its own repr.

    >>> fields("Quota", {"limit": None, "used": 3})
    'Quota(limit=None, used=3)'
    """
    return f"{name}({', '.join(f'{k}={text(v, False)}' for k, v in items(obj))})"
