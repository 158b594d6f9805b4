"""The offline default embedder: deterministic feature hashing (identifier tokens and byte
3-grams into signed buckets, L2-normalised), no model, no network."""

from collections.abc import Sequence

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.hash_features import embed_texts, hash_embed

__all__ = ["HashingProvider", "embed_texts", "hash_embed"]


class HashingProvider:
    """Deterministic, offline, 384-d by default."""

    name = "hashing"

    def __init__(self, dimensions: int = 384, model: str = "neo-hashing-v1") -> None:
        self.dimensions = dimensions
        self.model = model

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        return embed_texts(texts, self.dimensions)

    async def aclose(self) -> None:
        return None


def build(args: ProviderArgs) -> HashingProvider:
    if args.model:
        return HashingProvider(dimensions=args.dimensions, model=args.model)
    return HashingProvider(dimensions=args.dimensions)
