"""OpenAI-compatible embeddings: ``POST {base}/v1/embeddings`` (llama.cpp server, vLLM, TEI,
LM Studio, Ollama's compatible endpoint), plus the HTTP plumbing the other remote
providers share.

Cancellation, and what it does NOT reach:

- A call whose scope is already cancelled opens zero requests (checked before the
  request task is created).
- Every request is raced against the caller's scope and the provider's own deadline
  (``OPENAI_COMPATIBLE_REQUEST_TIMEOUT``). Either one cancels the request task, and
  httpx/httpcore then closes that connection (an HTTP/1.1 connection with an
  unfinished exchange is never returned to the pool), so the server observes the
  disconnect. The request task has settled before ``embed`` returns or raises: nothing
  the provider owns outlives the call (the deadline timer included).
- Remote work is NOT cancelled by that disconnect. llama.cpp keeps computing a batch it
  has already started (it notices the closed socket only when it tries to answer), and
  vLLM/TEI may likewise finish a queued batch. The local side is released at once; the
  provider's capacity may stay busy until that batch ends.

No silent truncation: no truncate option is ever sent (vLLM's
``truncate_prompt_tokens`` and the like stay unset), so an input beyond the server's
context comes back as an error, which classifies as a refusal (4xx, or llama.cpp's
"input is too large" 500), never as a shortened embedding. Some servers truncate anyway
(llama-cpp-python's server cuts every input to its batch, answering 200): where the
server has a token-count endpoint (``/extras/tokenize/count``), inputs that could exceed
its limit are counted before sending and the answer's ``usage.prompt_tokens`` is checked
against the count; an input over the limit, or an answer that embedded fewer tokens than
were sent, is a size refusal naming both numbers, never a stored prefix.

Server facts (``server_facts``, read once): llama.cpp's ``/props`` (``total_slots``, the
per-slot ``n_ctx``) and ``/slots`` (which are busy), and whether a token-count endpoint
exists. ``free_slots`` gives the lane its default ``max_inflight``.
"""

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np

from neo_assets.core import codes
from neo_assets.core.band import token_bound
from neo_assets.embedding.cancel import Cancelled, CancelScope
from neo_assets.embedding.failures import (
    EmbedFailure,
    bounded,
    classify_failure,
    classify_http_status,
    provider_timeout_code,
)
from neo_assets.embedding.vectors import validate_vectors

T = TypeVar("T")
# A limit discovery is one short question before the sweep's first request.
DISCOVERY_TIMEOUT_S = 5.0


