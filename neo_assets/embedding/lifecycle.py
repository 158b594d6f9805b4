"""A sweep's provider from before its chunk stage to after its lane.

The sweep builds its provider before parsing, so a provider with start-up work (the
hashing embedder's helper process) can start it while the files parse. The lane closes
the provider when it ends; ``close_provider`` closes it on the paths that never reach the
lane (a failed chunk stage, a lost lease). Closing twice is harmless for every provider.
"""

import asyncio

from neo_assets.embedding.provider import EmbeddingProvider


def close_provider(provider: EmbeddingProvider) -> None:
    asyncio.run(provider.aclose())
