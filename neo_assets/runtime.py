"""Process-wide handles built once from settings: the store, the ledger, the provider.

Building a Chroma client or a SQLAlchemy engine per step would dominate a small sweep,
so each is cached by the settings that define it and reused for the process lifetime.
"""

import threading
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.store.chroma_store import ChromaStore, open_store
from neo_assets.store.ledger import Ledger

_lock = threading.Lock()
_stores: dict[tuple[Any, ...], ChromaStore] = {}
_ledgers: dict[str, Ledger] = {}


def get_store(settings: Settings) -> ChromaStore:
    key = (
        str(settings.store.chroma_dir),
        settings.store.chroma_url,
        settings.store.collection_name,
        settings.store.chroma_one_core,
        settings.store.chroma_gil_gap,
    )
    with _lock:
        store = _stores.get(key)
        if store is None:
            store = open_store(
                persist_dir=None if settings.store.chroma_url else settings.store.chroma_dir,
                url=settings.store.chroma_url,
                collection_name=settings.store.collection_name,
                one_core=settings.store.chroma_one_core,
                gil_gap=settings.store.chroma_gil_gap,
            )
            _stores[key] = store
        return store


def get_ledger(settings: Settings) -> Ledger:
    url = settings.store.resolved_ledger_url
    with _lock:
        ledger = _ledgers.get(url)
        if ledger is None:
            ledger = Ledger.open(url)
            _ledgers[url] = ledger
        return ledger


def build_provider(settings: Settings) -> EmbeddingProvider:
    """A fresh provider for one run (async clients belong to one event loop)."""
    from neo_assets.embedding.factory import build_provider as _build

    return _build(
        settings.embedding.provider,
        base_url=settings.embedding.base_url,
        model=settings.embedding.model,
        api_key=settings.embedding.api_key,
        dimensions=settings.embedding.dimensions,
        request_timeout_ms=settings.embedding.request_timeout_ms,
    )


def reset_caches() -> None:
    """Forget cached handles (tests that switch NEO_HOME within one process)."""
    with _lock:
        for ledger in _ledgers.values():
            ledger.dispose()
        _ledgers.clear()
        _stores.clear()
