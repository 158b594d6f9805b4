"""OpenAI-compatible embeddings: ``POST {base}/v1/embeddings`` (llama.cpp server, vLLM, TEI,
LM Studio, Ollama's compatible endpoint), on ``providers/http.py``. No truncate option is
ever sent; a server that truncates anyway is caught by counting tokens first.
``server_facts`` gives the lane its default ``max_inflight``.
Design: docs/design/embedding.md#providers"""

import base64
from typing import Any

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.http import (
    HttpProvider,
    answer_or_none,
    join_url,
    malformed,
)
from neo_assets.embedding.rules.band import ProviderLimit, token_bound


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


class OpenAICompatibleProvider(HttpProvider):
    """``POST {base}/v1/embeddings``. ``max_inputs_per_request`` splits a call into sub-requests
    (none starts after cancellation); ``None`` leaves batch sizing to the lane."""

    name = "openai_compatible"
    path = "/v1/embeddings"
    # The server's per-input token limit: configured, read from /props, or learned from
    # a truncation it was caught at.
    token_limit: int | None = None
    # A cap on inputs per request the server named (the lane learns and keeps it here).
    batch_cap: int | None = None
    _facts: dict[str, Any] | None = None

    # ------------------------------------------------------------------ server facts
    async def server_facts(self, cancel_scope: CancelScope) -> dict[str, Any]:
        """What the server says about itself, read once: ``slots`` (total), ``free_slots``,
        ``n_ctx`` (per slot), ``count_tokens`` (a token-count endpoint exists)."""
        if self._facts is not None:
            return self._facts
        facts: dict[str, Any] = {}
        props = await answer_or_none(
            self.transport.request_json(
                join_url(self.base_url, "/props"), None, cancel_scope, "server-props"
            )
        )
        if isinstance(props, dict):
            total = props.get("total_slots")
            if isinstance(total, int) and total >= 1:
                facts["slots"] = total
            settings = props.get("default_generation_settings")
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            if isinstance(n_ctx, int) and n_ctx >= 1:
                facts["n_ctx"] = n_ctx
            slots = await answer_or_none(
                self.transport.request_json(
                    join_url(self.base_url, "/slots"), None, cancel_scope, "server-slots"
                )
            )
            if isinstance(slots, list) and slots:
                busy = sum(
                    1 for slot in slots if isinstance(slot, dict) and slot.get("is_processing")
                )
                facts["free_slots"] = len(slots) - busy
        else:
            counted = await answer_or_none(self._count("ping", cancel_scope, "server-tokenize"))
            facts["count_tokens"] = counted is not None
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
        try:
            count = await self._count(probe, cancel_scope, "server-tokenize")
            body = await self.transport.request_json(
                self._url,
                {"model": self.model, "input": [probe], "encoding_format": "float"},
                cancel_scope,
                "server-truncation-probe",
            )
        except EmbedFailure:
            return None
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
        counts: list[int | None] = []
        for text in texts:
            if limit and token_bound(text) <= limit:  # cannot exceed it: not asked
                counts.append(None)
                continue
            counts.append(await self._count(text, cancel_scope, operation_label))
        return counts

    async def _count(self, text: str, cancel_scope: CancelScope, label: str) -> int | None:
        """``text``'s tokens by the server's ``/extras/tokenize/count`` (None: no count)."""
        url = join_url(self.base_url, "/extras/tokenize/count")
        body = await self.transport.request_json(
            url, {"input": text, "model": self.model}, cancel_scope, label
        )
        count = body.get("count") if isinstance(body, dict) else None
        return count if isinstance(count, int) else None

    async def _embed_batch(
        self, texts: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> Any:
        counts = await self._count_tokens(texts, cancel_scope, operation_label)
        for count in counts:
            if count is not None and self.token_limit is not None and count > self.token_limit:
                raise truncation_refusal(
                    self.name, operation_label, counted=count, limit=self.token_limit, embedded=None
                )
        payload = {"model": self.model, "input": texts, "encoding_format": "float"}
        body = await self.transport.request_json(self._url, payload, cancel_scope, operation_label)
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
        return raw

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

    async def discover_limit(self, cancel_scope: CancelScope) -> ProviderLimit | None:
        """llama.cpp's own limit per input: ``/props``'s ``n_ctx`` per slot
        (``default_generation_settings.n_ctx``, read once with the server's other facts).
        None from servers without ``/props`` (vLLM, TEI, llama-cpp-python's server): their
        limit is the configured one (llama-cpp-python's silent cut is found apart)."""
        n_ctx = (await self.server_facts(cancel_scope)).get("n_ctx")
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            return ProviderLimit(n_ctx, "llama.cpp /props default_generation_settings.n_ctx")
        return None


def build(args: ProviderArgs) -> OpenAICompatibleProvider:
    assert args.base_url is not None and args.model is not None  # provider_requirements
    return OpenAICompatibleProvider(
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        dimensions=args.dimensions,
        request_timeout_ms=args.request_timeout_ms,
    )
