"""Tenant-scoped retrieval: the query is embedded by the configured provider, and the
where-filter is built from a validated tenant id, so it can only narrow."""

from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.embedding.cancel import CancelScope
from neo_assets.services.handles import build_provider
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.links import neighbours

# Linked chunks added per hit by ``expand``: its strongest, both link kinds merged.
EXPAND_PER_HIT = 5


async def run_query(
    settings: Settings,
    store: ChromaStore,
    ledger: Ledger,
    text: str,
    *,
    tenant: str,
    repo: str | None,
    k: int,
    expand: bool = False,
    expand_per_hit: int = EXPAND_PER_HIT,
) -> dict[str, Any]:
    provider = build_provider(settings)
    try:
        vectors = await provider.embed([text], CancelScope(label="query"), "query")
    finally:
        await provider.aclose()
    hits = store.query(vectors[0], where=tenant_filter(tenant, repo), k=k)
    # Re-check row by row: a row of another tenant never leaves this function.
    hits = [h for h in hits if h["metadata"].get("tenantId") == tenant]
    if expand:
        _expand(store, ledger, hits, tenant=tenant, repo=repo, per_hit=expand_per_hit)
    return {"results": hits, "tenantId": tenant, "repoSlug": repo, "k": k, "expand": expand}


def _expand(
    store: ChromaStore,
    ledger: Ledger,
    hits: list[dict[str, Any]],
    *,
    tenant: str,
    repo: str | None,
    per_hit: int,
) -> None:
    """Add ``"expanded"`` to each hit: its strongest linked neighbours (``id``, ``score`` =
    the link weight, ``linkKind``, ``document``, ``metadata``), read from the tenant's links
    and then from the collection, where each row is re-checked to carry this tenant (and
    repo, when one was asked for). A neighbour that fails the check, or whose row is gone,
    is dropped."""
    linked = neighbours(ledger, tenant, [h["id"] for h in hits], limit=per_hit)
    wanted = list(dict.fromkeys(n.neighbour_id for ns in linked.values() for n in ns))
    rows = store.get_rows(wanted, include_documents=True) if wanted else {}
    for hit in hits:
        expanded = []
        for n in linked.get(hit["id"], []):
            row = rows.get(n.neighbour_id)
            if row is None:
                continue
            meta = row["metadata"]
            if meta.get("tenantId") != tenant:
                continue
            if repo is not None and meta.get("repoSlug") != repo:
                continue
            expanded.append(
                {
                    "id": n.neighbour_id,
                    "score": n.weight,
                    "linkKind": n.link_kind,
                    "document": row["document"],
                    "metadata": meta,
                }
            )
        hit["expanded"] = expanded
