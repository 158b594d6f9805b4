"""The offline default embedder: deterministic feature hashing, no model, no network.

Features are identifier tokens (split on snake_case and camelCase, lower-cased) and
byte 3-grams, each hashed to a signed bucket. Near-identical code shares most features
and so lands near; the vector is L2-normalised so cosine distance behaves.
"""

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from neo_assets.embedding.cancel import CancelScope

# The arithmetic lives apart so the helper process imports only it (and numpy).
from neo_assets.embedding.providers.hash_features import embed_texts, hash_embed

if TYPE_CHECKING:
    from neo_assets.concurrency.hashing_worker import HashingWorker

__all__ = ["HashingProvider", "embed_texts", "hash_embed"]


# A call with at least this many texts starts the helper process (and later calls use it
# once it is up): a first sweep's 2,048-text batches then hash on the other core while the
# previous batch is written. Smaller work (a one-file commit, tests) never pays ~0.3 s of
# helper start-up.
OFFLOAD_MIN_TEXTS = 256


class HashingProvider:
    """Deterministic, offline, 384-d by default."""

    name = "hashing"

    def __init__(
        self,
        dimensions: int = 384,
        model: str = "neo-hashing-v1",
        *,
        offload_min_texts: int | None = OFFLOAD_MIN_TEXTS,
    ) -> None:
        self.dimensions = dimensions
        self.model = model
        self.offload_min_texts = offload_min_texts  # None: always hash in-process
        self._worker: HashingWorker | None = None
        self.offloaded_texts = 0  # how many texts the helper hashed (observability, tests)

    def prepare(self) -> None:
        """Start the helper now: a big sweep is coming, and its first batches would
        otherwise hash in-process while the helper starts (~0.2 s). ``aclose`` stops it."""
        if self.offload_min_texts is not None and self._worker is None:
            from neo_assets.concurrency.hashing_worker import HashingWorker

            self._worker = HashingWorker(self.dimensions)

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        if self.offload_min_texts is None or len(texts) < self.offload_min_texts:
            return embed_texts(texts, self.dimensions)
        if self._worker is None:
            # Started now, used from the first call that finds it ready; this call and
            # any before it is up hash in-process, so nothing waits for it.
            self.prepare()
        assert self._worker is not None
        if self._worker.broken is None:
            from neo_assets.concurrency.helper_process import HelperUnavailable

            try:
                vectors = await asyncio.to_thread(self._worker.embed, list(texts))
            except HelperUnavailable:
                pass
            else:
                self.offloaded_texts += len(texts)
                return vectors
        return embed_texts(texts, self.dimensions)

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await asyncio.to_thread(worker.close)
