"""Readable reprs of the results users get back, in a terminal and in Jupyter: the figures of a
result (a dataclass's fields, a dict's items, in their own order) as short text, and as an
HTML table (``_repr_html_``). The shape of each result is its own class's, never restated here."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html
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
    if isinstance(value, Shown):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {text(v, sep)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple, set)):
        return "[" + ", ".join(text(v, sep) for v in value) + "]"
    return str(value)


def items(obj: Any) -> Iterable[Tuple[str, Any]]:
    """The figures of a result: a dataclass's fields, or a dict's items."""
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return list(obj.items())


def table(title: str, obj: Any) -> str:
    """``obj``'s figures as an HTML table under ``title``; a list of dicts (a cache's
    entries) becomes a table of its own, one row each."""
    esc = html.escape
    rows, nested = [], []
    for name, value in items(obj):
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
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


class Shown(dict):  # type: ignore[type-arg]
    """A dict that a client returns (its quota, stats, cache info), shown readably: its repr
    names it and gives times in ISO 8601 UTC; in Jupyter it is a table. It is a dict in every
    other way (``==``, ``json.dumps``, pickling)."""

    #: The name the repr gives it.
    name = "dict"

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(f'{k}={text(v, False)}' for k, v in self.items())})"

    def _repr_html_(self) -> str:
        return table(self.name, self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


def shown(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as a :class:`Shown` dict named ``name`` (its nested dicts stay as they are,
    each shown in its place)."""
    out = Shown(data)
    out.name = name
    return out
