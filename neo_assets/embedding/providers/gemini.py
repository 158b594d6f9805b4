"""Gemini embeddings over REST: ``POST {base}/v1beta/models/{model}:batchEmbedContents``.
The key travels in the ``x-goog-api-key`` header, out of URLs and logs; at most 100
inputs a request. Cancellation is client-only: Google may finish (and bill) after the
disconnect. Design: docs/design/embedding.md#providers"""

from typing import Any
from urllib.parse import quote

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.http import HttpProvider, malformed
from neo_assets.generations.rules import normalised_model

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
GEMINI_MAX_BATCH = 100


class GeminiProvider(HttpProvider):
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
        # The API names models "models/<id>"; accept either spelling from settings.
        super().__init__(
            base_url=base_url,
            model=normalised_model(self.name, model),
            dimensions=dimensions,
            api_key=api_key,
            request_timeout_ms=request_timeout_ms,
            max_inputs_per_request=max(1, min(max_inputs_per_request, GEMINI_MAX_BATCH)),
        )
        self.task_type = task_type

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": api_key or ""}

    def _path(self) -> str:
        return f"/v1beta/models/{quote(self.model, safe='-._')}:batchEmbedContents"

    def _request(self, text: str) -> dict[str, object]:
        item: dict[str, object] = {
            "model": f"models/{self.model}",
            "content": {"parts": [{"text": text}]},
            "outputDimensionality": self.dimensions,
        }
        if self.task_type:
            item["taskType"] = self.task_type
        return item

    async def _embed_batch(
        self, batch: list[str], cancel_scope: CancelScope, operation_label: str
    ) -> Any:
        payload = {"requests": [self._request(t) for t in batch]}
        body = await self.transport.request_json(self._url, payload, cancel_scope, operation_label)
        embeddings = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(embeddings, list):
            raise malformed(self.name, operation_label, "no embeddings list")
        try:
            return [item["values"] for item in embeddings]
        except (KeyError, TypeError) as exc:
            raise malformed(self.name, operation_label, "embeddings lack values") from exc


def build(args: ProviderArgs) -> GeminiProvider:
    assert args.api_key is not None and args.model is not None  # provider_requirements
    return GeminiProvider(
        api_key=args.api_key.strip(),
        model=args.model,
        base_url=args.base_url or GEMINI_BASE_URL,
        dimensions=args.dimensions,
        request_timeout_ms=args.request_timeout_ms,
    )
