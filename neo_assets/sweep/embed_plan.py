"""Stage 3 of a sweep, its plan: the generation, the rows it lacks, the fences, and which
inputs are copied from rows already stored or sent to the provider."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.band import band_for
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.rules.band import Band
from neo_assets.embedding.rules.lane import LaneItem
from neo_assets.embedding.rules.reuse import ReusePlan, embedding_input_digest, plan_reuse
from neo_assets.embedding.server_tokens import CountUnavailable
from neo_assets.generations.rules import resolved_collection
from neo_assets.generations.serving import register_provider_generation
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_fences import LedgerFenceBook
from neo_assets.sweep.chunk import ChunkGeneration, _sent_text, fill_missing_content
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.secrets import fence_secrets


@dataclass
class EmbedContext:
    provider: EmbeddingProvider
    cancel_scope: CancelScope = field(default_factory=lambda: CancelScope(label="sweep"))
    clock: Callable[[], float] = time.time
    progress: Callable[[int, int, int], None] | None = None
    # Called before every batch write; raises to refuse it (e.g. the sweep lease was lost).
    guard: Callable[[], None] | None = None


@dataclass
class EmbedPlan:
    """What one embed stage works over, decided before anything is sent."""

    generation: str
    store: ChromaStore  # the collection of ``generation``
    ids: list[str]
    present: set[str]
    stale: set[str]
    missing: list[DeclaredChunk]
    by_id: dict[str, DeclaredChunk]
    secret_ids: set[str]
    secret_rows: list[dict[str, Any]]
    band: Band
    items: list[LaneItem]
    digest_of: dict[str, str]
    stored: dict[str, np.ndarray]
    reuse: ReusePlan


def plan_embedding(
    ctx: RepoContext,
    settings: Settings,
    store: ChromaStore,
    ledger: Ledger,
    chunks: ChunkGeneration,
    run: EmbedContext,
) -> EmbedPlan:
    """The generation, the rows it lacks, the fences, and which inputs are copied or sent."""
    # The generation is recorded (and where its rows live) before a row of it is written;
    # its rows go to its own collection, beside the generation that serves queries.
    record = register_provider_generation(settings, ledger, run.provider, run.clock())
    generation = record.generation
    store = store.sibling(resolved_collection(settings.store.collection_name, record, generation))
    ids = chunks.chunk_ids()
    present = store.present_ids(ids)
    # Rows present at another generation (the input format or geometry changed since)
    # are embedded again and rewritten in place.
    stale = stale_rows(ctx, store, ledger, present, generation)
    present -= stale
    missing = fill_missing_content(
        ctx, settings, ledger, [c for c in chunks.chunks if c.chunk_id not in present]
    )
    by_id = embeddable_by_id(missing)
    # Secrets never leave the repo: a chunk holding one is fenced before anything is sent.
    secret_ids, secret_rows = fence_secrets(
        by_id,
        LedgerFenceBook(ledger, ctx.tenant_id, ctx.repo_slug, clock=run.clock),
        generation,
        run.clock,
    )
    texts = {
        cid: _sent_text(ctx, c, c.content or "", c.name)
        for cid, c in by_id.items()
        if cid not in secret_ids
    }
    band = band_for(settings)
    items = _lane_items(band, texts)
    # Each content once per generation: the missing chunks' exact inputs are looked up
    # among the rows of this generation (this tenant's, unless the operator allows reuse
    # across tenants) and copied; only inputs no row has are sent, once each.
    digest_of = {item.chunk_id: embedding_input_digest(item.text) for item in items}
    stored = (
        store.vectors_by_input_digest(
            digest_of.values(),
            generation=generation,
            tenant_id=None if settings.embedding.reuse_across_tenants else ctx.tenant_id,
        )
        if items and settings.embedding.reuse_vectors
        else {}
    )
    reuse = plan_reuse(items, digest_of, stored)
    return EmbedPlan(
        generation,
        store,
        ids,
        present,
        stale,
        missing,
        by_id,
        secret_ids,
        secret_rows,
        band,
        items,
        digest_of,
        stored,
        reuse,
    )


def _lane_items(band: Band, texts: dict[str, str]) -> list[LaneItem]:
    # The model's own count, when it has a tokenizer: the lane admits by it.
    counted: list[int | None] = [None] * len(texts)
    if band.exact:
        try:
            counted = list(band.count(list(texts.values())))
        except CountUnavailable:
            pass  # the lane meets the same server: it defers, or the size checks apply
    return [
        LaneItem(chunk_id=cid, text=text, tokens=tokens)
        for (cid, text), tokens in zip(texts.items(), counted, strict=True)
    ]


def stale_rows(
    ctx: RepoContext, store: ChromaStore, ledger: Ledger, present: set[str], generation: str
) -> set[str]:
    """Which ``present`` rows were embedded at another generation than ``generation``, read
    from the stamps only when the repo is not settled at it (an unchanged repo reads none)."""
    if not present:
        return set()
    state = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    if (
        state.get("embedding_generation") == generation
        and state.get("last_outcome") == codes.OUTCOME_COMPLETE
    ):
        return set()
    rows = store.get_rows(sorted(present))
    return {
        rid for rid, row in rows.items() if row["metadata"].get("embeddingGeneration") != generation
    }


def embeddable_by_id(chunks: list[DeclaredChunk]) -> dict[str, DeclaredChunk]:
    """The chunks whose text is at hand, by id, in their order: a kept chunk whose file
    could not be read again has none, and is left out."""
    return {c.chunk_id: c for c in chunks if c.has_text}
