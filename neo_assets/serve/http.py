"""The HTTP API (starlette): ``POST /v1/search``, ``GET /v1/chunks/{id}``,
``GET /v1/chunks/{id}/related``, ``GET /v1/repos``, ``GET /healthz`` (liveness),
``GET /readyz`` (readiness: ``serve.readiness``), and the code tools
``POST /v1/find_symbol``, ``/v1/find_references``, ``/v1/grep``, ``/v1/read_file``,
``/v1/list_files`` (``code_tools``). Every refusal is a
JSON ``{"error": {"code", "message", "field"}}`` with a 4xx status; no traceback leaves."""

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from neo_assets.code_tools.rules.tools import TOOLS
from neo_assets.core import codes
from neo_assets.query.deadline import checkpoint, request_deadline
from neo_assets.query.rules.request import QueryInputError, parse_search
from neo_assets.serve.auth import authenticate, bearer, refuse_logged
from neo_assets.serve.readiness import readiness
from neo_assets.serve.rules.tokens import TokenRecord
from neo_assets.serve.runtime import Runtime

log = logging.getLogger("neo_assets.serve")


def error_response(exc: QueryInputError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(exc.as_json(), status_code=exc.status, headers=headers)


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request's JSON body, read at most ``max_bytes`` (413 past it), strictly UTF-8."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise QueryInputError(
            codes.QUERY_CONTENT_TYPE,
            f"content-type must be application/json (got {ctype[:64] or 'none'!r})",
            "content-type",
            status=415,
        )
    too_large = QueryInputError(
        codes.QUERY_BODY_TOO_LARGE,
        f"the body is larger than {max_bytes} bytes (NEO_SERVE_MAX_BODY_BYTES); send the "
        "question, not the code base",
        "body",
        status=413,
    )
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > max_bytes
    ):
        raise too_large
    body = bytearray()
    try:
        async for part in request.stream():
            body += part
            if len(body) > max_bytes:
                raise too_large
    except ClientDisconnect:
        raise QueryInputError(codes.QUERY_INVALID, "the body ended early", "body") from None
    try:
        text = bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QueryInputError(
            codes.QUERY_INVALID_UTF8,
            f"the body is not valid UTF-8 (byte {exc.start}); send UTF-8 JSON",
            "body",
        ) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise QueryInputError(
            codes.QUERY_MALFORMED_JSON, "the body's JSON is nested too deeply", "body"
        ) from None
    except ValueError as exc:
        raise QueryInputError(
            codes.QUERY_MALFORMED_JSON, f"the body is not JSON: {exc}"[:300], "body"
        ) from None


def _handler(
    runtime: Runtime,
    name: str,
    body: Callable[[Request, TokenRecord], Awaitable[Any]],
) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, take the token's slot, run ``body`` under the request deadline, and turn
    every refusal into its JSON answer. Past the deadline the work is cut
    (``query.deadline``) and the answer is 504, never 200."""

    async def handle(request: Request) -> Response:
        record: TokenRecord | None = None
        try:
            record = await anyio.to_thread.run_sync(
                lambda: authenticate(
                    runtime.resident.ledger,
                    bearer(request.headers.get("authorization")),
                    where=f"{request.method} {request.url.path}",
                    declared=runtime.tenant_declared,
                )
            )
            timeout = runtime.settings.serve.request_timeout_s
            async with runtime.limiter.slot(record.id):
                with request_deadline(timeout), anyio.fail_after(timeout):
                    answer = await body(request, record)
                    checkpoint("answering")
                    return JSONResponse(answer)
        except QueryInputError as exc:
            if record is not None:
                refuse_logged(record, exc, where=f"{request.method} {request.url.path}")
            return error_response(exc)
        except TimeoutError:
            return error_response(
                QueryInputError(
                    codes.QUERY_TIMEOUT,
                    f"{name} took longer than {runtime.settings.serve.request_timeout_s} s "
                    "(NEO_SERVE_REQUEST_TIMEOUT_S); narrow the request or retry",
                    None,
                    status=504,
                )
            )
        except Exception:
            log.exception("%s failed", name)
            message = "the service could not answer; its log says why"
            failed = QueryInputError(codes.QUERY_UNAVAILABLE, message, None, status=500)
            return error_response(failed)

    return handle


def routes(runtime: Runtime) -> list[Route]:
    svc = runtime.service

    async def search(request: Request, record: TokenRecord) -> Any:
        parsed = parse_search(await read_json(request, runtime.settings.serve.max_body_bytes))
        return await svc.search(record.tenant_id, parsed, record.repos)

    async def chunk(request: Request, record: TokenRecord) -> Any:
        cid = request.path_params["chunk_id"]
        return await anyio.to_thread.run_sync(
            svc.chunk, record.tenant_id, record.repos, cid, abandon_on_cancel=True
        )

    async def related(request: Request, record: TokenRecord) -> Any:
        cid = request.path_params["chunk_id"]
        raw = request.query_params.get("limit", "10")
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
            raise QueryInputError(codes.QUERY_INVALID, "limit: must be an integer", "limit")
        return await anyio.to_thread.run_sync(
            svc.related, record.tenant_id, record.repos, cid, int(raw), abandon_on_cancel=True
        )

    async def repos(_request: Request, record: TokenRecord) -> Any:
        return await anyio.to_thread.run_sync(
            svc.repos, record.tenant_id, record.repos, abandon_on_cancel=True
        )

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_request: Request) -> Response:
        try:
            ready, body = await readiness(runtime)
        except Exception:
            log.exception("readiness failed")
            ready, body = False, {"status": "not ready", "failed": ["service"], "checks": {}}
        return JSONResponse(body, status_code=200 if ready else 503)

    def code_tool(tool: str) -> Callable[[Request, TokenRecord], Awaitable[Any]]:
        async def run(request: Request, record: TokenRecord) -> Any:
            body = await read_json(request, runtime.settings.serve.max_body_bytes)
            return await anyio.to_thread.run_sync(
                runtime.tools.call, tool, record.tenant_id, record.repos, body
            )

        return run

    tools = [
        Route(f"/v1/{name}", _handler(runtime, name, code_tool(name)), methods=["POST"])
        for name in TOOLS
    ]
    return [
        *tools,
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/search", _handler(runtime, "search", search), methods=["POST"]),
        Route("/v1/chunks/{chunk_id}", _handler(runtime, "get chunk", chunk), methods=["GET"]),
        Route(
            "/v1/chunks/{chunk_id}/related",
            _handler(runtime, "related chunks", related),
            methods=["GET"],
        ),
        Route("/v1/repos", _handler(runtime, "list repos", repos), methods=["GET"]),
    ]
