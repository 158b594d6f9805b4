"""Tenant-scoped retrieval: the query is embedded by the configured provider, and the
where-filter is built from a validated tenant id, so it can only narrow."""

from typing import Any

from neo_assets import runtime
from neo_assets.core.stamps import tenant_filter
from neo_assets.embedding.cancel import CancelScope
from neo_assets.settings import Settings
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger


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
) -> dict[str, Any]:
    provider = runtime.build_provider(settings)
    try:
        vectors = await provider.embed([text], CancelScope(label="query"), "query")
    finally:
        await provider.aclose()
    hits = store.query(vectors[0], where=tenant_filter(tenant, repo), k=k)
    # Re-check row by row: a row of another tenant never leaves this function.
    hits = [h for h in hits if h["metadata"].get("tenantId") == tenant]
    return {"results": hits, "tenantId": tenant, "repoSlug": repo, "k": k, "expand": expand}
