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


class _Bar:
    """Shows milliseconds of the range done as a percentage, and the events so far."""

    def __init__(self, desc: str) -> None:
        self._desc = desc
        self._tqdm: Any = None
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._tqdm = tqdm(total=100, desc=desc, unit="%", leave=False)
        self._last = 0

    def __call__(self, update: dict) -> None:
        total = max(int(update.get("total_ms", 0)), 1)
        pct = min(100, int(100 * int(update.get("done_ms", 0)) / total))
        events = update.get("events", 0)
        if self._tqdm is not None:
            self._tqdm.n = pct
            self._tqdm.set_postfix(events=events, requests=update.get("requests", 0))
            self._tqdm.refresh()
        elif pct != self._last or pct == 100:
            sys.stderr.write(f"\r{self._desc}: {pct:3d}% ({events} events)")
            sys.stderr.flush()
        self._last = pct

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            sys.stderr.write("\n")
            sys.stderr.flush()


def make(
    progress: ProgressArg, desc: str
) -> tuple[Optional[Callable[[dict], Any]], Callable[[], None]]:
    """Returns the callback to give the core (or None) and a function that closes the display."""
    if callable(progress) and not isinstance(progress, bool):
        return progress, lambda: None
    if not _wanted(progress):
        return None, lambda: None
    bar = _Bar(desc)
    return bar, bar.close
