"""A sweep's provider from before its chunk stage to after its lane: built before parsing so
start-up work overlaps it; ``close_provider`` closes it on the paths that never reach the
lane. Closing twice is harmless."""

import asyncio

from neo_assets.embedding.provider import EmbeddingProvider


def close_provider(provider: EmbeddingProvider) -> None:
    asyncio.run(provider.aclose())
