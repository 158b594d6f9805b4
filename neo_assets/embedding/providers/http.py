"""The HTTP plumbing every remote embedding provider shares: one request raced against the
caller's cancellation scope and the provider's own deadline (the connection closed, the
task settled before the call returns), JSON in and out, every failure classified into the
closed taxonomy (``embedding/failures.py``). A provider module builds on ``HttpProvider``
and its ``HttpEmbeddingTransport``, and never imports a sibling provider."""

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled, CancelScope
from neo_assets.embedding.failures import (
    EmbedFailure,
    bounded,
    classify_failure,
    classify_http_status,
)
from neo_assets.embedding.provider import embed_in_batches
from neo_assets.embedding.rules.provider_kinds import timeout_code

T = TypeVar("T")
# A limit discovery is one short question before the sweep's first request.
DISCOVERY_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 16  # one provider's pool


def error_message(response: httpx.Response) -> str:
    """The provider's own error text: ``{"error": {"message"}}``, ``{"error": "..."}``, or body."""
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return bounded(text.strip())
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for key in ("message", "detail", "error"):
                if isinstance(err.get(key), str):
                    return bounded(err[key])
        if isinstance(err, str):
            return bounded(err)
    return bounded(text.strip())


class HttpEmbeddingTransport:
    """One owned ``httpx.AsyncClient`` plus the deadline, cancellation and classification rules
    every remote provider shares through ``request_json``."""

    def __init__(
        self,
        provider: str,
        *,
        request_timeout_ms: int,
        headers: dict[str, str] | None = None,
    ) -> None:
        if request_timeout_ms <= 0:
            raise ValueError("request_timeout_ms must be positive")
        self.provider = provider
        self.timeout_s = request_timeout_ms / 1000.0
        self.timeout_code = timeout_code(provider)
        self._headers = headers or {}
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _client_here(self) -> httpx.AsyncClient:
        """The client of the running loop, made on first use in it: connections belong to the loop
        that opened them, so one left by an earlier loop is dropped, not reused."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            # httpx's own timeouts are only a backstop behind our deadline, which is the
            # one that carries the provider's timeout code.
            backstop = self.timeout_s * 2 + 5.0
            self._client = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(backstop),
                limits=httpx.Limits(
                    max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
                ),
            )
            self._client_loop = loop
        return self._client

    @property
    def is_closed(self) -> bool:
        """No open pool: never used, or closed by ``aclose`` (keep-alive connections gone)."""
        return self._client is None or self._client.is_closed

    async def request_json(
        self,
        url: str,
        payload: dict[str, Any] | None,
        cancel_scope: CancelScope,
        operation_label: str,
        *,
        timeout_s: float | None = None,
    ) -> Any:
        """POST ``payload`` (GET ``url`` when None); the parsed JSON body of a 2xx answer, else
        a classified failure (``timeout_s``: a deadline other than the provider's request
        timeout)."""
        method = "GET" if payload is None else "POST"
        timeout_s = timeout_s or self.timeout_s
        client = self._client_here()
        try:
            response = await self._race(
                lambda: client.request(method, url, json=payload),
                cancel_scope,
                operation_label,
                timeout_s,
            )
        except (Cancelled, EmbedFailure):
            raise
        except httpx.TimeoutException as exc:
            raise self._deadline_passed(operation_label, timeout_s, type(exc).__name__) from exc
        except (httpx.HTTPError, OSError) as exc:
            raise EmbedFailure(
                classify_failure(exc),
                operation_label=operation_label,
                detail=f"{type(exc).__name__}: {exc}",
                provider=self.provider,
            ) from exc
        if response.status_code >= 400:
            message = error_message(response)
            raise EmbedFailure(
                classify_http_status(response.status_code, message),
                status=response.status_code,
                operation_label=operation_label,
                detail=message,
                provider=self.provider,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EmbedFailure(
                codes.KB_VECTOR_EMBED_UNCLASSIFIED,
                status=response.status_code,
                operation_label=operation_label,
                detail="response body is not JSON",
                provider=self.provider,
            ) from exc

    async def _race(
        self,
        start: Callable[[], Awaitable[httpx.Response]],
        cancel_scope: CancelScope,
        operation_label: str,
        timeout_s: float,
    ) -> httpx.Response:
        """Run ``start()`` unless and until the caller's scope (raises ``Cancelled`` with its
        cause) or the provider deadline (``EmbedFailure(TIMEOUT)``) ends it. Never starts under
        an already-cancelled scope; both tasks have settled before it returns."""
        cancel_scope.raise_if_cancelled()
        request = asyncio.ensure_future(start())
        # The watcher returns normally when the deadline passes, raises Cancelled when the
        # caller's scope ends first: one timer, released when the watcher settles.
        watcher = asyncio.ensure_future(cancel_scope.sleep(timeout_s))
        try:
            await asyncio.wait({request, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (request, watcher):
                if not task.done():
                    task.cancel()
            await asyncio.wait({request, watcher})
            for task in (request, watcher):
                if not task.cancelled():
                    task.exception()  # retrieved: an outcome we drop must not warn at GC
        if cancel_scope.cancelled:
            raise Cancelled(
                cancel_scope.cause or codes.ABORT_ERR,
                operation_label,
                f"provider={self.provider} phase=in-flight",
            )
        if request.done() and not request.cancelled():
            return request.result()
        deadline = Cancelled(self.timeout_code, operation_label)
        raise self._deadline_passed(operation_label, timeout_s) from deadline

    def _deadline_passed(
        self, operation_label: str, timeout_s: float, detail: str = ""
    ) -> EmbedFailure:
        """The provider's own deadline passed: a timeout with its timeout code."""
        timeout_ms = int(round(timeout_s * 1000))
        return EmbedFailure(
            codes.KB_VECTOR_EMBED_TIMEOUT,
            provider_code=self.timeout_code,
            operation_label=operation_label,
            detail=detail or f"request deadline {timeout_ms} ms passed",
            provider=self.provider,
            timeout_ms=timeout_ms,
        )

    async def aclose(self) -> None:
        """Close the pool and its connections (a later call opens a new pool)."""
        client = self._client
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()


