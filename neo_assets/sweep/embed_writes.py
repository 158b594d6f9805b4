"""Stage 3 of a sweep, its writes: each finished batch as stamped rows, and the copies of
vectors a row of the same generation already has."""

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from neo_assets.core.ids.stamps import INPUT_DIGEST_KEY, chunk_metadata, row_stamps
from neo_assets.embedding.rules.lane import LaneItem
from neo_assets.embedding.rules.reuse import ReusePlan
from neo_assets.sweep.context import COPY_BATCH, RepoContext
from neo_assets.sweep.embed_plan import EmbedContext, EmbedPlan
from neo_assets.sweep.envelope import EnvelopeResult


def write_copies(
    reuse: ReusePlan,
    stored: dict[str, np.ndarray],
    items: list[LaneItem],
    write_batch: Callable[[list[LaneItem], np.ndarray], None],
) -> list[int]:
    """Write the chunks whose input a row of this generation already has, with that row's
    vector, in store-sized batches. Returns ``[rows written]`` (a box: the lane's writer
    adds the followers of sent inputs to it)."""
    copy_items = [item for item in items if item.chunk_id in reuse.copy]
    for start in range(0, len(copy_items), COPY_BATCH):
        batch = copy_items[start : start + COPY_BATCH]
        vectors = np.stack([stored[reuse.copy[item.chunk_id]] for item in batch])
        write_batch(batch, vectors)
    return [len(copy_items)]


def _row_metadata(
    ctx: RepoContext,
    envelope: EnvelopeResult,
    plan: EmbedPlan,
    item: LaneItem,
    ingested_at: float,
) -> dict[str, Any]:
    c = plan.by_id[item.chunk_id]
    return (
        chunk_metadata(
            language=c.language,
            start_line=c.start_line,
            end_line=c.end_line,
            qualified_name=c.qualified_name,
            parent=c.parent,
        )
        | row_stamps(
            tenant_id=ctx.tenant_id,
            repo_slug=ctx.repo_slug,
            source_path=c.source_path,
            kind=c.kind,
            name=c.name,
            parser_id=ctx.repo.parser.id,
            parser_version=ctx.repo.parser.version,
            tenant_config_version=envelope.config_version,
            ingested_at=ingested_at,
            revision=envelope.revision,
            embedding_generation=plan.generation,
        )
        | {INPUT_DIGEST_KEY: plan.digest_of[item.chunk_id]}
    )


def batch_writer(
    ctx: RepoContext,
    envelope: EnvelopeResult,
    run: EmbedContext,
    plan: EmbedPlan,
    written_s: list[float],
) -> Callable[[list[LaneItem], np.ndarray], None]:
    """The writer of one finished batch: stamped rows, added (stale ones upserted)."""
    store, stale, by_id = plan.store, plan.stale, plan.by_id

    def write_batch(batch: list[LaneItem], vectors: np.ndarray) -> None:
        if run.guard is not None:
            run.guard()
        write_started = time.perf_counter()
        ingested_at = run.clock()
        metas = [_row_metadata(ctx, envelope, plan, item, ingested_at) for item in batch]
        batch_ids = [i.chunk_id for i in batch]
        documents = [by_id[cid].content for cid in batch_ids]  # the content, no header
        if not stale or stale.isdisjoint(batch_ids):
            store.add(batch_ids, vectors, documents, metas)
        else:
            for write, keep in ((store.add, False), (store.upsert, True)):
                rows = [n for n, cid in enumerate(batch_ids) if (cid in stale) == keep]
                if rows:
                    write(
                        [batch_ids[n] for n in rows],
                        vectors[rows],
                        [documents[n] for n in rows],
                        [metas[n] for n in rows],
                    )
        written_s[0] += time.perf_counter() - write_started

    return write_batch
