"""Reclaiming an old embedding generation, tenant by tenant: only the tenant's own rows,
once none of its repos is served by it; the collection goes once no row is left.
Design: docs/design/reconcile.md#deleting"""

import time
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.generations.records import (
    forget_repo_generations,
    generation_records,
    mark_reclaimed,
)
from neo_assets.generations.rules import reclaimable_generations, resolved_collection
from neo_assets.generations.serving import configured_generation, serving_generation
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger


def reclaim_generations(
    settings: Settings,
    tenant_id: str,
    repo_slugs: list[str],
    store: ChromaStore,
    ledger: Ledger,
    *,
    write: bool,
    batch: int,
) -> dict[str, Any]:
    """Classify (always) and, when ``write`` and reclamation is enabled, reclaim the
    tenant's rows of every generation it no longer uses. Returns the report part."""
    records = generation_records(ledger)
    serving = serving_generation(settings, ledger, tenant_id, repo_slugs).generation
    configured = configured_generation(settings)
    prefix = settings.store.collection_name
    out: dict[str, Any] = {"serving": serving, "configured": configured, "reclaimable": {}}
    for generation in reclaimable_generations(configured, [serving], records.values()):
        name = resolved_collection(prefix, records[generation], generation)
        if not store.collection_exists(name):
            if write and settings.reconcile.enabled:
                mark_reclaimed(ledger, generation, time.time())
            continue
        old = store.sibling(name)
        ids = [row["id"] for row in old.tenant_rows(tenant_id)]
        entry = {"collection": name, "rows": len(ids), "reclaimed": 0, "dropped": False}
        if write and settings.reconcile.enabled:
            for start in range(0, len(ids), batch):
                chunk = ids[start : start + batch]
                # Re-verified just before the delete: still this tenant's rows.
                rows = old.get_rows(chunk)
                mine = [
                    i
                    for i in chunk
                    if rows.get(i, {}).get("metadata", {}).get("tenantId") == tenant_id
                ]
                old.delete_ids(mine)
                entry["reclaimed"] += len(mine)
            forget_repo_generations(ledger, tenant_id, generation)
            if old.count() == 0:
                store.drop_collection(name)
                mark_reclaimed(ledger, generation, time.time())
                entry["dropped"] = True
        out["reclaimable"][generation] = entry
    return out