async def answer_or_none(request: Awaitable[T]) -> T | None:
    """``request``'s answer; None when it failed (a question the server need not answer)."""
    try:
        return await request
    except EmbedFailure:
        return None


class HttpProvider:
    """What the remote providers share: a transport, the URL embeddings are asked at, and a
    call split into sub-requests of at most ``max_inputs_per_request`` inputs (None: one
    request; none starts after cancellation). A provider answers one sub-request's rows
    (``_embed_batch``); the key goes as a bearer token unless it says otherwise."""

    name: str
    path: str  # where embeddings are asked, under the base URL

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        request_timeout_ms: int = 60_000,
        max_inputs_per_request: int | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.dimensions = dimensions
        self.max_inputs_per_request = max_inputs_per_request
        self.transport = HttpEmbeddingTransport(
            self.name, request_timeout_ms=request_timeout_ms, headers=self._headers(api_key)
        )
        self._url = join_url(base_url, self._path())

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return bearer(api_key)

    def _path(self) -> str:
        return self.path

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        async def send(batch: list[str], _start: int) -> Any:
            return await self._embed_batch(batch, cancel_scope, operation_label)

        return await embed_in_batches(
            texts,
            self.max_inputs_per_request,
            self.dimensions,
            send,
            cancel_scope,
            provider=self.name,
            operation_label=operation_label,
        )

    async def _embed_batch(
        self, batch: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self.transport.aclose()


def bearer(api_key: str | None) -> dict[str, str]:
    """The header carrying ``api_key`` to a server that wants one (none when not set)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def malformed(provider: str, operation_label: str, what: str) -> EmbedFailure:
    """A 2xx answer without the vectors the protocol promises: the provider's fault."""
    return EmbedFailure(
        codes.KB_VECTOR_EMBED_INVALID_VECTORS,
        operation_label=operation_label,
        detail=f"malformed response: {what}",
        provider=provider,
    )


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path
