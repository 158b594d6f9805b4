"""``run_query``: one query through a short-lived service, the form the CLI uses."""

from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.query.rules.request import parse_search
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
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
    hybrid: bool | None = None,
    filters: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """One query through a short-lived ``QueryService``, ``filters`` checked by the same rules
    as HTTP's and MCP's, the tenant's repos read from the tenants file. With ``expand``,
    each hit's linked chunks are under ``neighbours`` (and ``expanded``, the CLI's older
    name)."""
    resident = Resident(settings, store, ledger)
    try:
        given = {name: value for name, value in (filters or {}).items() if value is not None}
        request = parse_search(
            {"query": text, "k": k, "expand": expand} | ({"repo": repo} if repo else {}) | given
        )
        doc = await QueryService(resident).search(tenant, request, hybrid=hybrid)
    finally:
        await resident.aclose()
    if expand:
        for hit in doc["results"]:
            hit["expanded"] = hit["neighbours"]
    return {**doc, "tenantId": tenant, "repoSlug": repo, "k": k, "expand": expand}