async def race_request(
    start: Callable[[], Awaitable[T]],
    cancel_scope: CancelScope,
    *,
    timeout_s: float,
    timeout_code: str,
    provider: str,
    operation_label: str,
) -> T:
    """Run ``start()`` unless and until the caller's scope or the provider deadline ends it.

    - already-cancelled scope: ``start`` is never called (zero requests);
    - caller's scope cancelled first: the request task is cancelled (its connection
      closed) and the caller's own cause is raised as ``Cancelled``;
    - deadline first: a deadline scope is cancelled with ``timeout_code`` and
      ``EmbedFailure(TIMEOUT, provider_code=timeout_code)`` is raised from it;
    - the request's own outcome otherwise.

    Both tasks (request and watcher, which owns the deadline timer) have settled before
    this returns, also when the awaiting task is itself cancelled.
    """
    cancel_scope.raise_if_cancelled()
    request: asyncio.Future[T] = asyncio.ensure_future(start())
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
            f"provider={provider} phase=in-flight",
        )
    if request.done() and not request.cancelled():
        return request.result()
    deadline = CancelScope(label=operation_label)
    deadline.cancel(timeout_code)
    timeout_ms = int(round(timeout_s * 1000))
    try:
        deadline.raise_if_cancelled()
    except Cancelled as expired:
        raise EmbedFailure(
            codes.KB_VECTOR_EMBED_TIMEOUT,
            provider_code=timeout_code,
            operation_label=operation_label,
            detail=f"request deadline {timeout_ms} ms passed",
            provider=provider,
            timeout_ms=timeout_ms,
        ) from expired
    raise AssertionError("unreachable")


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
    """One owned ``httpx.AsyncClient`` plus the deadline/cancellation/classification rules.

    Every remote provider (OpenAI-compatible, Ollama, Gemini) posts through ``post_json``,
    so all of them share one behaviour for zero-request cancellation, in-flight
    disconnect and the failure taxonomy.
    """

    def __init__(
        self,
        provider: str,
        *,
        request_timeout_ms: int,
        headers: dict[str, str] | None = None,
        max_connections: int = 16,
    ) -> None:
        if request_timeout_ms <= 0:
            raise ValueError("request_timeout_ms must be positive")
        self.provider = provider
        self.timeout_s = request_timeout_ms / 1000.0
        self.timeout_code = provider_timeout_code(provider)
        self._headers = headers or {}
        self._max_connections = max_connections
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _client_here(self) -> httpx.AsyncClient:
        """The client of the running loop, made on first use in it.

        Connections belong to the loop that opened them: a client left open by an earlier
        loop (a finished ``asyncio.run``) cannot be reused, only dropped (its sockets then
        wait for the garbage collector). So close the provider before its loop ends;
        a later call, in any loop, opens a fresh pool.
        """
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            # httpx's own timeouts are only a backstop behind our deadline, which is the
            # one that carries the provider's timeout code.
            backstop = self.timeout_s * 2 + 5.0
            self._client = httpx.AsyncClient(
                headers=self._headers,
                timeout=httpx.Timeout(backstop),
                limits=httpx.Limits(
                    max_connections=self._max_connections,
                    max_keepalive_connections=self._max_connections,
                ),
            )
            self._client_loop = loop
        return self._client

    @property
    def is_closed(self) -> bool:
        """No open pool: never used, or closed by ``aclose`` (keep-alive connections gone)."""
        return self._client is None or self._client.is_closed

    async def post_json(
        self,
        url: str,
        payload: dict[str, Any],
        cancel_scope: CancelScope,
        operation_label: str,
        *,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """POST ``payload``; the parsed JSON body of a 2xx answer, else a classified failure."""
        return await self._request_json(
            lambda client: client.post(url, json=payload, headers=headers, params=params),
            cancel_scope,
            operation_label,
        )

    async def get_json(self, url: str, cancel_scope: CancelScope, operation_label: str) -> Any:
        """GET ``url``; the parsed JSON of a 2xx answer, else a classified failure."""
        return await self._request_json(
            lambda client: client.get(url), cancel_scope, operation_label
        )

    async def _request_json(
        self,
        send: Callable[[httpx.AsyncClient], Awaitable[httpx.Response]],
        cancel_scope: CancelScope,
        operation_label: str,
    ) -> Any:
        client = self._client_here()
        try:
            response = await race_request(
                lambda: send(client),
                cancel_scope,
                timeout_s=self.timeout_s,
                timeout_code=self.timeout_code,
                provider=self.provider,
                operation_label=operation_label,
            )
        except (Cancelled, EmbedFailure):
            raise
        except httpx.TimeoutException as exc:
            raise EmbedFailure(
                codes.KB_VECTOR_EMBED_TIMEOUT,
                provider_code=self.timeout_code,
                operation_label=operation_label,
                detail=f"{type(exc).__name__}",
                provider=self.provider,
                timeout_ms=int(round(self.timeout_s * 1000)),
            ) from exc
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

    async def post_json_or_none(
        self,
        url: str,
        payload: dict[str, Any],
        cancel_scope: CancelScope,
        operation_label: str,
        *,
        timeout_s: float,
    ) -> Any:
        """POST for a discovery: the JSON body of a 2xx answer, None on any failure."""
        return await self._json_or_none(
            "POST", url, payload, cancel_scope, operation_label, timeout_s
        )

    async def _json_or_none(
        self,
        method: str,
        url: str,
        payload: dict[str, Any] | None,
        cancel_scope: CancelScope,
        operation_label: str,
        timeout_s: float,
    ) -> Any:
        client = self._client_here()
        try:
            response = await race_request(
                lambda: client.request(method, url, json=payload),
                cancel_scope,
                timeout_s=timeout_s,
                timeout_code=self.timeout_code,
                provider=self.provider,
                operation_label=operation_label,
            )
        except Cancelled:
            raise
        except (EmbedFailure, httpx.HTTPError, OSError):
            return None
        if response.status_code >= 400:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    async def aclose(self) -> None:
        """Close the pool and its connections (a later call opens a new pool)."""
        client = self._client
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()


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


def truncation_refusal(
    provider: str, operation_label: str, *, counted: int, limit: int | None, embedded: int | None
) -> EmbedFailure:
    """A size refusal for an input the server would cut (or did cut) silently."""
    if embedded is not None:
        detail = (
            f"input is too large: the server embedded {embedded} of the {counted} tokens "
            "sent (it truncates silently); nothing was stored"
        )
    else:
        detail = (
            f"input ({counted} tokens) is too large: the server's limit is {limit} tokens "
            "and it truncates silently; not sent"
        )
    # A size refusal (geometry, never content): the input alone is fenced
    # undeliverable-at-geometry with the server's limit in its receipt.
    return EmbedFailure(
        codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        status=413,
        operation_label=operation_label,
        detail=detail,
        provider=provider,
        limit_tokens=limit if limit is not None else embedded,
    )


def _decode_embedding(value: Any) -> Any:
    # A server that ignores encoding_format may still answer base64 float32.
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype=np.float32)
    return value


