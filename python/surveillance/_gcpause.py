"""Pausing Python's cyclic garbage collector while a large result is built.

Events are trees of dicts and lists (no cycles): reference counting frees them, and a cyclic
collection that runs while hundreds of thousands of them are being created only traverses them
again and again (a full one over a million events holds the interpreter for a second). The
pause is counted, so that overlapping fetches (threads, or coroutines of one event loop)
restore the collector only when the last one ends, and only if it was on before the first.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Pauses the cyclic collector for the duration of the block.

    >>> import gc
    >>> with paused():
    ...     with paused():
    ...         gc.isenabled()
    ...     gc.isenabled()
    False
    False
    >>> gc.isenabled()
    True
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
