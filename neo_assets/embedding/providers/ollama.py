"""Ollama native embeddings: ``POST {base}/api/embed`` with ``truncate: false`` (an error,
never an embedding of a prefix) and ``options.num_ctx`` set to the band's limit, so the
model runs with the context the band assumes. Design: docs/design/embedding.md#providers"""

from typing import Any

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.http import (
    DISCOVERY_TIMEOUT_S,
    HttpProvider,
    answer_or_none,
    join_url,
    malformed,
)
from neo_assets.embedding.rules.band import ProviderLimit


class OllamaProvider(HttpProvider):
    """``{"model", "input": [...], "truncate": false}`` → ``{"embeddings": [[...]]}``. Ollama
    itself has no keys; a reverse proxy in front of it may want one."""

    name = "ollama"
    path = "/api/embed"
    # Sent as options.num_ctx: Ollama's own default context (2048, or the Modelfile's)
    # is not the band the lane sizes inputs for, so it is always said explicitly.
    num_ctx: int | None = None
    batch_cap: int | None = None

    async def _embed_batch(
        self, batch: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> Any:
        payload: dict[str, Any] = {"model": self.model, "input": batch, "truncate": False}
        if self.num_ctx is not None:
            payload["options"] = {"num_ctx": self.num_ctx}
        body = await self.transport.request_json(self._url, payload, cancel_scope, operation_label)
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(embeddings, list):
            raise malformed(self.name, operation_label, "no embeddings list")
        return embeddings

    async def discover_limit(self, cancel_scope: CancelScope) -> ProviderLimit | None:
        """The model's trained context from ``/api/show``; None when it does not say."""
        body = await answer_or_none(
            self.transport.request_json(
                join_url(self.base_url, "/api/show"),
                {"model": self.model},
                cancel_scope,
                "discover-limit",
                timeout_s=min(self.transport.timeout_s, DISCOVERY_TIMEOUT_S),
            )
        )
        info = body.get("model_info") if isinstance(body, dict) else None
        if not isinstance(info, dict):
            return None
        for key, value in info.items():
            if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
                return ProviderLimit(value, f"ollama /api/show model_info.{key}")
        return None


def build(args: ProviderArgs) -> OllamaProvider:
    assert args.base_url is not None and args.model is not None  # provider_requirements
    provider = OllamaProvider(
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        dimensions=args.dimensions,
        request_timeout_ms=args.request_timeout_ms,
    )
    provider.num_ctx = args.context_tokens
    return provider
