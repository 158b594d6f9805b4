"""Cancellation scopes: one per embedding call, observed at every boundary. A scope is
cancelled with a cause code, so the cause survives into the sweep summary."""

import asyncio
import weakref
from dataclasses import dataclass, field

from neo_assets.core import codes


class Cancelled(Exception):
    """Raised at a boundary that observed a cancelled scope; carries the cause code."""

    def __init__(self, cause: str, operation_label: str = "", detail: str = "") -> None:
        self.cause = cause
        self.operation_label = operation_label
        self.detail = detail
        super().__init__(f"{cause}: {operation_label} {detail}".strip())


@dataclass(eq=False)  # identity hash: scopes live in a WeakSet
class CancelScope:
    """Cooperative cancellation that also aborts what is in flight: cancelling the scope
    cancels the task ``run`` races, so httpx closes the connection and the server sees it."""

    label: str = ""
    cause: str | None = None
    parent: "CancelScope | None" = None
    _event: asyncio.Event | None = field(default=None, repr=False)
    # Weak: a finished call's scope must not stay reachable from a long-lived parent.
    _children: "weakref.WeakSet[CancelScope]" = field(default_factory=weakref.WeakSet, repr=False)

    def _ev(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
            if self.cause is not None:
                self._event.set()
        return self._event

    @property
    def cancelled(self) -> bool:
        if self.cause is None and self.parent is not None and self.parent.cancelled:
            self.cause = self.parent.cause
        return self.cause is not None

    def cancel(self, cause: str = codes.ABORT_ERR) -> None:
        if self.cause is None:
            self.cause = cause
        if self._event is not None:
            self._event.set()
        for child in list(self._children):
            child.cancel(self.cause)

    def child(self, label: str = "") -> "CancelScope":
        scope = CancelScope(label=label or self.label, parent=self)
        self._children.add(scope)
        if self.cancelled:
            scope.cancel(self.cause or codes.ABORT_ERR)
        return scope

    def cancel_threadsafe(
        self, loop: asyncio.AbstractEventLoop, cause: str = codes.ABORT_ERR
    ) -> None:
        """Cancel from another thread (e.g. a Dagster termination handler)."""
        loop.call_soon_threadsafe(self.cancel, cause)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled(self.cause or codes.ABORT_ERR, self.label)

    async def sleep(self, seconds: float) -> None:
        """An abortable delay: returns early (raising Cancelled) the moment the scope ends."""
        self.raise_if_cancelled()
        try:
            await asyncio.wait_for(self._ev().wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            return
        self.raise_if_cancelled()

    async def run(self, awaitable):  # noqa: ANN001, ANN201 - generic passthrough
        """Await ``awaitable`` unless the scope is cancelled first; then cancel it."""
        self.raise_if_cancelled()
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(self._ev().wait())
        try:
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The awaiting task itself was cancelled: the inner work must not outlive it.
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            waiter.cancel()
        if task in done:
            return task.result()
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001 - the task's own end is not the story
            pass
        self.raise_if_cancelled()
        raise AssertionError("unreachable")
