"""CancelScope: every boundary observes it, and nothing it started outlives it."""

import asyncio
import gc

import pytest

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled, CancelScope


def test_already_cancelled_scope_never_starts_the_awaitable() -> None:
    started = []

    async def work() -> None:
        started.append(1)

    async def main() -> None:
        scope = CancelScope()
        scope.cancel(codes.ABORT_ERR)
        coro = work()
        with pytest.raises(Cancelled) as info:
            await scope.run(coro)
        coro.close()
        assert info.value.cause == codes.ABORT_ERR

    asyncio.run(main())
    assert started == []


def test_cancel_stops_in_flight_work_and_keeps_the_cause() -> None:
    finished = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            finished.append("cleaned")

    async def main() -> None:
        scope = CancelScope()
        asyncio.get_running_loop().call_later(0.05, scope.cancel, codes.EMBEDDING_PROBE_TIMEOUT)
        with pytest.raises(Cancelled) as info:
            await scope.run(slow())
        assert info.value.cause == codes.EMBEDDING_PROBE_TIMEOUT

    asyncio.run(main())
    assert finished == ["cleaned"]


def test_cancelling_the_awaiting_task_cancels_the_inner_work() -> None:
    state = {"inner_cancelled": False}

    async def inner() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state["inner_cancelled"] = True
            raise

    async def main() -> None:
        scope = CancelScope()
        outer = asyncio.ensure_future(scope.run(inner()))
        await asyncio.sleep(0.05)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert state["inner_cancelled"]

    asyncio.run(main())


def test_sleep_returns_at_once_on_cancel_and_children_inherit() -> None:
    async def main() -> None:
        parent = CancelScope()
        child = parent.child("c")
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, parent.cancel, codes.ABORT_ERR)
        t0 = loop.time()
        with pytest.raises(Cancelled):
            await child.sleep(30)
        assert loop.time() - t0 < 5
        assert child.cause == codes.ABORT_ERR
        late = parent.child("late")
        assert late.cancelled

    asyncio.run(main())


def test_children_are_not_kept_alive_by_the_parent() -> None:
    parent = CancelScope()
    for _ in range(100):
        parent.child("x")
    gc.collect()
    assert len(parent._children) == 0


def test_cancel_threadsafe_from_another_thread() -> None:
    import threading

    async def main() -> None:
        scope = CancelScope()
        loop = asyncio.get_running_loop()
        threading.Timer(0.05, scope.cancel_threadsafe, args=(loop,)).start()
        with pytest.raises(Cancelled) as info:
            await scope.sleep(30)
        assert info.value.cause == codes.ABORT_ERR

    asyncio.run(main())
