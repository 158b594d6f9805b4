"""Vector evidence of one sweep, for the freeze rule: ``VectorEvidenceRecorder`` wraps the
sweep's provider and counts the verdict of each invalid answer (a wrong dimension, NaN or
zero freezes; a malformed body does not). The failure is re-raised unchanged."""

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.vectors import validate_vectors
from neo_assets.health.rules.canary import detail_dimensions, invalid_detail_verdict


class VectorEvidenceRecorder:
    """An ``EmbeddingProvider`` that passes calls to ``inner`` and records invalid answers."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dimensions = inner.dimensions
        self._verdicts: Counter[str] = Counter()
        self._dimensions: set[int] = set()

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        try:
            raw = await self.inner.embed(texts, cancel_scope, operation_label)
            return validate_vectors(
                raw,
                len(texts),
                self.dimensions,
                operation_label=operation_label,
                provider=self.name,
            )
        except EmbedFailure as failure:
            if failure.code == codes.KB_VECTOR_EMBED_INVALID_VECTORS:
                self._verdicts[invalid_detail_verdict(failure.detail)] += 1
                self._dimensions.update(detail_dimensions(failure.detail))
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # Everything else is the provider's own: the lane reads ``base_url`` (its
        # provider-wide slots), ``free_slots`` (max_inflight) and ``batch_cap`` through
        # this wrapper; hidden, a real sweep used process-local slots and no discovery.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def batch_cap(self) -> int | None:
        return getattr(self.inner, "batch_cap", None)

    @batch_cap.setter
    def batch_cap(self, value: int) -> None:
        self.inner.batch_cap = value

    def evidence(self) -> dict[str, Any]:
        """``{"verdicts": {verdict: count}, "observedDimensions", "expectedDimension"}``."""
        return {
            "verdicts": dict(sorted(self._verdicts.items())),
            "observedDimensions": sorted(self._dimensions),
            "expectedDimension": self.dimensions,
        }
