"""Progress display for long fetches: tqdm in Jupyter and on a terminal, nothing in logs."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from ._check import shown
from .types import Progress


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except Exception:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def _wanted(progress: Progress) -> bool:
    if progress == "auto":
        stream = sys.stderr
        return _in_notebook() or bool(stream is not None and stream.isatty())
    if isinstance(progress, bool):
        return progress

    raise TypeError(f"`progress` must be 'auto', True, False or a callable, got {shown(progress)}")


def _tqdm(notebook: bool) -> Any:
    """tqdm's bar class: its widget in Jupyter (None without ipywidgets, which draws it),
    its terminal bar otherwise; None without tqdm."""
    try:
        if notebook:
            # optional: ipywidgets
            import ipywidgets  # type: ignore[import-untyped, unused-ignore]  # noqa: F401

            # optional: tqdm
            from tqdm.notebook import tqdm  # type: ignore[import-untyped, unused-ignore]
        else:
            # optional: tqdm
            from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    return tqdm


def _display(obj: Any, **kwargs: Any) -> Any:
    """Shows ``obj`` in the running cell; the handle that replaces it later."""
    from IPython.display import display  # optional: IPython

    return display(obj, display_id=True, **kwargs)  # type: ignore[no-untyped-call, unused-ignore]


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h20m``: a time left, as a bar shows it.

    >>> _duration(4.2), _duration(185), _duration(4_830)
    ('4s', '3m05s', '1h20m')
    """
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _cost(requests: int, expected: Optional[int], limit: Optional[int]) -> str:
    words = f"{requests:,} of ~{expected:,} requests" if expected else f"{requests:,} requests"
    if not limit:
        return words
    return f"{words} ({100 * requests / limit:.1f}% of the day)"