class OpenAICompatibleProvider:
    """``POST {base}/v1/embeddings`` with ``{"model", "input", "encoding_format": "float"}``.

    ``max_inputs_per_request`` splits a call into sub-requests (the scope is observed
    between them, so no sub-request starts after cancellation); ``None`` sends the whole
    call as one request and leaves batch sizing to the lane.
    """

    name = "openai_compatible"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        request_timeout_ms: int = 60_000,
        max_inputs_per_request: int | None = None,
        token_limit: int | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.dimensions = dimensions
        self.max_inputs_per_request = max_inputs_per_request
        # The server's per-input token limit: configured, read from /props, or learned from
        # a truncation it was caught at.
        self.token_limit = token_limit
        # A cap on inputs per request the server named (the lane learns and keeps it here).
        self.batch_cap: int | None = None
        self._facts: dict[str, Any] | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.transport = HttpEmbeddingTransport(
            self.name, request_timeout_ms=request_timeout_ms, headers=headers
        )
        self._url = join_url(base_url, "/v1/embeddings")

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        step = self.max_inputs_per_request or len(texts)
        parts = []
        for start in range(0, len(texts), step):
            parts.append(
                await self._embed_once(
                    list(texts[start : start + step]), cancel_scope, operation_label
                )
            )
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    # ------------------------------------------------------------------ server facts
    async def server_facts(self, cancel_scope: CancelScope) -> dict[str, Any]:
        """What the server says about itself, read once: ``slots`` (total), ``free_slots``,
        ``n_ctx`` (per slot), ``count_tokens`` (a token-count endpoint exists)."""
        if self._facts is not None:
            return self._facts
        facts: dict[str, Any] = {}
        try:
            props = await self.transport.get_json(
                join_url(self.base_url, "/props"), cancel_scope, "server-props"
            )
        except EmbedFailure:
            props = None
        if isinstance(props, dict):
            total = props.get("total_slots")
            if isinstance(total, int) and total >= 1:
                facts["slots"] = total
            settings = props.get("default_generation_settings")
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            if isinstance(n_ctx, int) and n_ctx >= 1:
                facts["n_ctx"] = n_ctx
            try:
                slots = await self.transport.get_json(
                    join_url(self.base_url, "/slots"), cancel_scope, "server-slots"
                )
            except EmbedFailure:
                slots = None
            if isinstance(slots, list) and slots:
                busy = sum(
                    1 for slot in slots if isinstance(slot, dict) and slot.get("is_processing")
                )
                facts["free_slots"] = len(slots) - busy
        else:
            try:
                counted = await self.transport.post_json(
                    join_url(self.base_url, "/extras/tokenize/count"),
                    {"input": "ping", "model": self.model},
                    cancel_scope,
                    "server-tokenize",
                )
            except EmbedFailure:
                counted = None
            facts["count_tokens"] = isinstance(counted, dict) and isinstance(
                counted.get("count"), int
            )
            if facts["count_tokens"] and self.token_limit is None:
                facts["truncates_at"] = await self._truncation_limit(cancel_scope)
                self.token_limit = facts["truncates_at"]
        if self.token_limit is None and isinstance(facts.get("n_ctx"), int):
            self.token_limit = facts["n_ctx"]
        self._facts = facts
        return facts

    async def _truncation_limit(self, cancel_scope: CancelScope) -> int | None:
        """Where a server that can count tokens cuts an input: a probe far longer than any
        embedding model's window, counted, then embedded; fewer tokens embedded than
        counted is the cut. None when nothing was cut (or nothing could be learned)."""
        probe = "def ping(): return 'pong'\n" * 1024
        url = join_url(self.base_url, "/extras/tokenize/count")
        try:
            counted = await self.transport.post_json(
                url, {"input": probe, "model": self.model}, cancel_scope, "server-tokenize"
            )
            body = await self.transport.post_json(
                self._url,
                {"model": self.model, "input": [probe], "encoding_format": "float"},
                cancel_scope,
                "server-truncation-probe",
            )
        except EmbedFailure:
            return None
        count = counted.get("count") if isinstance(counted, dict) else None
        usage = body.get("usage") if isinstance(body, dict) else None
        embedded = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(count, int) and isinstance(embedded, int) and 0 < embedded < count:
            return embedded
        return None

    async def free_slots(self, cancel_scope: CancelScope) -> int | None:
        """The slots the server reports free (all of them when it reports only a total);
        None when it reports neither."""
        facts = await self.server_facts(cancel_scope)
        free = facts.get("free_slots")
        if isinstance(free, int):
            return max(1, free)
        total = facts.get("slots")
        return total if isinstance(total, int) else None

    async def _count_tokens(
        self, texts: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> list[int | None]:
        """Each input's token count by the server's own tokenizer, where it could matter
        (None: too short to exceed the limit, or nothing to count with)."""
        facts = await self.server_facts(cancel_scope)
        if not facts.get("count_tokens"):
            return [None] * len(texts)
        limit = self.token_limit
        url = join_url(self.base_url, "/extras/tokenize/count")
        counts: list[int | None] = []
        for text in texts:
            if limit and token_bound(text) <= limit:  # cannot exceed it: not asked
                counts.append(None)
                continue
            body = await self.transport.post_json(
                url, {"input": text, "model": self.model}, cancel_scope, operation_label
            )
            count = body.get("count") if isinstance(body, dict) else None
            counts.append(count if isinstance(count, int) else None)
        return counts

    async def _embed_once(
        self, texts: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        counts = await self._count_tokens(texts, cancel_scope, operation_label)
        for count in counts:
            if count is not None and self.token_limit is not None and count > self.token_limit:
                raise truncation_refusal(
                    self.name, operation_label, counted=count, limit=self.token_limit, embedded=None
                )
        payload = {"model": self.model, "input": texts, "encoding_format": "float"}
        body = await self.transport.post_json(self._url, payload, cancel_scope, operation_label)
        self._check_truncation(texts, counts, body, operation_label)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise malformed(self.name, operation_label, "no data list")
        try:
            # Answers may arrive out of order; ``index`` is the only alignment.
            ordered = sorted(data, key=lambda item: int(item["index"]))
            indices = [int(item["index"]) for item in ordered]
            raw = [_decode_embedding(item["embedding"]) for item in ordered]
        except (KeyError, TypeError, ValueError) as exc:
            raise malformed(self.name, operation_label, "data items lack index/embedding") from exc
        if indices != list(range(len(indices))):
            raise malformed(self.name, operation_label, "indices are not 0..n-1")
        return validate_vectors(
            raw,
            len(texts),
            self.dimensions,
            operation_label=operation_label,
            provider=self.name,
        )

    def _check_truncation(
        self, texts: list[str], counts: list[int | None], body: Any, operation_label: str
    ) -> None:
        """Every input was counted: the server must have embedded at least that many
        tokens (``usage.prompt_tokens``), else it cut something. One input alone tells the
        limit it was cut at, which is kept for the next requests."""
        if not counts or any(c is None for c in counts):
            return
        usage = body.get("usage") if isinstance(body, dict) else None
        embedded = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        sent = sum(c for c in counts if c is not None)
        if not isinstance(embedded, int) or embedded >= sent:
            return
        if len(texts) == 1 and self.token_limit is None:
            self.token_limit = embedded
        raise truncation_refusal(
            self.name, operation_label, counted=sent, limit=self.token_limit, embedded=embedded
        )

    async def discover_limit(self, cancel_scope: CancelScope) -> Any:
        """llama.cpp's own limit per input: ``/props``'s ``n_ctx`` per slot
        (``default_generation_settings.n_ctx``, read once with the server's other facts).
        None from servers without ``/props`` (vLLM, TEI, llama-cpp-python's server): their
        limit is the configured one (llama-cpp-python's silent cut is found apart)."""
        from neo_assets.core.band import ProviderLimit  # noqa: PLC0415

        n_ctx = (await self.server_facts(cancel_scope)).get("n_ctx")
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            return ProviderLimit(n_ctx, "llama.cpp /props default_generation_settings.n_ctx")
        return None

    async def aclose(self) -> None:
        await self.transport.aclose()
