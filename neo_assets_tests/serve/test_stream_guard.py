"""``serve/limits.py``'s ASGI guards over small real ASGI apps, in-process: an event
stream with only keep-alive comments is ended when idle and one with events is not; a
request past its bound is answered 504, or ended when its answer had begun."""

import json
import time

import anyio
import pytest

from neo_assets.query.rules.request import QueryInputError
from neo_assets.serve.limits import StreamGuard, within

SCOPE = {"type": "http", "method": "GET", "path": "/mcp", "headers": []}


def _stream(chunks: list[bytes], every_s: float):
    async def app(scope, receive, send) -> None:  # noqa: ANN001
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for chunk in chunks:
            await anyio.sleep(every_s)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def _receive() -> dict:
    await anyio.sleep(3600)
    return {"type": "http.disconnect"}


def _run(guard: StreamGuard, app) -> tuple[list[dict], float]:  # noqa: ANN001
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def go() -> float:
        started = time.monotonic()
        await guard.run(app, SCOPE, _receive, send)
        return time.monotonic() - started

    return sent, anyio.run(go)


def test_a_stream_of_keepalive_comments_only_is_ended_when_idle() -> None:
    sent, took = _run(StreamGuard(2, 0.3), _stream([b": ping\r\n\r\n"] * 100, 0.05))
    assert 0.3 <= took < 1.0
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_stream_with_events_is_not_idle() -> None:
    chunks = [b"event: message\r\ndata: {}\r\n\r\n"] * 8
    sent, took = _run(StreamGuard(2, 0.3), _stream(chunks, 0.1))
    assert took >= 0.8  # ran to its own end, well past one idle period
    assert sum(1 for m in sent if m.get("body", b"").startswith(b"event")) == 8


def test_the_streams_of_a_token_are_capped_and_freed() -> None:
    guard = StreamGuard(1, 30)

    async def go() -> int:
        async with guard.slot("t"):
            with pytest.raises(QueryInputError) as err:
                async with guard.slot("t"):
                    pass
            async with guard.slot("other"):
                pass
        async with guard.slot("t"):
            pass
        return err.value.status

    assert anyio.run(go) == 429
    assert guard.open == {}


def test_within_answers_504_when_nothing_was_answered_and_ends_a_begun_answer() -> None:
    async def silent(scope, receive, send) -> None:  # noqa: ANN001
        await anyio.sleep(3600)

    async def go(app) -> list[dict]:  # noqa: ANN001
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        await within(app, SCOPE, _receive, send, 0.2)
        return sent

    sent = anyio.run(go, silent)
    assert sent[0]["status"] == 504
    assert json.loads(sent[1]["body"])["error"]["code"] == "QUERY_TIMEOUT"
    begun = anyio.run(go, _stream([b"x"] * 100, 0.05))
    assert begun[0]["status"] == 200 and begun[-1]["more_body"] is False
    quick = anyio.run(go, _stream([b"x"], 0.01))
    assert [m.get("status") for m in quick][0] == 200 and len(quick) == 3
