"""Checks of the arguments of the public API, done once where a call enters the package: a
refusal names the argument, says what it got (shortened, never a secret) and what it accepts.
A value of the wrong type is a `TypeError`; one out of range a `ValueError` (a
:class:`~surveillance.ConfigError`, which is one, for a client's or an emulator's settings).
Each names the argument apart from its text (:func:`~surveillance.errors.worded`), so that
the command line names its option instead.
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal, Optional, Sequence, Union, overload

from .errors import ConfigError, arg, worded

#: Characters of a value shown in a message, at most.
SHOWN = 60


def shown(value: Any) -> str:
    """``repr(value)``, cut to a readable length (a 10 MB string is not copied whole into a
    message).

    >>> shown("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' (100 characters)"
    >>> shown(-1)
    '-1'
    """
    if isinstance(value, (str, bytes)) and len(value) > SHOWN - 10:
        return f"{value[: SHOWN - 10]!r}"[:-1] + f"…{repr(value)[-1]} ({len(value):,} characters)"
    try:
        text = repr(value)
    except Exception:  # a repr that fails is not a reason to fail differently
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def kind(value: Any) -> str:
    """The type of ``value`` as a message names it."""
    return type(value).__name__


def _error(config: bool) -> type:
    return ConfigError if config else ValueError


def text(
    name: str,
    value: Any,
    *,
    optional: bool = False,
    empty: bool = False,
    secret: bool = False,
    longest: int = 4096,
    config: bool = False,
) -> Optional[str]:
    """A string argument: not empty (unless ``empty``), at most ``longest`` characters, no
    control characters; a ``secret`` is never shown."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        alternatives = " or None" if optional else ""
        raise worded(TypeError, arg(name), f" must be a string{alternatives}, got {kind(value)}")
    error = _error(config)
    got = "" if secret else f", got {shown(value)}"
    if not empty and not value.strip():
        raise worded(error, arg(name), f" must not be empty{got}")
    if len(value) > longest:
        raise worded(
            error, arg(name), f" is {len(value):,} characters long, more than {longest:,}{got}"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise worded(
            error, arg(name), f" must not contain control characters (newlines, tabs, NUL){got}"
        )
    return value


@overload
def integer(
    name: str,
    value: Any,
    low: int,
    high: int,
    *,
    optional: Literal[False] = ...,
    config: bool = ...,
) -> int: ...
@overload
def integer(
    name: str, value: Any, low: int, high: int, *, optional: bool, config: bool = ...
) -> Optional[int]: ...
def integer(
    name: str, value: Any, low: int, high: int, *, optional: bool = False, config: bool = False
) -> Optional[int]:
    """An int argument from ``low`` to ``high`` (a bool is not an int here)."""
    value = an_integer(name, value, optional=optional)
    if value is None:
        return None
    if not low <= value <= high:
        raise worded(
            _error(config), arg(name), f" must be from {low:,} to {high:,}, got {shown(value)}"
        )
    return int(value)


def an_integer(name: str, value: Any, *, optional: bool = False) -> Optional[int]:
    """An int argument, of any size (its range is checked where it is used)."""
    if value is None and optional:
        return None
    # An int, or another integer type (numpy's); never a bool, whose int value is an accident.
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        alternatives = " or None" if optional else ""
        raise worded(TypeError, arg(name), f" must be an int{alternatives}, got {kind(value)}")
    return int(value.__index__())


def a_number(name: str, value: Any, *, optional: bool = False) -> Optional[float]:
    """A number argument, of any value, NaN and infinities included (its range is checked
    where it is used)."""
    if value is None and optional:
        return None
    return _float(name, value, " or None" if optional else "")


def _float(name: str, value: Any, alternatives: str = "") -> float:
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise worded(TypeError, arg(name), f" must be a number{alternatives}, got {kind(value)}")
    try:
        return float(value)
    except OverflowError:  # an int past a float's range (10**400) is out of every range
        return math.inf if value > 0 else -math.inf


def limit_values(limits: dict[str, Any]) -> dict[str, Any]:
    """Limits by name (``Limits``' fields), their types checked: rates as floats (an int past
    a float's range is infinite, out of every range), counts as ints; their bounds are the
    core's."""
    return {
        name: a_number(name, value, optional=True)
        if name.endswith("per_second")
        else an_integer(name, value, optional=True)
        for name, value in limits.items()
    }


def number(
    name: str, value: Any, low: float, high: float, *, above: bool = False, config: bool = False
) -> float:
    """A number from ``low`` (excluded when ``above``) to ``high``; NaN and infinities are out
    of every range."""
    v = _float(name, value)
    ok = math.isfinite(v) and (low < v if above else low <= v) and v <= high
    if not ok:
        start = f"above {low:g}" if above else f"from {low:g}"
        raise worded(
            _error(config), arg(name), f" must be a number {start} to {high:g}, got {shown(value)}"
        )
    return v


def flag(name: str, value: Any) -> bool:
    """A bool argument (an int or a string is refused: `validate="no"` is true)."""
    if not isinstance(value, bool):
        raise worded(TypeError, arg(name), f" must be True or False, got {kind(value)}")
    return value


def choice(
    name: str,
    value: Any,
    choices: Sequence[str],
    *,
    optional: bool = False,
    fold: bool = False,
    config: bool = False,
) -> Any:
    """One of ``choices`` (in any case, with ``fold``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise worded(
            TypeError, arg(name), f" must be a string, one of {', '.join(map(repr, choices))}"
        )
    if (value.lower() if fold else value) not in choices:
        raise worded(
            _error(config),
            arg(name),
            f" must be one of {', '.join(map(repr, choices))}, got {shown(value)}",
        )
    return value


@overload
def path(name: str, value: Any, *, optional: Literal[False] = ...) -> str: ...
@overload
def path(name: str, value: Any, *, optional: bool) -> Optional[str]: ...
def path(name: str, value: Any, *, optional: bool = False) -> Optional[str]:
    """A file or directory path: a non-empty string or ``os.PathLike``, without NUL."""
    if value is None and optional:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise worded(
            TypeError, arg(name), f" must be a path (str or os.PathLike), got {kind(value)}"
        )
    p = os.fspath(value)
    if isinstance(p, bytes):
        raise worded(TypeError, arg(name), " must be a str path, got bytes")
    if not p.strip():
        raise worded(ValueError, arg(name), " must not be empty")
    if "\x00" in p:
        raise worded(ValueError, arg(name), f" must not contain a NUL character, got {shown(p)}")
    if len(p) > 4096:
        raise worded(
            ValueError, arg(name), f" is {len(p):,} characters long: no path is, got {shown(p)}"
        )
    return p


PathArg = Union[str, "os.PathLike[str]"]
