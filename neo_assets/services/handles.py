"""The store, the ledger and the provider, opened from settings for one caller, who closes
them:

    with open_ledger(settings) as ledger, open_store(settings) as store:
        ...

Nothing is cached here: opening the ledger costs ~8 ms and the store ~10-20 ms once the
modules are imported (docs/reliability.md, "Handles"), so a caller that uses one many times
keeps it open, and a Dagster run gets its own from the resources (defs/resources.py),
which open them here and close them when the run or the sensor tick ends.

Chroma and the provider factory are imported when first needed, so a caller that needs
neither (the CLI canary, a probe) stays quick to start.
"""

from typing import TYPE_CHECKING

from neo_assets.config.settings import Settings
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.store.ledger import Ledger

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore


def open_store(settings: Settings) -> "ChromaStore":
    """The shared collection (NEO_CHROMA_URL's server, else the directory under NEO_HOME).
    Close it (``close()``, or ``with``)."""
    from neo_assets.store.chroma_store import open_store as open_collection  # noqa: PLC0415

    return open_collection(
        persist_dir=None if settings.chroma_url else settings.chroma_dir,
        url=settings.chroma_url,
        collection_name=settings.collection_name,
        one_core=settings.chroma_one_core,
        gil_gap=settings.chroma_gil_gap,
    )


def open_ledger(settings: Settings) -> Ledger:
    """The ledger (NEO_LEDGER_URL, else SQLite under NEO_HOME), migrated to the newest
    schema. Dispose of it (``dispose()``, or ``with``)."""
    return Ledger.open(settings.resolved_ledger_url)


def build_provider(settings: Settings) -> EmbeddingProvider:
    """A fresh provider (its async clients belong to the event loop that first uses them).
    Close it: ``await provider.aclose()``, or ``embedding.lifecycle.close_provider``."""
    from neo_assets.embedding.factory import build_provider as build  # noqa: PLC0415

    return build(
        settings.embedding_provider,
        base_url=settings.embedding_base_url,
        model=settings.embedding_model,
        api_key=settings.embedding_api_key,
        dimensions=settings.embedding_dimensions,
        request_timeout_ms=settings.embedding_request_timeout_ms,
    )