def _words(update: dict[str, Any], limit: Optional[int], plan: bool) -> tuple[int, str]:
    """The share of an events fetch done (0-100) and the words after its bar (see
    :class:`_Bar`); ``limit``: the day's quota.

    >>> _words({"fetched": 4200, "requests": 43, "total_ms": 100, "done_ms": 0,
    ...         "expected_events": 10000, "expected_requests": 101, "eta_s": 58.2}, 2400, False)
    (42, '4,200 events, 43 of ~101 requests (1.8% of the day), ~58s left')
    >>> _words({"fetched": 0, "requests": 0, "total_ms": 100, "done_ms": 0}, None, False)
    (0, '0 events, 0 requests')
    >>> _words({"events": 14000, "requests": 0, "total_ms": 100, "done_ms": 100,
    ...         "saved": 140}, None, False)
    (100, '14,000 events, 0 requests, 140 saved by the cache')
    >>> _words({"requests": 7, "total_ms": 100, "done_ms": 25}, None, True)
    (25, '7 requests asked, 25% of the range counted')
    """
    total = max(int(update.get("total_ms", 0)), 1)
    done_ms = int(update.get("done_ms", 0))
    requests = int(update.get("requests", 0))
    if plan:
        pct = min(100, 100 * done_ms // total)
        return pct, f"{requests:,} requests asked, {pct}% of the range counted"
    fetched = int(update.get("fetched", update.get("events", 0)))
    expected = update.get("expected_events")
    if done_ms >= total:
        pct = 100
    elif expected:
        pct = min(99, 100 * fetched // max(int(expected), 1))
    else:
        pct = min(99, 100 * done_ms // total)
    words = f"{fetched:,} events, {_cost(requests, update.get('expected_requests'), limit)}"
    saved = int(update.get("saved") or 0)
    if saved:
        words += f", {saved:,} saved by the cache"
    eta = update.get("eta_s")
    if eta is not None and pct < 100:
        words += f", ~{_duration(eta)} left"
    return pct, words


class _Bar:
    """An events fetch as it goes: the share of the events expected, the events and requests so
    far beside the requests expected (and their share of the day's quota, ``limit``), and the
    time left at the read rate. The core expects from the pages it has read; until they tell
    anything the share is that of the range done. A plan (``plan=True``) shows the share of the
    range counted and the requests it has asked.

    While the client waits (the service unreachable, a 429), the wait and its countdown come
    right after the bar's name, where a narrow terminal does not cut them off.

    On a terminal: tqdm when installed, else one line on stderr rewritten in place; either is
    drawn at once, before the first answer. In Jupyter the bar owns one output of the cell
    (tqdm's widget, or a line of text without tqdm and ipywidgets), which :meth:`close`
    replaces with one line that says how the work ended: a saved notebook shows that line, not
    a widget frozen at its first state.
    """

    def __init__(self, desc: str, limit: Optional[int] = None, plan: bool = False) -> None:
        self._limit = limit
        self._plan = plan
        self._open(desc, 100, "%")

    def _open(self, desc: str, total: Optional[int], unit: str) -> None:
        self._desc = desc
        self._shown_desc = desc
        self._total = total
        self._tqdm: Any = None
        self._handle: Any = None
        self._line = ""
        self._last: Optional[int] = None
        notebook = _in_notebook()
        tqdm = _tqdm(notebook)
        # No rate nor time of tqdm's own: a percentage a second says nothing, and the time
        # left comes from the requests left at the read rate (in the postfix).
        shares = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]"
        bar_format = shares if total == 100 else None
        if tqdm is not None and notebook:
            self._tqdm = tqdm(
                total=total, desc=desc, unit=unit, leave=False, display=False, bar_format=bar_format
            )
            self._handle = _display(self._tqdm.container)
        elif tqdm is not None:
            self._tqdm = tqdm(total=total, desc=desc, unit=unit, leave=False, bar_format=bar_format)
        elif notebook:
            self._handle = _display({"text/plain": f"{desc}: starting"}, raw=True)
        else:
            sys.stderr.write(f"\r{desc}: starting")
            sys.stderr.flush()

    def _show(self, n: int, postfix: str, line: str) -> None:
        """Moves the bar to ``n`` with ``postfix`` after it; ``line``: the same in words, for
        the displays without tqdm and the last word of a notebook's."""
        changed = n != self._last or line != self._line
        self._line, self._last = line, n
        if self._tqdm is not None:
            self._tqdm.n = n
            self._tqdm.set_postfix_str(postfix, refresh=False)
            self._tqdm.refresh()
        elif not changed:
            return
        elif self._handle is not None:
            self._handle.update({"text/plain": line}, raw=True)
        else:
            sys.stderr.write(f"\r{line}\x1b[K")
            sys.stderr.flush()

    def _head(self, update: dict[str, Any]) -> str:
        """The bar's name, with what the client waits for while it waits (the update's
        ``waiting_brief``: the next try and the ``max_outage`` left, or a 429's wait), which
        tqdm shows too; the name alone once requests go through again."""
        brief = update.get("waiting_brief") or update.get("waiting")
        head = f"{self._desc} [waiting: {brief}]" if brief else self._desc
        if self._tqdm is not None and head != self._shown_desc:
            self._tqdm.set_description_str(head, refresh=False)
        self._shown_desc = head
        return head

    def __call__(self, update: dict[str, Any]) -> None:
        pct, words = _words(update, self._limit, self._plan)
        self._show(pct, words, f"{self._head(update)}: {pct:3d}% ({words})")

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        if self._handle is not None:
            # Nothing was shown (a plan that asked nothing): no line is left behind.
            self._handle.update({"text/plain": self._line}, raw=True)
        elif self._tqdm is None:
            sys.stderr.write("\n")
            sys.stderr.flush()


def make(
    progress: Progress, desc: str, limit: Optional[int] = None, plan: bool = False
) -> tuple[Optional[Callable[[dict[str, Any]], Any]], Callable[[], None]]:
    """Returns the callback to give the core (or None) and a function that closes the display;
    ``limit``: the day's request quota, which the display shows the requests a share of;
    ``plan``: the display of a plan's count (see :class:`_Bar`)."""
    if callable(progress) and not isinstance(progress, bool):
        return progress, lambda: None
    if not _wanted(progress):
        return None, lambda: None
    bar = _Bar(desc, limit, plan)
    return bar, bar.close
