"""Gemini embeddings over REST: ``POST {base}/v1beta/models/{model}:batchEmbedContents``.
The key travels in the ``x-goog-api-key`` header, out of URLs and logs; at most 100
inputs a request. Cancellation is client-only: Google may finish (and bill) after the
disconnect. Design: docs/design/embedding.md#providers"""

from collections.abc import Sequence
from urllib.parse import quote

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.http import (
    HttpEmbeddingTransport,
    join_url,
    malformed,
)
from neo_assets.embedding.vectors import validate_vectors
from neo_assets.generations.rules import normalised_model

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
GEMINI_MAX_BATCH = 100


class GeminiProvider:
    """``{"requests": [{"model", "content": {"parts": [{"text"}]}, "outputDimensionality"}]}``."""

    name = "gemini"

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        dimensions: int,
        base_url: str = GEMINI_BASE_URL,
        request_timeout_ms: int = 60_000,
        task_type: str | None = None,
        max_inputs_per_request: int = GEMINI_MAX_BATCH,
    ) -> None:
        if not api_key:
            raise ValueError("Gemini needs an API key")
        self.base_url = base_url
        # The API names models "models/<id>"; accept either spelling from settings.
        self.model = normalised_model(self.name, model)
        self.dimensions = dimensions
        self.task_type = task_type
        self.max_inputs_per_request = max(1, min(max_inputs_per_request, GEMINI_MAX_BATCH))
        self.transport = HttpEmbeddingTransport(
            self.name,
            request_timeout_ms=request_timeout_ms,
            headers={"x-goog-api-key": api_key},
        )
        self._url = join_url(
            base_url, f"/v1beta/models/{quote(self.model, safe='-._')}:batchEmbedContents"
        )

    def _request(self, text: str) -> dict[str, object]:
        item: dict[str, object] = {
            "model": f"models/{self.model}",
            "content": {"parts": [{"text": text}]},
            "outputDimensionality": self.dimensions,
        }
        if self.task_type:
            item["taskType"] = self.task_type
        return item

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.max_inputs_per_request):
            batch = list(texts[start : start + self.max_inputs_per_request])
            payload = {"requests": [self._request(t) for t in batch]}
            body = await self.transport.post_json(self._url, payload, cancel_scope, operation_label)
            embeddings = body.get("embeddings") if isinstance(body, dict) else None
            if not isinstance(embeddings, list):
                raise malformed(self.name, operation_label, "no embeddings list")
            try:
                raw = [item["values"] for item in embeddings]
            except (KeyError, TypeError) as exc:
                raise malformed(self.name, operation_label, "embeddings lack values") from exc
            parts.append(
                validate_vectors(
                    raw,
                    len(batch),
                    self.dimensions,
                    operation_label=operation_label,
                    provider=self.name,
                )
            )
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    async def aclose(self) -> None:
        await self.transport.aclose()


def build(args: ProviderArgs) -> GeminiProvider:
    assert args.api_key is not None and args.model is not None  # provider_requirements
    return GeminiProvider(
        api_key=args.api_key.strip(),
        model=args.model,
        base_url=args.base_url or GEMINI_BASE_URL,
        dimensions=args.dimensions,
        request_timeout_ms=args.request_timeout_ms,
    )
