"""Ollama native embeddings: ``POST {base}/api/embed`` with ``truncate: false`` (an error,
never an embedding of a prefix) and ``options.num_ctx`` set to the band's limit, so the
model runs with the context the band assumes. Design: docs/design/embedding.md#providers"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.http import (
    DISCOVERY_TIMEOUT_S,
    HttpEmbeddingTransport,
    join_url,
    malformed,
)
from neo_assets.embedding.vectors import validate_vectors


class OllamaProvider:
    """``{"model", "input": [...], "truncate": false}`` → ``{"embeddings": [[...]]}``."""

    name = "ollama"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        request_timeout_ms: int = 60_000,
        api_key: str | None = None,
        max_inputs_per_request: int | None = None,
        num_ctx: int | None = None,
    ) -> None:
        self.base_url = base_url
        # Sent as options.num_ctx: Ollama's own default context (2048, or the Modelfile's)
        # is not the band the lane sizes inputs for, so it is always said explicitly.
        self.num_ctx = num_ctx
        self.batch_cap: int | None = None
        self.model = model
        self.dimensions = dimensions
        self.max_inputs_per_request = max_inputs_per_request
        # Ollama itself has no keys; a reverse proxy in front of it may want one.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.transport = HttpEmbeddingTransport(
            self.name, request_timeout_ms=request_timeout_ms, headers=headers
        )
        self._url = join_url(base_url, "/api/embed")

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        step = self.max_inputs_per_request or len(texts)
        parts = []
        for start in range(0, len(texts), step):
            batch = list(texts[start : start + step])
            payload: dict[str, Any] = {"model": self.model, "input": batch, "truncate": False}
            if self.num_ctx is not None:
                payload["options"] = {"num_ctx": self.num_ctx}
            body = await self.transport.post_json(self._url, payload, cancel_scope, operation_label)
            embeddings = body.get("embeddings") if isinstance(body, dict) else None
            if not isinstance(embeddings, list):
                raise malformed(self.name, operation_label, "no embeddings list")
            parts.append(
                validate_vectors(
                    embeddings,
                    len(batch),
                    self.dimensions,
                    operation_label=operation_label,
                    provider=self.name,
                )
            )
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    async def discover_limit(self, cancel_scope: CancelScope) -> Any:
        """The model's trained context from ``/api/show``; None when it does not say."""
        from neo_assets.embedding.rules.band import ProviderLimit  # noqa: PLC0415

        body = await self.transport.post_json_or_none(
            join_url(self.base_url, "/api/show"),
            {"model": self.model},
            cancel_scope,
            "discover-limit",
            timeout_s=min(self.transport.timeout_s, DISCOVERY_TIMEOUT_S),
        )
        info = body.get("model_info") if isinstance(body, dict) else None
        if not isinstance(info, dict):
            return None
        for key, value in info.items():
            if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
                return ProviderLimit(value, f"ollama /api/show model_info.{key}")
        return None

    async def aclose(self) -> None:
        await self.transport.aclose()


def build(args: ProviderArgs) -> OllamaProvider:
    assert args.base_url is not None and args.model is not None  # provider_requirements
    return OllamaProvider(
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        dimensions=args.dimensions,
        request_timeout_ms=args.request_timeout_ms,
        num_ctx=args.context_tokens,
    )
