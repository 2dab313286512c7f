"""Progress display for long fetches: tqdm in Jupyter and on a terminal, nothing in logs."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

ProgressArg = Union[str, bool, Callable[[dict], Any]]


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def _wanted(progress: ProgressArg) -> bool:
    if progress == "auto":
        stream = sys.stderr
        return _in_notebook() or bool(stream is not None and stream.isatty())
    if isinstance(progress, bool):
        return progress
    from ._check import shown

    raise TypeError(f"`progress` must be 'auto', True, False or a callable, got {shown(progress)}")


def _tqdm(notebook: bool) -> Any:
    """tqdm's bar class: its widget in Jupyter (None without ipywidgets, which draws it),
    its terminal bar otherwise; None without tqdm."""
    try:
        if notebook:
            import ipywidgets  # noqa: F401  (tqdm's notebook bar is one)
            from tqdm.notebook import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _display(obj: Any, **kwargs: Any) -> Any:
    """Shows ``obj`` in the running cell; the handle that replaces it later."""
    from IPython.display import display

    return display(obj, display_id=True, **kwargs)


class _Bar:
    """Shows milliseconds of the range done as a percentage, the events so far, and the
    requests: a count, and a share of the day's quota when there is one (``limit``).

    On a terminal: tqdm when installed, else one line on stderr rewritten in place. In
    Jupyter the bar owns one output of the cell (tqdm's widget, or a line of text without
    tqdm and ipywidgets), which :meth:`close` replaces with one line that says how the work
    ended: a saved notebook shows that line, not a widget frozen at its first state."""

    def __init__(self, desc: str, limit: Optional[int] = None) -> None:
        self._limit = limit
        self._open(desc, 100, "%")

    def _open(self, desc: str, total: Optional[int], unit: str) -> None:
        self._desc = desc
        self._total = total
        self._tqdm: Any = None
        self._handle: Any = None
        self._line = ""
        self._last: Optional[int] = None
        notebook = _in_notebook()
        tqdm = _tqdm(notebook)
        if tqdm is not None and notebook:
            self._tqdm = tqdm(total=total, desc=desc, unit=unit, leave=False, display=False)
            self._handle = _display(self._tqdm.container)
        elif tqdm is not None:
            self._tqdm = tqdm(total=total, desc=desc, unit=unit, leave=False)
        elif notebook:
            self._handle = _display({"text/plain": f"{desc}: starting"}, raw=True)

    def _show(self, n: int, postfix: str, line: str) -> None:
        """Moves the bar to ``n`` with ``postfix`` after it; ``line``: the same in words, for
        the displays without tqdm and the last word of a notebook's."""
        changed = n != self._last or (n == self._total and line != self._line)
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
            sys.stderr.write(f"\r{line}")
            sys.stderr.flush()

    def __call__(self, update: dict) -> None:
        total = max(int(update.get("total_ms", 0)), 1)
        pct = min(100, int(100 * int(update.get("done_ms", 0)) / total))
        events = update.get("events", 0)
        cost = self.cost(int(update.get("requests", 0)))
        self._show(
            pct,
            f"events={events:,}, requests={cost}",
            f"{self._desc}: {pct:3d}% ({events:,} events, {cost} requests)",
        )

    def cost(self, requests: int) -> str:
        """``12`` or, under a daily quota, ``12 (0.5% of the day)``."""
        if not self._limit:
            return f"{requests:,}"
        return f"{requests:,} ({100 * requests / self._limit:.1f}% of the day)"

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        if self._handle is not None:
            self._handle.update({"text/plain": self._line or f"{self._desc}: nothing"}, raw=True)
        elif self._tqdm is None:
            sys.stderr.write("\n")
            sys.stderr.flush()


def make(
    progress: ProgressArg, desc: str, limit: Optional[int] = None
) -> tuple[Optional[Callable[[dict], Any]], Callable[[], None]]:
    """Returns the callback to give the core (or None) and a function that closes the display;
    ``limit``: the day's request quota, which the display shows the requests a share of."""
    if callable(progress) and not isinstance(progress, bool):
        return progress, lambda: None
    if not _wanted(progress):
        return None, lambda: None
    bar = _Bar(desc, limit)
    return bar, bar.close
