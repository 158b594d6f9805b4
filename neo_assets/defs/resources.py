"""Typed Dagster resources: settings, tenants, store, ledger and provider. Settings and
tenants are read when used (a changed NEO_* leaf is heard next run); the others are opened
on first use in a run or tick and closed when it ends."""

from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from neo_assets.config.settings import Settings, load_settings
from neo_assets.declaration.in_force import load_declaration
from neo_assets.embedding.provider import EmbeddingProvider, close_provider
from neo_assets.services import handles
from neo_assets.services.handles import OpenOnFirstUse
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import TenantsFile


class SettingsResource(dg.ConfigurableResource):
    """All NEO_* settings; ``home`` overrides NEO_HOME when set."""

    home: str | None = None

    def load(self) -> Settings:
        return load_settings(**({"home": self.home} if self.home else {}))


class TenantsResource(dg.ConfigurableResource):
    """The tenants file (NEO_TENANTS_FILE, else ./tenants.yaml, else the bundled example),
    as the declaration in force."""

    settings: SettingsResource

    def load(self, ledger: Ledger | None = None) -> TenantsFile:
        """The declaration in force (declaration/in_force.py): a misdeclared tenant or
        repo keeps its last good declaration, read from (and recorded in) the ledger,
        which is opened only when needed (``ledger``: the run's own, when it has one)."""
        return load_declaration(self.settings.load(), ledger)


class _RunHandle(dg.ConfigurableResource):
    """A handle of one run: opened on first use, closed at the run's teardown."""

    settings: SettingsResource
    # Set up per run: Dagster initializes a fresh copy of the resource for each run.
    _handle: OpenOnFirstUse | None = PrivateAttr(default=None)

    def _opener(self, settings: Settings) -> Any:
        raise NotImplementedError

    def _closer(self, value: Any) -> None:
        raise NotImplementedError

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._handle = OpenOnFirstUse(lambda: self._opener(self.settings.load()), self._closer)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._handle is not None:
            self._handle.close()

    def _get(self) -> Any:
        if self._handle is None:
            raise RuntimeError(
                f"{type(self).__name__} is used outside a run: open one with "
                "neo_assets.services.handles instead"
            )
        return self._handle.get()

    @property
    def opened(self) -> bool:
        """Whether this run opened its handle (False before its first use)."""
        return self._handle is not None and self._handle.opened

    @property
    def closed(self) -> bool:
        """Whether the run's handle is closed (the run or tick ended)."""
        return self._handle is not None and self._handle.closed


class StoreResource(_RunHandle):
    """The shared Chroma collection (persistent dir, or NEO_CHROMA_URL), one client per run."""

    def _opener(self, settings: Settings) -> ChromaStore:
        return handles.open_store(settings)

    def _closer(self, value: ChromaStore) -> None:
        value.close()

    def get(self) -> ChromaStore:
        return self._get()


class LedgerResource(_RunHandle):
    """The ledger (SQLite under NEO_HOME, or NEO_LEDGER_URL), one engine per run."""

    def _opener(self, settings: Settings) -> Ledger:
        return handles.open_ledger(settings)

    def _closer(self, value: Ledger) -> None:
        value.dispose()

    def get(self) -> Ledger:
        return self._get()


class ProviderResource(_RunHandle):
    """The embedding provider named by NEO_EMBEDDING_PROVIDER, one per run, closed at its
    end (closing a provider twice is harmless, so a step may close it earlier)."""

    def _opener(self, settings: Settings) -> EmbeddingProvider:
        return handles.build_provider(settings)

    def _closer(self, value: EmbeddingProvider) -> None:
        close_provider(value)

    def get(self) -> EmbeddingProvider:
        return self._get()

    def build(self) -> EmbeddingProvider:
        """The run's provider (``get``), under the name the sweep asset calls."""
        return self._get()


def default_resources() -> dict[str, dg.ConfigurableResource]:
    settings = SettingsResource()
    return {
        "settings": settings,
        "tenants": TenantsResource(settings=settings),
        "store": StoreResource(settings=settings),
        "ledger": LedgerResource(settings=settings),
        "provider": ProviderResource(settings=settings),
    }
