"""Tenant-scoped retrieval: the query is embedded by the provider of the generation that
serves the tenant, and the where-filter is built from a validated tenant id, so it can
only narrow."""

from collections.abc import Iterable
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.config.tenants import load_tenants
from neo_assets.core import codes
from neo_assets.core.generations import GenerationRecord
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.services.generations import (
    GenerationUnavailable,
    collection_of,
    query_provider,
    serving_generation,
)
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
    repo_slugs: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Answer from ONE embedding generation: the one serving the tenant
    (``services/generations.serving_generation``), its query embedded by that
    generation's provider; when that provider cannot embed, the next generation that can,
    with a notice saying so. ``repo_slugs``: the tenant's declared repos (read from the
    tenants file when None)."""
    slugs = list(repo_slugs) if repo_slugs is not None else declared_slugs(settings, tenant)
    choice = serving_generation(settings, ledger, tenant, slugs)
    notices: list[dict[str, Any]] = []
    for generation in choice.serving.candidates:
        record = choice.records.get(generation)
        try:
            vector = await embed_query(settings, generation, record, text)
        except (GenerationUnavailable, EmbedFailure) as exc:
            notices.append(unavailable_notice(generation, record, exc))
            continue
        target = store.sibling(collection_of(settings, choice.records, generation))
        hits = target.query(vector, where=tenant_filter(tenant, repo), k=k)
        # Re-check row by row: a row of another tenant (or generation) never leaves here.
        hits = [
            h
            for h in hits
            if h["metadata"].get("tenantId") == tenant
            and h["metadata"].get("embeddingGeneration", generation) == generation
        ]
        if expand:
            _expand(target, ledger, hits, tenant=tenant, repo=repo, per_hit=expand_per_hit)
        return {
            "results": hits,
            "tenantId": tenant,
            "repoSlug": repo,
            "k": k,
            "expand": expand,
            "embeddingGeneration": generation,
            "servingGeneration": choice.generation,
            "notices": notices,
        }
    raise QueryUnavailable(
        "no embedding generation can embed this query: "
        + "; ".join(n["message"] for n in notices)
        + ". Fix the provider (NEO_EMBEDDING_*) and query again",
        notices,
    )


class QueryUnavailable(RuntimeError):
    """No generation of the tenant's knowledge base can embed the query right now."""

    code = codes.KB_VECTOR_EMBED_CONNECTION_REFUSED

    def __init__(self, message: str, notices: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.notices = notices


async def embed_query(
    settings: Settings, generation: str, record: GenerationRecord | None, text: str
) -> np.ndarray:
    """``text`` embedded at ``generation`` by its provider; raises what stops it."""
    provider = query_provider(settings, generation, record)
    try:
        vectors = await provider.embed([text], CancelScope(label="query"), "query")
    finally:
        await provider.aclose()
    return vectors[0]


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


def declared_slugs(settings: Settings, tenant: str) -> list[str]:
    """The tenant's declared repo slugs from the tenants file (those the ledger knows
    when the file cannot be read)."""
    try:
        tenants = load_tenants(
            settings.store.resolved_tenants_file,
            allowed_roots=settings.store.allowed_roots,
            home=settings.store.home_dir,
        )
        return [r.slug for t in tenants.tenants if t.id == tenant for r in t.repos]
    except Exception:  # noqa: BLE001 - the ledger's view is the fallback
        return []


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
