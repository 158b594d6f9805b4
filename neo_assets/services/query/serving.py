"""What answers a query: the resident handles (store, ledger, provider, tenants file) of
one long-running reader, and ``serving_target``, the ONE place that says which collection,
which provider and which embedding generation answer a tenant/repo's query.

The provider is built once per embedding generation and kept (the bundled model stays
loaded); the tenants file is re-read when it changes on disk, so a retired repo stops
being served without a restart.
"""

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neo_assets.config.settings import Settings
from neo_assets.config.tenants import TenantsFile, load_tenants
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.services.handles import build_provider
from neo_assets.services.sweep.steps import settings_generation
from neo_assets.store.ledger import Ledger

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore


@dataclass(frozen=True)
class ServingTarget:
    """The collection, the provider and the embedding generation that answer a query."""

    store: "ChromaStore"
    provider: EmbeddingProvider
    embedding_generation: str


@dataclass
class Resident:
    """Handles a reader keeps open; ``close`` releases them."""

    settings: Settings
    store: "ChromaStore"
    ledger: Ledger
    _providers: dict[str, EmbeddingProvider] = field(default_factory=dict)
    _tenants: tuple[Any, TenantsFile] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tenants(self) -> TenantsFile:
        """The tenants file, re-read when its modification time or size changed."""
        path = self.settings.store.resolved_tenants_file
        st = os.stat(path)
        stamp = (str(path), st.st_mtime_ns, st.st_size)
        with self._lock:
            if self._tenants is None or self._tenants[0] != stamp:
                tenants = load_tenants(
                    path,
                    allowed_roots=self.settings.store.allowed_roots,
                    home=self.settings.store.home_dir,
                    check_paths=False,
                )
                self._tenants = (stamp, tenants)
            return self._tenants[1]

    def provider_for(self, generation: str) -> EmbeddingProvider:
        with self._lock:
            provider = self._providers.get(generation)
            if provider is None:
                provider = build_provider(self.settings)
                self._providers[generation] = provider
            return provider

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


def serving_target(resident: Resident, tenant_id: str, repo_slug: str | None) -> ServingTarget:
    """Which collection, provider and embedding generation answer ``tenant_id``'s query
    (of ``repo_slug``, or all its repos). For now the configured store and provider at the
    configured generation; with generations side by side this reads the ledger's serving
    generation of the repo (re-read on every call, so a switch needs no restart)."""
    del tenant_id, repo_slug  # one configured generation serves every repo today
    generation = settings_generation(resident.settings)
    return ServingTarget(
        store=resident.store,
        provider=resident.provider_for(generation),
        embedding_generation=generation,
    )
