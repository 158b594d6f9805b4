"""Stage 3 of a sweep: embed the chunks that changed, copy reused vectors, drop stale rows."""

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import INPUT_DIGEST_KEY, chunk_metadata, row_stamps
from neo_assets.core.sweep.summary import LaneSummary, SweepTimings
from neo_assets.embedding.band import band_for, provider_limit
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import LaneItem, embed_chunks
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.rules.band import check_band, headroom_notice
from neo_assets.embedding.rules.reuse import ReusePlan, embedding_input_digest, plan_reuse
from neo_assets.embedding.server_tokens import CountUnavailable
from neo_assets.generations.rules import resolved_collection
from neo_assets.generations.serving import (
    register_provider_generation,
)
from neo_assets.health.evidence import VectorEvidenceRecorder
from neo_assets.health.freezing import blocking_freeze, observe_sweep
from neo_assets.health.rules.freeze import frozen_summary
from neo_assets.services.sweep.chunk import ChunkGeneration, _sent_text, fill_missing_content
from neo_assets.services.sweep.context import COPY_BATCH, RepoContext, lane_settings
from neo_assets.services.sweep.envelope import EnvelopeResult
from neo_assets.services.sweep.secrets import fence_secrets
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store.batch_caps import batch_cap_memory
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_fence_book import LedgerFenceBook


@dataclass
class EmbedContext:
    provider: EmbeddingProvider
    cancel_scope: CancelScope = field(default_factory=lambda: CancelScope(label="sweep"))
    clock: Callable[[], float] = time.time
    progress: Callable[[int, int, int], None] | None = None
    # Called before every batch write; raises to refuse it (e.g. the sweep lease was lost).
    guard: Callable[[], None] | None = None


def embed_step(
    ctx: RepoContext,
    settings: Settings,
    store: ChromaStore,
    ledger: Ledger,
    envelope: EnvelopeResult,
    chunks: ChunkGeneration,
    run: EmbedContext,
) -> LaneSummary:
    """Embed what the collection lacks at the current generation, minus what is fenced.

    Each finished batch is added to Chroma at once, stamped from the declaration."""
    started = time.perf_counter()
    provider = run.provider
    # The generation is recorded (and where its rows live) before a row of it is written;
    # its rows go to its own collection, beside the generation that serves queries.
    record = register_provider_generation(settings, ledger, provider, run.clock())
    generation = record.generation
    store = store.sibling(resolved_collection(settings.store.collection_name, record, generation))
    ids = chunks.chunk_ids()
    lookup = store.present_ids
    present = lookup(ids)
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
    # The model's own count, when it has a tokenizer: the lane admits by it.
    counted: list[int | None] = [None] * len(texts)
    if band.exact:
        try:
            counted = list(band.count(list(texts.values())))
        except CountUnavailable:
            pass  # the lane meets the same server: it defers, or the size checks apply

    items = [
        LaneItem(chunk_id=cid, text=text, tokens=tokens)
        for (cid, text), tokens in zip(texts.items(), counted, strict=True)
    ]
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

    present_check_s = time.perf_counter() - started
    written_s = [0.0]  # seconds inside the store's writes (a box: the writer adds to it)

    def write_batch(batch: list[LaneItem], vectors: np.ndarray) -> None:
        if run.guard is not None:
            run.guard()
        write_started = time.perf_counter()
        ingested_at = run.clock()
        metas = []
        for item in batch:
            c = by_id[item.chunk_id]
            metas.append(
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
                    embedding_generation=generation,
                )
                | {INPUT_DIGEST_KEY: digest_of[item.chunk_id]}
            )
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

    fence_book = LedgerFenceBook(ledger, ctx.tenant_id, ctx.repo_slug, clock=run.clock)
    frozen = blocking_freeze(ledger, settings.store.collection_name)
    if frozen is not None:
        # The write path is frozen: embed nothing, defer with KB_COLLECTION_FROZEN.
        asyncio.run(provider.aclose())
        summary = frozen_summary(
            [i.chunk_id for i in items], fence_book.fence_records(generation), generation, frozen
        )
    else:
        copied = write_copies(reuse, stored, items, write_batch)

        def write_sent(batch: list[LaneItem], vectors: np.ndarray) -> None:
            """A sent batch, and the chunks with the same inputs (they take its vectors)."""
            rows = [
                n
                for n, item in enumerate(batch)
                for _ in (item, *reuse.followers.get(item.chunk_id, ()))
            ]
            ids_out = [
                cid
                for item in batch
                for cid in (item.chunk_id, *reuse.followers.get(item.chunk_id, ()))
            ]
            write_batch([LaneItem(cid, "") for cid in ids_out], vectors[rows])
            copied[0] += len(ids_out) - len(batch)

        recorder = VectorEvidenceRecorder(provider)
        summary, interrupt = run_lane_abortably(
            lambda: _embed(
                reuse.send,
                recorder,
                settings,
                generation,
                fence_book,
                write_sent,
                run,
                width_known=store.count() > 0,
            ),
            run.cancel_scope,
        )
        summary = replace(
            summary,
            counts=replace(
                summary.counts,
                reused=copied[0],
                embedded=summary.counts.embedded + copied[0],
                already_present=len(present),
            ),
            vector_evidence=recorder.evidence(),
            generation=generation,
            revision=envelope.revision,
        )
        if interrupt is not None:
            raise SweepAborted(summary, interrupt)
        # Freeze (durably, before the verdict) when this sweep's evidence says so.
        summary = replace(summary, freeze=observe_sweep(ledger, settings, summary, run.clock()))
    unavailable = sorted({c.chunk_id for c in missing} - set(by_id))
    errors = (*secret_rows, *summary.errors)
    if unavailable:
        # Never complete silently over a chunk whose text could not be read again.
        errors += (
            {
                "code": codes.SOURCE_UNREADABLE,
                "message": f"{len(unavailable)} chunk(s) could not be re-read from the repo",
                "details": {"chunkIds": unavailable[:32]},
            },
        )
    return replace(
        summary,
        counts=replace(
            summary.counts,
            already_present=len(present),
            chunks=len(ids),
            fenced_secret=len(secret_ids),
        ),
        errors=errors,
        generation=generation,
        revision=envelope.revision,
        band=band.describe(),
        timings=SweepTimings(
            present_check_s=present_check_s,
            write_s=written_s[0],
            embed_total_s=time.perf_counter() - started,
        ),
    )


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


