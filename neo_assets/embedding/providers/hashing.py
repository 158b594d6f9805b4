"""The offline default embedder: deterministic feature hashing (identifier tokens and byte
3-grams into signed buckets, L2-normalised), no model, no network. The model name picks the
features: ``neo-hashing-v2`` (the default) counts a repeated feature sublinearly,
``neo-hashing-v1`` (and any other name, as before v2 existed) counts every occurrence."""

from collections.abc import Sequence

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import ProviderArgs
from neo_assets.embedding.providers.hash_features import (
    VERSION_RAW,
    VERSION_SUBLINEAR,
    embed_texts,
    hash_embed,
)
from neo_assets.generations.rules import HASHING_DEFAULT_MODEL

__all__ = ["HashingProvider", "embed_texts", "hash_embed", "hashing_version"]

HASHING_V2_MODEL = "neo-hashing-v2"


def hashing_version(model: str) -> int:
    """The feature version a model name asks for: v2 by its name, v1 for every other name
    (what any name embedded before v2, so a pinned store keeps its vectors' meaning)."""
    return VERSION_SUBLINEAR if model.strip() == HASHING_V2_MODEL else VERSION_RAW


class HashingProvider:
    """Deterministic, offline, 384-d by default."""

    name = "hashing"

    def __init__(self, dimensions: int = 384, model: str = HASHING_DEFAULT_MODEL) -> None:
        self.dimensions = dimensions
        self.model = model
        self.version = hashing_version(model)

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        return embed_texts(texts, self.dimensions, self.version)

    async def aclose(self) -> None:
        return None


def build(args: ProviderArgs) -> HashingProvider:
    if args.model:
        return HashingProvider(dimensions=args.dimensions, model=args.model)
    return HashingProvider(dimensions=args.dimensions)
