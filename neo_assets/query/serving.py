"""What answers a query: a long-running reader's resident handles, and ``serving_targets``,
the ONE place that says which generations may answer a tenant's query (re-read from the
ledger each call, so a switch needs no restart). Providers are built once per generation;
the tenants file is re-read when it changes."""

import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.declaration.in_force import load_declaration
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.generations.records import generation_records
from neo_assets.generations.rules import GenerationRecord
from neo_assets.generations.serving import collection_of, query_provider, serving_generation
from neo_assets.query.rules.request import QueryInputError
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import TenantsConfigError, TenantsFile

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore


@dataclass(frozen=True)
class ServingTarget:
    """One embedding generation that may answer a query: its collection and its ledger
    record (what rebuilds its provider: ``Resident.provider_for``)."""

    store: "ChromaStore"
    embedding_generation: str
    record: GenerationRecord | None


@dataclass(frozen=True)
class ServingPlan:
    """The generations that may answer a tenant's query, the serving one first."""

    serving_generation: str | None
    targets: tuple[ServingTarget, ...]

    @property
    def first(self) -> ServingTarget:
        return self.targets[0]


class QueryUnavailable(QueryInputError):
    """No generation of the tenant's knowledge base can embed the query right now: the
    service's to fix, not the asker's (503; the CLI exits 1), with a notice per
    generation tried."""

    def __init__(self, message: str, notices: list[dict[str, Any]]) -> None:
        super().__init__(codes.QUERY_UNAVAILABLE, message, None, status=503)
        self.notices = notices


def unavailable_notice(
    generation: str, record: GenerationRecord | None, exc: BaseException
) -> dict[str, Any]:
    """What a caller is told when a generation could not embed its query."""
    who = f"{record.provider} {record.model}" if record and record.provider else "its provider"
    code = getattr(exc, "code", None)
    return {
        "code": code if isinstance(code, str) else codes.KB_VECTOR_EMBED_UNCLASSIFIED,
        "generation": generation,
        "message": f"embedding generation {generation} ({who}) cannot embed queries: {exc}",
    }


@dataclass
class Resident:
    """Handles a reader keeps open; ``close`` releases them."""

    settings: Settings
    store: "ChromaStore"
    ledger: Ledger
    _providers: dict[str, EmbeddingProvider] = field(default_factory=dict)
    _collections: dict[str, "ChromaStore"] = field(default_factory=dict)
    _tenants: tuple[Any, TenantsFile] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tenants(self) -> TenantsFile:
        """The declaration in force (declaration/in_force.py), re-read when the file's
        modification time or size changed: a misdeclared tenant or repo keeps its last
        good declaration, so the others (and it) go on being served; a file that cannot
        be read keeps the last good declaration of every tenant."""
        path = self.settings.store.resolved_tenants_file
        try:
            st = os.stat(path)
            stamp: tuple[Any, ...] = (str(path), st.st_mtime_ns, st.st_size)
        except OSError as exc:  # gone or unreadable: the last good declarations answer
            stamp = (str(path), type(exc).__name__)
        with self._lock:
            if self._tenants is None or self._tenants[0] != stamp:
                try:
                    tenants = load_declaration(
                        self.settings, self.ledger, check_paths=False, record=False
                    )
                except TenantsConfigError:
                    if self._tenants is None:
                        raise  # never a usable declaration: the start fails, as before
                    tenants = self._tenants[1]  # the one this service last read stands
                self._tenants = (stamp, tenants)
            return self._tenants[1]

    def provider_for(self, target: ServingTarget) -> EmbeddingProvider:
        """The provider that embeds at ``target``'s generation, built once and kept;
        raises ``generations.serving.GenerationUnavailable`` when it cannot be built."""
        generation = target.embedding_generation
        with self._lock:
            provider = self._providers.get(generation)
            if provider is None:
                provider = query_provider(self.settings, generation, target.record)
                self._providers[generation] = provider
            return provider

    def collection(self, name: str) -> "ChromaStore":
        """The named collection on the resident store's client (kept: one open each)."""
        with self._lock:
            found = self._collections.get(name)
            if found is None:
                found = self.store.sibling(name)
                self._collections[name] = found
            return found

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()


def serving_targets(resident: Resident, tenant_id: str) -> ServingPlan:
    """The embedding generations that may answer ``tenant_id``'s query, in order (the
    serving one, then the fallbacks of ``serving_generation``), each with its collection.
    Read from the ledger on every call: a switch needs no restart."""
    tenant = resident.tenants().tenant(tenant_id)
    slugs = [r.slug for r in tenant.repos] if tenant is not None else []
    settings = resident.settings
    choice = serving_generation(settings, resident.ledger, tenant_id, slugs)
    targets = tuple(
        ServingTarget(
            store=resident.collection(collection_of(settings, choice.records, generation)),
            embedding_generation=generation,
            record=choice.records.get(generation),
        )
        for generation in choice.serving.candidates
    )
    return ServingPlan(serving_generation=choice.generation, targets=targets)


def pinned_plan(resident: Resident, generation: str) -> ServingPlan:
    """One named embedding generation and nothing else (no fallback): what the
    self-evaluation asks when it measures a generation that may not serve yet."""
    records = generation_records(resident.ledger)
    target = ServingTarget(
        store=resident.collection(collection_of(resident.settings, records, generation)),
        embedding_generation=generation,
        record=records.get(generation),
    )
    return ServingPlan(serving_generation=generation, targets=(target,))
