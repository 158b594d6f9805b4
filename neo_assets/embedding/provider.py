"""The one embedding interface every provider implements, and what every provider shares:
its build arguments, the split of a call into batches, and closing it from sync code."""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.vectors import validate_vectors


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


async def embed_in_batches(
    texts: Sequence[str],
    step: int | None,
    dimensions: int,
    send: Callable[[list[str], int], Awaitable[Any]],
    cancel_scope: CancelScope,
    *,
    provider: str,
    operation_label: str,
) -> np.ndarray:
    """``texts`` sent ``step`` at a time (None: all at once): ``send(batch, start)`` answers
    a batch's rows, each answer is validated (``vectors.validate_vectors``), then stacked."""
    cancel_scope.raise_if_cancelled()
    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    step = step or len(texts)
    parts = []
    for start in range(0, len(texts), step):
        batch = list(texts[start : start + step])
        rows = await send(batch, start)
        parts.append(
            validate_vectors(
                rows, len(batch), dimensions, operation_label=operation_label, provider=provider
            )
        )
    return parts[0] if len(parts) == 1 else np.vstack(parts)


def close_provider(provider: EmbeddingProvider) -> None:
    """Close a sweep's provider on the paths that never reach its lane (it is built before
    the chunk stage, so start-up work overlaps parsing); closing twice is harmless."""
    asyncio.run(provider.aclose())
