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
    """Shows milliseconds of the range done as a percentage, the events so far, and the
    requests: a count, and a share of the day's quota when there is one (``limit``)."""

    def __init__(self, desc: str, limit: Optional[int] = None) -> None:
        self._desc = desc
        self._limit = limit
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
        cost = self.cost(int(update.get("requests", 0)))
        if self._tqdm is not None:
            self._tqdm.n = pct
            self._tqdm.set_postfix_str(f"events={events:,}, requests={cost}")
            self._tqdm.refresh()
        elif pct != self._last or pct == 100:
            sys.stderr.write(f"\r{self._desc}: {pct:3d}% ({events:,} events, {cost} requests)")
            sys.stderr.flush()
        self._last = pct

    def cost(self, requests: int) -> str:
        """``12`` or, under a daily quota, ``12 (0.5% of the day)``."""
        if not self._limit:
            return f"{requests:,}"
        return f"{requests:,} ({100 * requests / self._limit:.1f}% of the day)"

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        else:
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
