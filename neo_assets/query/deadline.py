"""A request's deadline, seen by its work on the event loop or in a worker thread: thread
work cannot be killed, so it stops at its next ``checkpoint``; an answer after the deadline
is a timeout, never a success. Outside a request ``checkpoint`` is free."""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from neo_assets.serve.rules.transport import past_deadline

log = logging.getLogger("neo_assets.serve")

_DEADLINE: ContextVar[float | None] = ContextVar("neo_request_deadline", default=None)


class DeadlinePassed(TimeoutError):
    """The request's deadline passed before ``step``: its work stopped there."""

    def __init__(self, step: str) -> None:
        self.step = step
        super().__init__(f"the request's deadline passed before {step}")


@contextmanager
def request_deadline(timeout_s: float) -> Iterator[float]:
    """The deadline (``time.monotonic()`` seconds) of the work run inside."""
    at = time.monotonic() + timeout_s
    token = _DEADLINE.set(at)
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def checkpoint(step: str) -> None:
    """Raise ``DeadlinePassed`` when the current request's deadline has passed, naming
    the ``step`` that is then not done."""
    at = _DEADLINE.get()
    if at is not None and past_deadline(time.monotonic(), at):
        log.info("work stopped past its request's deadline, before %s", step)
        raise DeadlinePassed(step)
