"""Stage 3 of a sweep: embed the chunks that changed, copy reused vectors, drop stale rows.

What is sent and copied is decided in ``embed_plan``; the rows are written by ``embed_writes``."""

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.band import band_for, provider_limit
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.rules.band import check_band, headroom_notice
from neo_assets.embedding.rules.lane import LaneItem
from neo_assets.health.evidence import VectorEvidenceRecorder
from neo_assets.health.freezing import blocking_freeze, observe_sweep
from neo_assets.health.rules.freeze import frozen_summary
from neo_assets.store.batch_caps import batch_cap_memory
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_fences import LedgerFenceBook
from neo_assets.sweep.chunk import ChunkGeneration
from neo_assets.sweep.context import RepoContext, lane_settings
from neo_assets.sweep.embed_plan import EmbedContext, EmbedPlan, plan_embedding
from neo_assets.sweep.embed_writes import batch_writer, write_copies
from neo_assets.sweep.envelope import EnvelopeResult
from neo_assets.sweep.moved_lines import restamp_moved_lines
from neo_assets.sweep.rules.summary import LaneSummary, SweepTimings


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
    plan = plan_embedding(ctx, settings, store, ledger, chunks, run)
    present_check_s = time.perf_counter() - started
    written_s = [0.0]  # seconds inside the store's writes (a box: the writer adds to it)
    write_batch = batch_writer(ctx, envelope, run, plan, written_s)
    fence_book = LedgerFenceBook(ledger, ctx.tenant_id, ctx.repo_slug, clock=run.clock)
    frozen = blocking_freeze(ledger, settings.store.collection_name)
    if frozen is not None:
        # The write path is frozen: embed nothing, defer with KB_COLLECTION_FROZEN.
        asyncio.run(run.provider.aclose())
        summary = frozen_summary(
            [i.chunk_id for i in plan.items],
            fence_book.fence_records(plan.generation),
            plan.generation,
            frozen,
        )
    else:
        moved = restamp_moved_lines(store, chunks)
        summary = _embed_and_write(settings, ledger, envelope, run, plan, fence_book, write_batch)
        summary = replace(summary, counts=replace(summary.counts, lines_moved=moved))
    timings = SweepTimings(
        present_check_s=present_check_s,
        write_s=written_s[0],
        embed_total_s=time.perf_counter() - started,
    )
    return _final_summary(summary, envelope, plan, timings)


def _embed_and_write(
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    run: EmbedContext,
    plan: EmbedPlan,
    fence_book: LedgerFenceBook,
    write_batch: Callable[[list[LaneItem], np.ndarray], None],
) -> LaneSummary:
    """Copy the reused vectors, send the rest through the lane, and freeze if told to."""
    reuse = plan.reuse
    copied = write_copies(reuse, plan.stored, plan.items, write_batch)

    def write_sent(batch: list[LaneItem], vectors: np.ndarray) -> None:
        """A sent batch, and the chunks with the same inputs (they take its vectors)."""
        rows: list[int] = []  # the sent row each written id takes its vector from
        ids_out: list[str] = []
        for n, item in enumerate(batch):
            for cid in (item.chunk_id, *reuse.followers.get(item.chunk_id, ())):
                rows.append(n)
                ids_out.append(cid)
        write_batch([LaneItem(cid, "") for cid in ids_out], vectors[rows])
        copied[0] += len(ids_out) - len(batch)

    recorder = VectorEvidenceRecorder(run.provider)
    summary, interrupt = run_lane_abortably(
        lambda: _embed(
            reuse.send,
            recorder,
            settings,
            plan.generation,
            fence_book,
            write_sent,
            run,
            width_known=plan.store.count() > 0,
        ),
        run.cancel_scope,
    )
    summary = replace(
        summary,
        counts=replace(
            summary.counts,
            reused=copied[0],
            embedded=summary.counts.embedded + copied[0],
            already_present=len(plan.present),
        ),
        vector_evidence=recorder.evidence(),
        generation=plan.generation,
        revision=envelope.revision,
    )
    if interrupt is not None:
        raise SweepAborted(summary, interrupt)
    # Freeze (durably, before the verdict) when this sweep's evidence says so.
    return replace(summary, freeze=observe_sweep(ledger, settings, summary, run.clock()))


def _final_summary(
    summary: LaneSummary, envelope: EnvelopeResult, plan: EmbedPlan, timings: SweepTimings
) -> LaneSummary:
    unavailable = sorted({c.chunk_id for c in plan.missing} - set(plan.by_id))
    errors = (*plan.secret_rows, *summary.errors)
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
            already_present=len(plan.present),
            chunks=len(plan.ids),
            fenced_secret=len(plan.secret_ids),
        ),
        errors=errors,
        generation=plan.generation,
        revision=envelope.revision,
        band=plan.band.describe(),
        timings=timings,
    )


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
        summary = await EmbeddingLane(
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
        ).run(items)
        if notice is not None:
            summary = replace(summary, notices=(*summary.notices, notice))
        return summary
    finally:
        await provider.aclose()
