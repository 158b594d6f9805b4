"""The offline default embedder: deterministic feature hashing, no model, no network.

Features are identifier tokens (split on snake_case and camelCase, lower-cased) and
byte 3-grams, each hashed to a signed bucket. Near-identical code shares most features
and so lands near; the vector is L2-normalised so cosine distance behaves.
"""

import asyncio
import re
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from neo_assets.embedding.cancel import CancelScope

if TYPE_CHECKING:
    from neo_assets.embedding.providers.hashing_worker import HashingWorker

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TOKEN_WEIGHT = 2.0
_NGRAM_WEIGHT = 1.0


def _identifier_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for ident in _IDENT.findall(text):
        tokens.append(ident.lower())
        for part in ident.split("_"):
            pieces = _CAMEL.findall(part)
            if len(pieces) > 1 or (pieces and pieces[0].lower() != ident.lower()):
                tokens.extend(p.lower() for p in pieces)
    return tokens


def hash_embed(text: str, dimensions: int) -> np.ndarray:
    """One L2-normalised float32 vector for ``text`` (all-zero only for empty text)."""
    vec = np.zeros(dimensions, dtype=np.float64)
    data = np.frombuffer(text.encode("utf-8", errors="replace"), dtype=np.uint8).astype(np.uint64)
    if data.size >= 3:
        # Vectorised byte 3-gram hash (FNV-like mix), sign from a high bit.
        h = (data[:-2] * np.uint64(16777619)) ^ (data[1:-1] * np.uint64(40503)) ^ data[2:]
        h = (h * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
        idx = (h % np.uint64(dimensions)).astype(np.int64)
        sign = np.where((h >> np.uint64(31)) & np.uint64(1), -1.0, 1.0)
        vec += np.bincount(idx, weights=sign * _NGRAM_WEIGHT, minlength=dimensions)
    for token in _identifier_tokens(text):
        h = zlib.crc32(token.encode("utf-8"))
        vec[h % dimensions] += -_TOKEN_WEIGHT if (h >> 31) & 1 else _TOKEN_WEIGHT
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        # An empty text still gets a valid (non-zero) vector: a fixed unit axis.
        vec[0] = 1.0
        norm = 1.0
    return (vec / norm).astype(np.float32)


def embed_texts(texts: Sequence[str], dimensions: int) -> np.ndarray:
    """``hash_embed`` of each text, stacked (shape ``(len(texts), dimensions)``)."""
    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    return np.vstack([hash_embed(t, dimensions) for t in texts])


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
            from neo_assets.embedding.providers.hashing_worker import HashingWorker

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
            from neo_assets.helper_process import HelperUnavailable

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
