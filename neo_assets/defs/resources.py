"""Typed Dagster resources: settings, tenants, store, ledger and provider.

Each reads the environment when used, so a changed NEO_* leaf is heard by the next run
without reloading the code location.
"""

import dagster as dg

from neo_assets import runtime
from neo_assets.config.settings import Settings, load_settings
from neo_assets.config.tenants import TenantsFile, load_tenants
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger


class SettingsResource(dg.ConfigurableResource):
    """All NEO_* settings; ``home`` overrides NEO_HOME when set."""

    home: str | None = None

    def load(self) -> Settings:
        return load_settings(**({"home": self.home} if self.home else {}))


class TenantsResource(dg.ConfigurableResource):
    """The tenants file (NEO_TENANTS_FILE, else ./tenants.yaml, else the bundled example)."""

    settings: SettingsResource

    def load(self) -> TenantsFile:
        settings = self.settings.load()
        return load_tenants(
            settings.store.resolved_tenants_file,
            allowed_roots=settings.store.allowed_roots,
            home=settings.store.home_dir,
        )


class StoreResource(dg.ConfigurableResource):
    """The shared Chroma collection (persistent dir, or NEO_CHROMA_URL)."""

    settings: SettingsResource

    def get(self) -> ChromaStore:
        return runtime.get_store(self.settings.load())


class LedgerResource(dg.ConfigurableResource):
    """The ledger (SQLite under NEO_HOME, or NEO_LEDGER_URL)."""

    settings: SettingsResource

    def get(self) -> Ledger:
        return runtime.get_ledger(self.settings.load())


class ProviderResource(dg.ConfigurableResource):
    """The embedding provider named by NEO_EMBEDDING_PROVIDER (a fresh one per run)."""

    settings: SettingsResource

    def build(self) -> EmbeddingProvider:
        return runtime.build_provider(self.settings.load())


def default_resources() -> dict[str, dg.ConfigurableResource]:
    settings = SettingsResource()
    return {
        "settings": settings,
        "tenants": TenantsResource(settings=settings),
        "store": StoreResource(settings=settings),
        "ledger": LedgerResource(settings=settings),
        "provider": ProviderResource(settings=settings),
    }