def stale_rows(
    ctx: RepoContext, store: ChromaStore, ledger: Ledger, present: set[str], generation: str
) -> set[str]:
    """Which ``present`` rows were embedded at another generation than ``generation``.

    Read from the rows' stamps only when the repo is not settled at this generation (its
    last sweep was at another one, or did not complete): a sweep that completed at
    ``generation`` left every declared row at it, so an unchanged repo reads no stamps."""
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


class SweepAborted(BaseException):
    """The run was interrupted (Ctrl-C, or a Dagster run terminated from the UI) while
    embedding. The lane was cancelled with ABORT_ERR and wound down; ``summary`` holds
    its verdicts (the remainder deferred as aborted) so the caller can record the sweep
    before letting ``interrupt`` end the run."""

    def __init__(self, summary: LaneSummary, interrupt: BaseException) -> None:
        super().__init__("sweep aborted")
        self.summary = summary
        self.interrupt = interrupt


def run_lane_abortably(
    make: Callable[[], Any], scope: CancelScope
) -> tuple[LaneSummary, BaseException | None]:
    """Run the lane's event loop in a worker thread so an interrupt delivered to the main
    thread (signals only arrive there) becomes an upstream abort of the cancellation
    scope: no later request starts, the connection in flight is closed, and the lane
    still returns its summary. Returns (summary, the interrupt or None)."""
    box: dict[str, Any] = {}
    ready = threading.Event()
    done = threading.Event()  # not Thread.is_alive(): an interrupted join can misreport it

    def worker() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        ready.set()
        try:
            box["result"] = loop.run_until_complete(make())
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc
        finally:
            loop.close()
            done.set()

    threading.Thread(target=worker, name="embed-lane", daemon=True).start()
    ready.wait()
    interrupt: BaseException | None = None
    while True:
        try:
            if done.wait(0.1):
                break
        except BaseException as exc:  # KeyboardInterrupt, DagsterExecutionInterruptedError
            if interrupt is None:
                interrupt = exc
                scope.cancel_threadsafe(box["loop"], codes.ABORT_ERR)
    if "error" in box:
        raise box["error"]
    return box["result"], interrupt


async def _embed(
    items: list[LaneItem],
    provider: EmbeddingProvider,
    settings: Settings,
    generation: str,
    fence_book: LedgerFenceBook,
    write_batch: Callable[[list[LaneItem], np.ndarray], None],
    run: EmbedContext,
    *,
    width_known: bool = False,
) -> LaneSummary:
    try:
        notice = None
        if items and "context_tokens" in settings.embedding.model_fields_set:
            # A band set by hand, at first contact: a server that says it takes less is
            # told so; one that takes more is named, with the setting that would use it.
            # (Unset, the band is what the server said: embedding/discovery.py.)
            band = band_for(settings)
            limit = await provider_limit(getattr(provider, "inner", provider), run.cancel_scope)
            check_band(provider.name, band, limit)
            notice = headroom_notice(band, limit)
        summary = await embed_chunks(
            items,
            provider=provider,
            settings=lane_settings(settings),
            generation=generation,
            fence_book=fence_book,
            write_batch=write_batch,
            cancel_scope=run.cancel_scope,
            clock=run.clock,
            progress=run.progress,
            width_known=width_known,
            batch_caps=batch_cap_memory(fence_book.ledger, provider, clock=run.clock),
        )
        if notice is not None:
            summary = replace(summary, notices=(*summary.notices, notice))
        return summary
    finally:
        await provider.aclose()
