"""The entries of ``Raises:`` that many methods of both clients share, written once: the errors
of any request, of a time range, of ``output=``. :func:`raises` puts them in a method's
docstring at import, where ``help()``, Jupyter's ``?`` and the API reference read it (as
pandas shares its docstrings' sections)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

#: Any call that sends a request.
REQUEST = """\
AuthError: the service refused the credentials.
QuotaExhaustedError: the day's request quota is spent, or the call needs more than is
    left (``.resets_at`` says when it comes back); nothing more was sent.
ApiError: the service answered an error status, or an answer that is not its own, after
    the retries: ``BadRequestError`` (400), ``NotFoundError`` (404), ``RateLimitError``
    (429) or ``ServerError`` (5xx).
TransportError: no usable answer (connection, TLS or timeout) after the retries."""
#: A call that takes ``output=``.
OUTPUT = "ValueError: ``output`` is not one of its values (``TypeError`` when it is not a string)."
#: A call that takes ``start``, ``end`` and ``report_id``.
RANGE = """\
ValueError: ``end`` is not after ``start``, a time cannot be read, or ``report_id`` is
    not a UUID (``TypeError`` for a value of the wrong type)."""
#: A call that fetches events.
DENSE = "DenseWindowError: more than 10,000 events share one millisecond."

_F = TypeVar("_F", bound=Callable[..., Any])

#: The sections that follow ``Raises:`` in a docstring.
_AFTER = ("Example:", "Examples:")


def raises(*entries: str) -> Callable[[_F], _F]:
    """Puts ``entries`` first in the ``Raises:`` section of the method's docstring, making the
    section (before an ``Example:``, else last) where it has none.

    >>> @raises(DENSE)
    ... def f():
    ...     '''Fetches.
    ...
    ...     Raises:
    ...         OSError: a file.
    ...     '''
    >>> print(f.__doc__.strip())
    Fetches.
    <BLANKLINE>
        Raises:
            DenseWindowError: more than 10,000 events share one millisecond.
            OSError: a file.
    """

    def add(method: _F) -> _F:
        if not method.__doc__:  # python -OO
            return method
        lines = method.__doc__.rstrip().splitlines()
        body = [line for line in lines[1:] if line.strip()]
        indent = min((len(line) - len(line.lstrip()) for line in body), default=4)
        section = " " * indent
        added = [f"{section}    {line}" for entry in entries for line in entry.splitlines()]
        if f"{section}Raises:" in lines:
            at = lines.index(f"{section}Raises:") + 1
        else:
            at = next((i for i, line in enumerate(lines) if line.strip() in _AFTER), len(lines))
            before = at < len(lines)  # an Example, after a blank line
            added = (
                ([] if before else [""]) + [f"{section}Raises:"] + added + ([""] if before else [])
            )
        method.__doc__ = "\n".join(lines[:at] + added + lines[at:]) + "\n" + section
        return method

    return add
