"""One process, one event loop: the HTTP API and the MCP endpoint (``/mcp``) over one
``Runtime``. The provider is warmed at start (the bundled model loads once and stays)."""

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.query.deadline import request_deadline
from neo_assets.query.rules.request import QueryInputError
from neo_assets.query.serving import serving_targets
from neo_assets.serve.auth import authenticate, bearer
from neo_assets.serve.http import error_response, routes
from neo_assets.serve.limits import within
from neo_assets.serve.mcp_tools import build_mcp
from neo_assets.serve.rules.tokens import token_in_query
from neo_assets.serve.runtime import Runtime

log = logging.getLogger("neo_assets.serve")


async def warm(runtime: Runtime) -> None:
    """Build the provider and embed once, so the first agent does not pay the load; then
    compute each declared tenant's read-side truth in a background thread (a query that
    comes first waits for its own tenant's, not for all)."""
    for tenant in runtime.resident.tenants().tenants:  # each serving generation's provider
        target = serving_targets(runtime.resident, tenant.id).first
        try:
            provider = runtime.resident.provider_for(target)
            await provider.embed(["warm up"], CancelScope(label="warm"), "query")
        except Exception as exc:  # a query will say why; the service still starts
            log.warning("warming %s's provider failed: %s", target.embedding_generation, exc)

    def tenants_truth() -> None:
        for tenant in runtime.resident.tenants().tenants:
            try:
                runtime.service.view(tenant.id)
            except Exception:
                log.exception("warming the read-side truth of %s failed", tenant.id)

    threading.Thread(target=tenants_truth, name="truth-warm", daemon=True).start()


def build_app(settings: Settings, runtime: Runtime | None = None) -> ASGIApp:
    """The ASGI app; it opens its runtime (store, ledger, provider) when it starts and
    closes it when it stops (uvicorn's lifespan)."""
    rt = runtime or Runtime.open(settings)
    mcp = build_mcp(rt)
    host = settings.serve.host
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=host in ("127.0.0.1", "localhost", "::1"),
        allowed_hosts=[f"{h}:*" for h in ("127.0.0.1", "localhost", "[::1]")],
        allowed_origins=[f"http://{h}:*" for h in ("127.0.0.1", "localhost", "[::1]")],
    )
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.serve.max_body_bytes,
        transport_security=security,
        host=host,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await warm(rt)
        async with mcp.session_manager.run():
            log.info("neo-assets serve ready")
            yield
        await rt.aclose()

    app = Starlette(
        routes=[*routes(rt), Mount("/", app=mcp_guarded(rt, mcp_app))], lifespan=lifespan
    )
    return refuse_tokens_in_urls(app)


def mcp_guarded(runtime: Runtime, mcp_app: ASGIApp) -> ASGIApp:
    """MCP over HTTP answers only a valid token: anything else is a 401 before a body is read
    or a stream opened (the MCP authorization spec), and each tool call is authenticated
    again. A GET's event stream is held by ``serve.limits.StreamGuard``."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await mcp_app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        raw = headers.get("authorization", b"")[:4096].decode("latin-1")
        try:
            record = await anyio.to_thread.run_sync(
                lambda: authenticate(
                    runtime.resident.ledger,
                    bearer(raw),
                    where=f"{scope.get('method', '?')} /mcp",
                    declared=runtime.tenant_declared,
                )
            )
            if scope.get("method") != "GET":
                # The tools' work sees the request's deadline and stops at its next step
                # past it (the tool answers QUERY_TIMEOUT, never a result); the request as
                # a whole (its body is read by the MCP transport, which has no deadline)
                # is cut a second later.
                timeout = runtime.settings.serve.request_timeout_s
                with request_deadline(timeout):
                    await within(mcp_app, scope, receive, send, timeout + 1.0)
                return
            # A GET opens a server-sent event stream: capped per token, closed when idle.
            async with runtime.streams.slot(record.id):
                await runtime.streams.run(mcp_app, scope, receive, send)
        except QueryInputError as exc:
            await error_response(exc)(scope, receive, send)

    return guarded


def refuse_tokens_in_urls(app: ASGIApp) -> ASGIApp:
    """A token in the query string is refused (400) before anything reads the request: a
    URL is kept by access logs, proxies and browser histories. It is not logged either
    (``auth.NoQueryStrings``)."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("query_string"):
            params = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            name = token_in_query(params)
            if name is not None:
                message = (
                    f"a token was sent in the URL (query parameter {name[:40]!r}); send it as "
                    "'Authorization: Bearer <token>' and revoke this one (`neo-assets token "
                    "revoke ID`): URLs are logged"
                )
                refusal = QueryInputError(codes.AUTH_TOKEN_IN_URL, message, name[:40])
                await error_response(refusal)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded
