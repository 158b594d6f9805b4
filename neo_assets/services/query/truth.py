"""Read-side truth applied: the ids a tenant's query may return, computed from the ledger
and the tenant's rows by ``core.query.truth`` and kept until what they were computed
from changes.

Chosen over filtering each query's hits by reading their paths' rows: one computation
serves every query until a sweep writes, and a query then costs one set lookup per hit
(bench/query.py measures both sides). What is watched (the "marker"): the tenant's
config version, envelope and generation headers, the repos the tenants file declares,
the collection's row count, the tenant's repo-state update times and the serving
embedding generation. It is looked at no more often than ``serve.truth_recheck_s``.
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from neo_assets.config.tenants import TenantsFile
from neo_assets.core.query.truth import RepoServing, tenant_serving
from neo_assets.services.reconcile.reading import (
    declaration_marker,
    durable_fenced_ids,
    find_tenant,
    read_declaration,
)
from neo_assets.store import ledger_schema as t
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger


@dataclass(frozen=True)
class TruthView:
    """What one tenant serves: the ids, and per declared repo its served paths."""

    tenant_id: str
    ids: frozenset[str]
    repos: dict[str, RepoServing]
    marker: tuple[Any, ...]
    rows_read: int


def _marker(
    ledger: Ledger, store: ChromaStore, tenants: TenantsFile, tenant_id: str, generation: str
) -> tuple[Any, ...]:
    tenant = find_tenant(tenants, tenant_id)
    declared = tuple(
        (r.slug, r.declaration_digest()) for r in (tenant.repos if tenant is not None else ())
    )
    with ledger.engine.connect() as conn:
        updated = conn.execute(
            sa.select(sa.func.max(t.repo_state.c.updated_at), sa.func.count()).where(
                t.repo_state.c.tenant_id == tenant_id
            )
        ).first()
    return (
        declaration_marker(ledger, tenant_id),
        declared,
        store.count(),
        tuple(updated or ()),
        generation,
    )


def compute_truth(
    ledger: Ledger,
    store: ChromaStore,
    tenants: TenantsFile,
    tenant_id: str,
    generation: str,
) -> TruthView:
    """Rows first, records second (a sweep records its generation before it writes a row
    of it: ``services.reconcile.reading.read_snapshot`` says why)."""
    marker = _marker(ledger, store, tenants, tenant_id, generation)
    rows = list(store.tenant_rows(tenant_id))
    declaration, _problems, records = read_declaration(
        ledger, tenant_id, find_tenant(tenants, tenant_id)
    )
    fenced = durable_fenced_ids(ledger, tenant_id, declaration.repos, generation)
    served = tenant_serving(
        declaration,
        rows,
        fenced,
        embedding_generation=generation,
        generation_revisions={slug: r.generation_revision for slug, r in records.items()},
    )
    ids = frozenset().union(*(s.ids for s in served.values())) if served else frozenset()
    return TruthView(tenant_id, ids, served, marker, len(rows))


class TruthCache:
    """Per tenant, the last ``TruthView``, recomputed when its marker moved."""

    def __init__(self, recheck_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._recheck_s = recheck_s
        self._clock = clock
        self._views: dict[str, tuple[float, TruthView]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.computations = 0

    def _lock(self, tenant_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(tenant_id, threading.Lock())

    def view(
        self,
        ledger: Ledger,
        store: ChromaStore,
        tenants: TenantsFile,
        tenant_id: str,
        generation: str,
    ) -> TruthView:
        with self._lock(tenant_id):
            now = self._clock()
            cached = self._views.get(tenant_id)
            if cached is not None:
                checked_at, view = cached
                if now - checked_at < self._recheck_s and view.marker[-1] == generation:
                    return view
                if _marker(ledger, store, tenants, tenant_id, generation) == view.marker:
                    self._views[tenant_id] = (now, view)
                    return view
            view = compute_truth(ledger, store, tenants, tenant_id, generation)
            self.computations += 1
            self._views[tenant_id] = (now, view)
            return view
