"""The sweep's assets and the operator snapshot.

One step per tenant repo (one dynamic partition each) materializes the four sweep assets
in order — repo_envelope -> chunk_generation -> kb_embeddings -> fence_census — as a
multi-asset, so lineage and per-asset history stay in the UI while the sweep pays
Dagster's per-step cost (events, resource set-up, IO-manager round trips) once, and the
envelope and chunk frames pass in memory instead of being pickled between steps. Each
asset is materialized as soon as its stage ends, so a failure later in the sweep still
leaves the earlier stages visible. ``kb_status`` is the unpartitioned operator snapshot.

Each stage only wires I/O to a step in ``neo_assets.services.sweep.steps`` and describes the
result as metadata the UI can show and plot.
"""

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pandas as pd

from neo_assets.concurrency.chunk_waves import ChunkWaves, many_to_parse, pipelined
from neo_assets.concurrency.prelude import SweepPrelude
from neo_assets.core import codes
from neo_assets.core.ids.partition_keys import parse_partition_key
from neo_assets.core.sweep.chunk_tally import PREVIEW_COLUMNS, PREVIEW_ROWS, ChunkTally
from neo_assets.defs.metadata import (
    census_summary,
    chunks_summary,
    counts_metadata,
    embeddings_summary,
    envelope_summary,
    preview_records,
    preview_table,
    run_seconds,
    status_summary,
    strikes_table,
    sweep_numbers,
)
from neo_assets.defs.partitions import tenant_repos
from neo_assets.defs.resources import (
    LedgerResource,
    ProviderResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.embedding.lifecycle import close_provider, prepare
from neo_assets.services.status import build_status
from neo_assets.services.sweep.lease import SweepLease, lease_metadata, skipped_result
from neo_assets.services.sweep.progress import report as report_progress
from neo_assets.services.sweep.steps import (
    EmbedContext,
    EnvelopeResult,
    RepoContext,
    SweepAborted,
    census_step,
    chunk_step,
    embed_step,
    envelope_step,
    failure_recorded,
    plan_chunks,
)

OWNERS = ["team:knowledge-platform"]
# The Dagster concurrency pool of everything that calls the embedding provider.
EMBEDDING_POOL = "neo-embedding-provider"
# The one op that materializes a repo's sweep assets (its step key in every sweep run).
SWEEP_STEP = "sweep_repo"
SWEEP_ASSETS = ("repo_envelope", "chunk_generation", "kb_embeddings", "fence_census")


def repo_context(partition_key: str, tenants: TenantsResource) -> RepoContext:
    tenant_id, repo_slug = parse_partition_key(partition_key)
    tenants_file = tenants.load()
    for tenant in tenants_file.tenants:
        if tenant.id != tenant_id:
            continue
        for repo in tenant.repos:
            if repo.slug == repo_slug:
                return RepoContext(tenant=tenant, repo=repo)
    raise dg.Failure(
        description=(
            f"partition {partition_key!r} is no longer declared in {tenants_file.path}: "
            "declare the repo again, or delete the partition in the UI"
        )
    )


# ---------------------------------------------------------------------------- metadata
def envelope_metadata(ctx: RepoContext, result: EnvelopeResult) -> dict[str, Any]:
    # From the entries: a frame of every path only to count them cost a forced sweep of
    # 2,000 paths ~5 ms (a fifteenth of its own time).
    entries = result.listing.entries
    yielded = sum(1 for e in entries if e.yielded)
    skip_reasons = result.listing.skip_counts()
    return {
        "revision": result.revision,
        "envelope_kind": result.kind,
        "paths": len(entries),
        "yielded_paths": yielded,
        "skipped_paths": len(entries) - yielded,
        "tenant_config_version": result.config_version,
        "skip_reasons": dg.MetadataValue.json(skip_reasons),
        "dagster/row_count": len(entries),
        "summary": envelope_summary(
            ctx.key, result.revision, result.kind, len(entries), yielded, skip_reasons
        ),
        "preview": preview_records(
            (e._asdict() for e in entries), ["path", "size", "yielded", "skip_reason"]
        ),
    }


def chunks_metadata(ctx: RepoContext, revision: str, tally: ChunkTally) -> dict[str, Any]:
    kinds = tally.kind_counts()
    return {
        "revision": revision,
        "parser_id": ctx.repo.parser.id,
        "parser_version": ctx.repo.parser.version,
        "chunks": tally.chunks,
        "paths_with_chunks": tally.paths_with_chunks,
        "parsed_paths": tally.parsed_paths,
        "reused_paths": tally.reused_paths,
        "kinds": dg.MetadataValue.json(kinds),
        "dagster/row_count": tally.chunks,
        "summary": chunks_summary(
            ctx.key,
            f"{ctx.repo.parser.id} {ctx.repo.parser.version}",
            tally.chunks,
            tally.paths_with_chunks,
            kinds,
        ),
        "preview": preview_records(tally.preview, PREVIEW_COLUMNS),
    }


def frame_tally(chunks: pd.DataFrame) -> ChunkTally:
    """The serial chunk stage's frame, tallied as the waves tally theirs."""
    tally = ChunkTally(
        chunks=len(chunks),
        parsed_paths=int(chunks.attrs.get("parsed_paths", 0)),
        reused_paths=int(chunks.attrs.get("reused_paths", 0)),
    )
    tally.kinds.update(chunks["kind"].tolist())
    tally.paths.update(chunks["source_path"].tolist())
    head = chunks[list(PREVIEW_COLUMNS)].head(PREVIEW_ROWS)
    tally.preview = head.astype(object).where(head.notna(), None).to_dict("records")
    return tally


def embeddings_metadata(ctx: RepoContext, summary: dict[str, Any]) -> dict[str, Any]:
    counts = summary.get("counts", {})
    strikes = summary.get("strikes", [])
    seconds = float(summary.get("seconds", 0.0))
    numbers = sweep_numbers(counts, len(strikes), seconds)
    return {
        **counts_metadata(counts),
        **numbers,
        "embedding_generation": summary.get("generation", ""),
        "errors": len(summary.get("errors", [])),
        "strike_rows": strikes_table(strikes),
        "embed_seconds": seconds,
        "dagster/row_count": int(counts.get("embedded", 0)),
        "summary": embeddings_summary(ctx.key, numbers, strikes),
    }


def census_metadata(
    ctx: RepoContext, result: dict[str, Any], embed_seconds: float, sweep_s: float | None
) -> dict[str, Any]:
    poison = result["contentPoisonChunks"]
    undeliverable = result["undeliverableChunks"]
    numbers = sweep_numbers(result.get("counts", {}), len(result["strikes"]), embed_seconds)
    if sweep_s is not None:
        numbers["sweep_seconds"] = sweep_s
    return {
        **numbers,
        "summary": census_summary(ctx.key, result, numbers),
        "outcome": result["outcome"],
        "deferred_cause_code": result["deferredCauseCode"] or "",
        "consecutive_failures": result["consecutiveFailures"],
        "next_due_at": dg.MetadataValue.timestamp(result["nextDueAt"])
        if result["nextDueAt"]
        else "",
        "content_poison_chunks": poison["count"],
        "undeliverable_chunks": undeliverable["count"],
        "censuses": dg.MetadataValue.json(
            {"contentPoisonChunks": poison, "undeliverableChunks": undeliverable}
        ),
    }


# ---------------------------------------------------------------------------- the sweep
def _out(description: str, kinds: set[str], *, value: bool = False) -> dg.AssetOut:
    return dg.AssetOut(
        group_name="sweep",
        kinds=kinds,
        owners=OWNERS,
        description=description,
        is_required=False,  # a failing stage leaves the later assets unmaterialized
        # Only the census carries a value (the sweep's result, read by the CLI's runner);
        # the other stages' outputs live in the ledger and the collection.
        **({} if value else {"dagster_type": dg.Nothing}),
    )


SWEEP_OUTS = {
    "repo_envelope": _out(
        "The repository at its revision: every path of the tree (git commit or content "
        "digest), marked yielded or skipped-with-reason. The authority on path membership.",
        {"git", "python"},
    ),
    "chunk_generation": _out(
        "The declared generation: every yielded path parsed by the declared parser into "
        "chunks whose ids hash (tenant, repo, kind, name, content, path, parser id, version). "
        "Only changed files are parsed again; the generation is recorded in the ledger.",
        {"python"},
    ),
    "kb_embeddings": _out(
        "Rows in the shared collection: what it lacked at the current embedding generation, "
        "minus what is fenced, embedded through the lane and added batch by batch.",
        {"chroma"},
    ),
    "fence_census": _out(
        "The sweep's verdict: complete / deferred / failed from codes and the fence gate; "
        "moves the checkpoint and persists both fence censuses with it.",
        {"sqlite"},
        value=True,
    ),
}


@dg.multi_asset(
    name=SWEEP_STEP,
    outs=SWEEP_OUTS,
    internal_asset_deps={
        "repo_envelope": set(),
        "chunk_generation": {dg.AssetKey("repo_envelope")},
        "kb_embeddings": {dg.AssetKey("chunk_generation")},
        "fence_census": {dg.AssetKey("kb_embeddings")},
    },
    partitions_def=tenant_repos,
    can_subset=False,
    # N sweeps share the provider's slots: limit the pool on the instance (deploy/README.md).
    pool=EMBEDDING_POOL,
    description="Sweep one tenant repo: envelope, chunks, embeddings, census, in one step.",
)
def sweep_repo(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
    provider: ProviderResource,
) -> Iterator[dg.MaterializeResult | dg.Output]:
    ctx = repo_context(context.partition_key, tenants)
    cfg = settings.load()
    book = ledger.get()
    # The run holds the repo's lease from before its first ledger write to after its
    # census; a run that cannot get it, or loses it, writes nothing more.
    with SweepLease(book, ctx, context.run_id, cfg) as lease, contextlib.ExitStack() as stack:
        if not lease.held:
            context.log.warning(f"{ctx.key}: skipped, sweep lease {lease.info}")
            yield from _skipped(ctx, lease.info, SWEEP_ASSETS)
            return
        # Seconds inside each stage: the sweep's own work, without Dagster's event handling.
        stage_s: dict[str, float] = {}
        mark = time.perf_counter()
        embedder = provider.build()
        # Closed on every way out, even a run stopped at a yield (closing twice is a no-op).
        stack.callback(close_provider, embedder)
        # Helpers, the recorded generation and the store's listing of the repo's rows start
        # before and beside the envelope (concurrency/prelude.py).
        prelude = stack.enter_context(
            contextlib.closing(SweepPrelude(ctx, cfg, book, embedder, store.get))
        )
        with failure_recorded(ctx, cfg, book, codes.SOURCE_UNREADABLE):
            envelope = envelope_step(
                ctx, cfg, book, time.time(), on_new_files=prelude.helpers.new_files
            )
        presence = prelude.envelope_read()
        stage_s["envelope_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        waves: ChunkWaves | None = None
        with failure_recorded(ctx, cfg, book, codes.PARSE_FAILED):
            plan = plan_chunks(ctx, cfg, book, envelope, prelude.recorded)
            if many_to_parse(plan, cfg):
                prepare(embedder)  # a big sweep: its helpers start while the files parse
            if pipelined(plan, cfg):
                # Many files to parse: they are parsed and declared wave by wave while the
                # lane embeds and writes the earlier waves (concurrency/chunk_waves.py).
                waves = stack.enter_context(
                    ChunkWaves(
                        ctx,
                        cfg,
                        book,
                        envelope,
                        plan,
                        time.time(),
                        guard=lease.check,
                        parser=prelude.helpers.take_parser(),
                    )
                )
                # The first wave is parsed and declared while Dagster records the
                # envelope's materialization (below), instead of after it.
                waves.start_ahead()
        stage_s["chunks_s"] = time.perf_counter() - mark
        yield dg.MaterializeResult(
            asset_key="repo_envelope", metadata=envelope_metadata(ctx, envelope)
        )

        if not lease.held:
            yield from _lost(context, ctx, lease.info, SWEEP_ASSETS[1:])
            return
        if waves is not None:
            chunks = waves.kept_frame()
        else:
            mark = time.perf_counter()
            with failure_recorded(ctx, cfg, book, codes.PARSE_FAILED):
                chunks = chunk_step(ctx, cfg, book, envelope, time.time(), plan=plan)
            stage_s["chunks_s"] += time.perf_counter() - mark
        if waves is None:
            yield dg.MaterializeResult(
                asset_key="chunk_generation",
                metadata=chunks_metadata(ctx, envelope.revision, frame_tally(chunks)),
            )

        unmaterialized = SWEEP_ASSETS[1:] if waves is not None else SWEEP_ASSETS[2:]
        if not lease.held:
            yield from _lost(context, ctx, lease.info, unmaterialized)
            return
        started = time.monotonic()
        with failure_recorded(ctx, cfg, book, codes.KB_VECTOR_EMBED_UNCLASSIFIED):
            try:
                summary = embed_step(
                    ctx,
                    cfg,
                    presence.store(),
                    book,
                    envelope,
                    chunks,
                    EmbedContext(
                        provider=embedder,
                        progress=_progress_logger(context, ctx, started),
                        guard=lease.check,
                        present_ids=presence.present_ids,
                    ),
                    waves=waves,
                )
            except SweepAborted as aborted:
                # An upstream abort (Ctrl-C, a run terminated from the UI): record the
                # sweep as the lane left it (deferred, cause aborted), then end the run.
                census_step(ctx, cfg, book, envelope, aborted.summary, time.time())
                raise aborted.interrupt from None
            finally:
                if waves is not None:
                    waves.close()
        del chunks  # the declared generation is in the ledger; the census needs no frame
        summary["seconds"] = time.monotonic() - started
        stage_s["embed_s"] = summary["seconds"]
        if not lease.held:  # lost mid-way: the writes stopped; the new holder finishes
            yield from _lost(context, ctx, lease.info, unmaterialized)
            return
        if waves is not None:
            # Its stage ended inside the lane's run (the last wave declared): reported now,
            # before the embeddings it fed.
            yield dg.MaterializeResult(
                asset_key="chunk_generation",
                metadata=chunks_metadata(ctx, envelope.revision, waves.finished_tally()),
            )
        counts = summary.get("counts", {})
        yield dg.MaterializeResult(
            asset_key="kb_embeddings", metadata=embeddings_metadata(ctx, summary)
        )

        mark = time.perf_counter()
        with failure_recorded(ctx, cfg, book, codes.STORE_FAILED):
            result = census_step(ctx, cfg, book, envelope, summary, time.time())
        stage_s["census_s"] = time.perf_counter() - mark
        stage_s["stages_s"] = sum(stage_s.values())
        result["timings"] = {**result.get("timings", {}), **stage_s}
        result["lease"] = lease.info
    # One line for the run's log (each log line is an event the instance stores).
    context.log.info(
        f"{ctx.key}: {result['outcome']} (cause {result['deferredCauseCode']}); "
        f"embedded {counts.get('embedded', 0)} new, "
        f"{counts.get('already_present', 0)} already present, "
        f"{len(summary.get('errors', []))} error rows in {summary['seconds']:.1f}s"
    )
    sweep_s = run_seconds(context.instance, context.run_id, time.time())
    yield dg.Output(
        result,
        output_name="fence_census",
        metadata=census_metadata(ctx, result, summary["seconds"], sweep_s),
    )


def _progress_logger(context: dg.AssetExecutionContext, ctx: RepoContext, started: float) -> Any:
    last_log = [started]

    def progress(done: int, total: int, embedded: int) -> None:
        report_progress(ctx.key, done, total, embedded)  # the CLI's bar, when one listens
        # A steady cadence in the run's logs: one line every 5 s, whatever the batch rate.
        now = time.monotonic()
        if now - last_log[0] < 5.0:
            return
        last_log[0] = now
        elapsed = max(now - started, 1e-9)
        eta = (total - done) * (elapsed / max(done, 1))
        context.log.info(
            f"embedding {ctx.key}: batches {done}/{total}, {embedded} chunks, "
            f"{embedded / elapsed:.1f} chunks/s, ETA {eta:.0f}s"
        )

    return progress


def _lost(
    context: dg.AssetExecutionContext,
    ctx: RepoContext,
    info: dict[str, Any],
    assets: tuple[str, ...],
) -> Iterator[dg.MaterializeResult | dg.Output]:
    """The lease was lost between stages (it expired while the process was paused, and
    another sweep took it): write nothing more and let the new holder finish."""
    context.log.warning(f"{ctx.key}: sweep lease lost, {info}")
    yield from _skipped(ctx, info, assets)


def _skipped(
    ctx: RepoContext, info: dict[str, Any], assets: tuple[str, ...]
) -> Iterator[dg.MaterializeResult | dg.Output]:
    """What a run that does not (or no longer) hold the lease records: each remaining
    asset says why it wrote nothing, and the census is the ``skipped`` result."""
    for key in assets:
        if key == "fence_census":
            result = skipped_result(ctx, info)
            yield dg.Output(
                result,
                output_name="fence_census",
                metadata={"outcome": result["outcome"], **lease_metadata(info)},
            )
        else:
            yield dg.MaterializeResult(asset_key=key, metadata=lease_metadata(info))


@dg.asset(
    group_name="status",
    kinds={"pandas"},
    owners=OWNERS,
    deps=[dg.AssetKey("fence_census")],
    description="The operator's snapshot: one row per declared repo (checkpoint, outcome, "
    "cause, next due time, censuses, strikes, rows).",
)
def kb_status(
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.Output[pd.DataFrame]:
    snapshot = build_status(settings.load(), tenants.load(), ledger.get(), store.get())
    frame = pd.DataFrame(snapshot["repos"])
    return dg.Output(
        frame,
        metadata={
            "repos": len(frame),
            "dagster/row_count": len(frame),
            "summary": status_summary(frame),
            "preview": preview_table(
                frame, ["tenantId", "repoSlug", "outcome", "deferredCauseCode", "rows"]
            ),
            # The provider's health and the write path's freeze, beside the repos.
            "canary": dg.MetadataValue.json(snapshot.get("canary") or {}),
            "freeze": dg.MetadataValue.json(snapshot.get("freeze") or {}),
        },
    )
