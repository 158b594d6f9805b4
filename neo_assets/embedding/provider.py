"""The one embedding interface every provider implements."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from neo_assets.embedding.cancel import CancelScope


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Async embedder: ``len(texts)`` float32 vectors of ``dimensions``, row-aligned.

    ``name``/``model``/``dimensions`` feed the embedding generation digest.
    """

    name: str
    model: str
    dimensions: int

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ProviderArgs:
    """What every provider is built from, checked and stripped (None: not set)."""

    base_url: str | None
    model: str | None
    api_key: str | None
    dimensions: int
    request_timeout_ms: int
    context_tokens: int | None
