"""An iterator whose first item is computed at once, on a thread.

A sweep in waves knows its first wave as soon as the envelope is read, but used to parse
and declare it only once Dagster had recorded the envelope's materialization (~0.15 s
in which the parse helper sat idle). Started ahead, the first wave is parsed (in the
helper) and declared meanwhile; whoever iterates gets it, or its exception, as if it had
been computed then.
"""

import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_NOTHING = object()


class FirstAhead(Generic[T]):
    """Iterate ``source``; its first item is being computed from construction on, on a
    thread named ``name``. ``close`` waits for that thread (never leaves it running
    against resources its caller is about to close)."""

    def __init__(self, source: Iterator[T], name: str = "first-ahead") -> None:
        self._source = source
        self._first: object = _NOTHING
        self._error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._compute, name=name, daemon=True)
        self._thread.start()

    def _compute(self) -> None:
        try:
            self._first = next(self._source, _NOTHING)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever iterates
            self._error = exc

    def __iter__(self) -> "FirstAhead[T]":
        return self

    def __next__(self) -> T:
        if self._taken:
            return next(self._source)
        self._thread.join()
        self._taken = True
        first, self._first = self._first, _NOTHING
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if first is _NOTHING:
            raise StopIteration
        return first  # type: ignore[return-value]

    def close(self) -> None:
        self._thread.join()
