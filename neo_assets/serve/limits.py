"""What a client may hold of the service, enforced where it is held (rules:
``neo_assets/serve/rules/transport.py``): ``guarded_protocol``, uvicorn's h11 protocol
with a header-read timeout and pending-connection caps applied before a byte is read
(uvicorn's own limits count idle sockets like busy ones: docs/security.md); and
``StreamGuard`` for MCP event streams."""

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from neo_assets.config.settings import ServeSettings
from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError
from neo_assets.serve.rules.transport import (
    ConnectionLimits,
    Held,
    admit,
    is_keepalive_chunk,
    stream_admitted,
    stream_idle,
)

log = logging.getLogger("neo_assets.serve")


def _refusal(status: int, reason: str, code: str, message: str) -> bytes:
    body = json.dumps(QueryInputError(code, message, None).as_json()).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ConnectionGuard:
    """The open connections of one server, oldest first, and which are pending. One
    event loop: no lock needed."""

    def __init__(self, limits: ConnectionLimits, header_timeout_s: float) -> None:
        self.limits = limits
        self.header_timeout_s = header_timeout_s
        self.held: OrderedDict[GuardedProtocol, tuple[str, bool]] = OrderedDict()

    def admit(self, conn: "GuardedProtocol", address: str) -> bool:
        held = [Held(c, a, p) for c, (a, p) in self.held.items()]
        decision = admit(address, held, self.limits)
        if decision.evict is not None:
            victim: GuardedProtocol = decision.evict  # type: ignore[assignment]
            self.forget(victim)
            victim.transport.close()
        if not decision.accept:
            return False
        self.held[conn] = (address, True)
        return True

    def mark(self, conn: "GuardedProtocol", pending: bool) -> None:
        if conn in self.held:
            self.held[conn] = (self.held[conn][0], pending)

    def forget(self, conn: "GuardedProtocol") -> None:
        self.held.pop(conn, None)
        conn.disarm()


class GuardedProtocol(H11Protocol):
    """H11Protocol that reports to a ``ConnectionGuard``: accepted or refused when it
    connects, pending while no request of it is being answered, closed when it stays
    pending past the header timeout."""

    guard: ConnectionGuard

    _timer: asyncio.TimerHandle | None = None
    _pending: bool = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else "?"
        if not self.guard.admit(self, address):
            limit = self.guard.limits.per_client
            log.warning("refused a connection from %s: %d open (the cap)", address, limit)
            transport.write(
                _refusal(
                    429,
                    "Too Many Requests",
                    codes.QUERY_TOO_MANY_CONNECTIONS,
                    f"this address already holds {limit} connections "
                    "(NEO_SERVE_MAX_CONNECTIONS_PER_CLIENT), each with a request running: "
                    "reuse a connection or wait for one to finish",
                )
            )
            transport.close()
            return
        self._set_pending(True)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync()

    def _sync(self) -> None:
        busy = self.cycle is not None and not self.cycle.response_complete
        if self._pending == busy:  # it changed
            self._set_pending(not busy)

    def _set_pending(self, pending: bool) -> None:
        self._pending = pending
        self.guard.mark(self, pending)
        self.disarm()
        if pending and not self.transport.is_closing():
            self._timer = self.loop.call_later(self.guard.header_timeout_s, self._expire)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self._pending and not self.transport.is_closing():
            self.guard.forget(self)
            self.transport.close()


def guarded_protocol(settings: ServeSettings) -> type[GuardedProtocol]:
    """A protocol class for ``uvicorn.run(http=...)`` with one guard for this server."""
    guard = ConnectionGuard(
        ConnectionLimits(settings.max_connections_per_client, settings.max_pending_connections),
        settings.header_timeout_s,
    )
    return type("NeoH11Protocol", (GuardedProtocol,), {"guard": guard})


class StreamGuard:
    """Open event streams per token (one event loop: no lock), each closed when idle."""

    def __init__(self, per_token: int, idle_s: float) -> None:
        self.per_token = per_token
        self.idle_s = idle_s
        self.open: dict[str, int] = {}

    @asynccontextmanager
    async def slot(self, token_id: str) -> AsyncIterator[None]:
        held = self.open.get(token_id, 0)
        if not stream_admitted(held, self.per_token):
            raise QueryInputError(
                codes.QUERY_TOO_MANY_STREAMS,
                f"this token already holds {held} open streams (the limit is "
                f"{self.per_token}, NEO_SERVE_STREAMS_PER_TOKEN): close one first",
                None,
                status=429,
            )
        self.open[token_id] = held + 1
        try:
            yield
        finally:
            left = self.open[token_id] - 1
            if left:
                self.open[token_id] = left
            else:
                del self.open[token_id]

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run ``app``'s stream; end it once no event has left for ``idle_s``."""
        last_event = time.monotonic()
        started = False
        finished = False

        async def watched(message: Message) -> None:
            nonlocal last_event, started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                if not is_keepalive_chunk(message.get("body", b"")):
                    last_event = time.monotonic()
                finished = not message.get("more_body", False)
            await send(message)

        idle = False
        async with anyio.create_task_group() as tg:

            async def watchdog() -> None:
                nonlocal idle
                while True:
                    now = time.monotonic()
                    if stream_idle(last_event, now, self.idle_s):
                        idle = True
                        tg.cancel_scope.cancel()
                        return
                    await anyio.sleep(last_event + self.idle_s - now)

            tg.start_soon(watchdog)
            await app(scope, receive, watched)
            tg.cancel_scope.cancel()
        if not idle:
            return
        log.info("closed an event stream idle for %.0f s", self.idle_s)
        if not started:  # nothing was answered yet: say why it ends
            message = f"nothing to send for {self.idle_s} s (NEO_SERVE_STREAM_IDLE_S)"
            await _send_error(send, 408, codes.QUERY_TIMEOUT, message)
        elif not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def within(app: ASGIApp, scope: Scope, receive: Receive, send: Send, seconds: float) -> None:
    """Run ``app`` for at most ``seconds``: a request whose body trickles in (read by a
    part that has no deadline of its own, the MCP transport), or whose work is stuck
    where it cannot be interrupted (a thread inside a store call), is cut then, answered
    504 when nothing was answered yet."""
    started = False

    async def watched(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    with anyio.move_on_after(seconds) as cut:
        await app(scope, receive, watched)
    if not cut.cancelled_caught:
        return
    log.info("cut a request still running after %.1f s", seconds)
    if started:  # the body was under way: end it
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    message = (
        f"the request took longer than {seconds:g} s (NEO_SERVE_REQUEST_TIMEOUT_S); narrow "
        "it, send its body at once, or retry"
    )
    await _send_error(send, 504, codes.QUERY_TIMEOUT, message, (b"connection", b"close"))


async def _send_error(
    send: Send, status: int, code: str, message: str, *headers: tuple[bytes, bytes]
) -> None:
    """A whole JSON refusal (``{"error": ...}``), as the service's every refusal reads."""
    content = [(b"content-type", b"application/json"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": content})
    body = QueryInputError(code, message, None).as_json()
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
