"""The hashing embedder's helper process: hashes big batches on the other core.

In the sweep's own process, hashing batch k+1 would wait for Chroma's ``add`` of batch k
(it holds the GIL); in a helper the two overlap. The helper computes exactly
``hash_features.embed_texts`` (same code, same numpy), so a vector never depends on
where it was computed, and a helper that is not there falls back to hashing in-process.
"""

import sys
from collections.abc import Sequence

import numpy as np

from neo_assets.concurrency.helper_process import HelperProcess, run_helper


class HashingWorker:
    """``embed`` raises ``HelperUnavailable`` whenever the caller should hash in-process."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._helper = HelperProcess(__name__, str(dimensions))

    @property
    def broken(self) -> str | None:
        return self._helper.broken

    @property
    def helper(self) -> HelperProcess:
        return self._helper

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # ~0.1 ms a text; 20x that means the helper is stuck, not busy: it is killed and the
        # batch hashed here, well inside any sane call ceiling (a hung helper must never
        # read as a provider timeout, which is evidence against the inputs).
        return self._helper.call(list(texts), answer_within_s=2.0 + 0.002 * len(texts))

    def close(self) -> None:
        self._helper.close()


def _main(dimensions: int) -> None:
    from neo_assets.embedding.providers.hash_features import embed_texts

    run_helper(lambda texts: embed_texts(texts, dimensions))


if __name__ == "__main__":
    _main(int(sys.argv[1]))
