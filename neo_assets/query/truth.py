"""Read-side truth applied: the ids a tenant's query may return (``query.rules.truth``),
with their facets and an exact-match index, kept until what they were computed from
changes. Design: docs/design/query.md#read-side-truth"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sqlalchemy as sa

from neo_assets.query.rules.filters import facet_values
from neo_assets.query.rules.lexical_context import detached_comments, enclosing_blocks
from neo_assets.query.rules.ranking import LexicalIndex
from neo_assets.query.rules.truth import RepoServing, tenant_serving
from neo_assets.reconcile.reading import (
    declaration_marker,
    durable_fenced_ids,
    find_tenant,
    read_declaration,
)
from neo_assets.store import ledger_schema as t
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import TenantsFile

log = logging.getLogger("neo_assets.serve")


class Facet(NamedTuple):
    """What a filter reads of a served row, kept beside its id: its repo and its value of
    each search filter (``query.rules.filters.facet_values``)."""

    repo: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class TruthView:
    """What one tenant serves: the ids with their facets, the exact-match index over
    them, and per declared repo its served paths."""

    tenant_id: str
    ids: frozenset[str]
    repos: dict[str, RepoServing]
    marker: tuple[Any, ...]
    facets: dict[str, Facet] = field(default_factory=dict)
    index: LexicalIndex = field(default_factory=LexicalIndex)


def tenant_rows_with_documents(
    store: ChromaStore, tenant_id: str, page: int = 5000
) -> list[dict[str, Any]]:
    """The tenant's rows (id, metadata, document), tenantId-filtered in Chroma and
    re-checked row by row."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        got = store.collection.get(
            where={"tenantId": tenant_id},
            include=["metadatas", "documents"],
            limit=page,
            offset=offset,
        )
        for rid, md, doc in zip(got["ids"], got["metadatas"], got["documents"], strict=True):
            if md is not None and md.get("tenantId") == tenant_id:
                out.append({"id": rid, "metadata": dict(md), "document": doc or ""})
        if len(got["ids"]) < page:
            return out
        offset += page


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
    *,
    release: bool = False,
) -> TruthView:
    """Rows first, records second (a sweep records its generation before it writes a row
    of it: ``reconcile.reading.read_snapshot`` says why). ``release``: as if every parser
    switch the quality gate holds were allowed (``reconcile.reading.read_declaration``)."""
    marker = _marker(ledger, store, tenants, tenant_id, generation)
    rows = tenant_rows_with_documents(store, tenant_id)
    declaration, _problems, records = read_declaration(
        ledger, tenant_id, find_tenant(tenants, tenant_id), release=release
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
    facets: dict[str, Facet] = {}
    index = LexicalIndex()
    blocks = enclosing_blocks(
        [
            (
                row["id"],
                _file_of(row["metadata"]),
                str(row["metadata"].get("kind", "")),
                str(row["metadata"].get("name") or ""),
                int(row["metadata"].get("startLine") or 0),
                int(row["metadata"].get("endLine") or 0),
            )
            for row in rows
            if row["id"] in ids
        ]
    )
    # A doc comment a blank line above a function (left in the module row) is the
    # function's lexical context too; its text and embedding are unchanged.
    comments = detached_comments(
        [
            (
                row["id"],
                _file_of(row["metadata"]),
                str(row["metadata"].get("name") or ""),
                str(row["metadata"].get("kind", "")),
                int(row["metadata"].get("startLine") or 0),
                int(row["metadata"].get("endLine") or 0),
                row["document"] or "",
            )
            for row in rows
            if row["id"] in ids
        ]
    )
    for row in rows:
        if row["id"] in ids:
            md = row["metadata"]
            facets[row["id"]] = Facet(str(md.get("repoSlug", "")), facet_values(md))
            index.add(
                row["id"],
                str(md.get("name") or ""),
                str(md.get("qualifiedName") or ""),
                row["document"] or "",
                path=str(md.get("sourcePath", "")),
                language=str(md.get("language", "")),
                start_line=int(md.get("startLine") or 0),
                repo=str(md.get("repoSlug", "")),
                context=f"{blocks.get(row['id'], ('', ''))[1]} {comments.get(row['id'], '')}",
                block=blocks.get(row["id"], ("", ""))[0],
                kind=str(md.get("kind", "")),
            )
    return TruthView(tenant_id, ids, served, marker, facets, index)


def _file_of(metadata: dict[str, Any]) -> tuple[str, str]:
    """The file a row comes from: two repos of a tenant may each hold ``lib/index.js``."""
    return (str(metadata.get("repoSlug", "")), str(metadata.get("sourcePath", "")))


class TruthCache:
    """Per tenant, the last ``TruthView``, recomputed when its marker moved: in a background
    thread while queries keep the previous view (``background=False``: in the caller);
    ``release``: as if every held parser switch were allowed."""

    def __init__(
        self,
        recheck_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        background: bool = True,
        release: bool = False,
    ) -> None:
        self._recheck_s = recheck_s
        self._release = release
        self._clock = clock
        self._background = background
        self._views: dict[str, tuple[float, TruthView]] = {}
        self._refreshing: set[str] = set()
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
                fresh_generation = view.marker[-1] == generation
                if now - checked_at < self._recheck_s and fresh_generation:
                    return view
                if _marker(ledger, store, tenants, tenant_id, generation) == view.marker:
                    self._views[tenant_id] = (now, view)
                    return view
                if self._background and fresh_generation:
                    self._refresh_later(ledger, store, tenants, tenant_id, generation)
                    return view
            view = compute_truth(
                ledger, store, tenants, tenant_id, generation, release=self._release
            )
            self.computations += 1
            self._views[tenant_id] = (now, view)
            return view

    def _refresh_later(
        self,
        ledger: Ledger,
        store: ChromaStore,
        tenants: TenantsFile,
        tenant_id: str,
        generation: str,
    ) -> None:
        with self._guard:
            if tenant_id in self._refreshing:
                return
            self._refreshing.add(tenant_id)

        def refresh() -> None:
            try:
                view = compute_truth(
                    ledger, store, tenants, tenant_id, generation, release=self._release
                )
                with self._lock(tenant_id):
                    self.computations += 1
                    self._views[tenant_id] = (self._clock(), view)
            except Exception:  # the next query retries; the previous view still serves
                log.exception("read-side truth of %s could not be recomputed", tenant_id)
            finally:
                with self._guard:
                    self._refreshing.discard(tenant_id)

        threading.Thread(target=refresh, name=f"truth-{tenant_id}", daemon=True).start()
