"""The sweep capability in Dagster: the sweep multi-asset (one step per tenant repo, one
dynamic partition each), its job, the sensor that requests due sweeps and the daily
forced-sweep schedule. The asset only wires resources to ``run_sweep``'s stages
(neo_assets/sweep/run.py). Design: docs/design/sweep.md#assets"""

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from neo_assets.config.settings import SettingsError, SweepSettings, load_settings
from neo_assets.core import codes
from neo_assets.core.ids.partition_keys import parse_partition_key
from neo_assets.declaration.in_force import misdeclared_for, warning_lines
from neo_assets.defs.metadata import (
    census_summary,
    chunks_summary,
    counts_metadata,
    embeddings_summary,
    envelope_summary,
    preview_records,
    run_seconds,
    strikes_table,
    sweep_numbers,
)
from neo_assets.defs.partition_sync import partition_requests, sync_partitions
from neo_assets.defs.partitions import tenant_repos
from neo_assets.defs.resources import (
    LedgerResource,
    ProviderResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.quality.defs import ASSET as QUALITY_ASSET
from neo_assets.quality.defs import OUT as QUALITY_OUT
from neo_assets.quality.defs import quality_after_sweep
from neo_assets.reconcile.retirement import apply_retirement, retired_tenant_ids
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.due import DUE_FORCED, declared_repos, evaluate
from neo_assets.sweep.envelope import EnvelopeResult
from neo_assets.sweep.lease import lease_metadata
from neo_assets.sweep.progress import report as report_progress
from neo_assets.sweep.rules.chunk_tally import PREVIEW_COLUMNS, ChunkTally
from neo_assets.sweep.rules.summary import LaneSummary
from neo_assets.sweep.run import (
    StageEnded,
    StageSkipped,
    SweepInputs,
    SweepResult,
    sweep_stages,
)

OWNERS = ["team:knowledge-platform"]
# The Dagster concurrency pool of everything that calls the embedding provider.
EMBEDDING_POOL = "neo-embedding-provider"
# The one op that materializes a repo's sweep assets (its step key in every sweep run).
SWEEP_STEP = "sweep_repo"


def repo_context(
    partition_key: str, tenants: TenantsResource, ledger: LedgerResource | None = None
) -> RepoContext:
    tenant_id, repo_slug = parse_partition_key(partition_key)
    # With the run's ledger: the declaration in force reads (and records) through it.
    tenants_file = tenants.load(ledger.get() if ledger is not None else None)
    declared = declared_repos(tenants_file, tenant_id, repo_slug)
    if declared:
        return declared[0]
    misdeclared = misdeclared_for(tenants_file, tenant_id, repo_slug)
    if misdeclared is not None and misdeclared.problems:
        raise dg.Failure(
            description=(
                f"partition {partition_key!r} is misdeclared in {tenants_file.path} and has "
                f"no last good declaration, so it is not swept: {misdeclared.problems[0]}"
            )
        )
    raise dg.Failure(
        description=(
            f"partition {partition_key!r} is no longer declared in {tenants_file.path}: "
            "declare the repo again, or delete the partition in the UI"
        )
    )


# ---------------------------------------------------------------------------- metadata
def envelope_metadata(ctx: RepoContext, result: EnvelopeResult) -> dict[str, Any]:
    # From the entries: a frame of every path only to count them is dear in a forced sweep.
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
        # Parsed files the parser windowed instead of reading their structure, by reason.
        "windowed_files": tally.windowed_files,
        "fallback_files": dg.MetadataValue.json(tally.fallback_files),
        "dagster/row_count": tally.chunks,
        "summary": chunks_summary(
            ctx.key,
            f"{ctx.repo.parser.id} {ctx.repo.parser.version}",
            tally.chunks,
            tally.paths_with_chunks,
            kinds,
            tally.windowed_line(),
        ),
        "preview": preview_records(tally.preview, PREVIEW_COLUMNS),
    }


def embeddings_metadata(ctx: RepoContext, summary: LaneSummary) -> dict[str, Any]:
    counts = summary.counts.to_doc()
    strikes = summary.strikes
    seconds = summary.seconds or 0.0
    numbers = sweep_numbers(counts, len(strikes), seconds)
    return {
        **counts_metadata(counts),
        **numbers,
        "embedding_generation": summary.generation or "",
        "errors": len(summary.errors),
        "strike_rows": strikes_table(strikes),
        "embed_seconds": seconds,
        "dagster/row_count": summary.counts.embedded,
        "summary": embeddings_summary(ctx.key, numbers, strikes, summary.notices),
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
        "secret_chunks": (result.get("secretChunks") or {}).get("count"),
        "censuses": dg.MetadataValue.json(
            {
                "contentPoisonChunks": poison,
                "undeliverableChunks": undeliverable,
                "secretChunks": result.get("secretChunks"),
            }
        ),
    }


def stage_metadata(ctx: RepoContext, event: StageEnded) -> dict[str, Any]:
    if event.stage == "repo_envelope":
        return envelope_metadata(ctx, event.envelope)
    if event.stage == "chunk_generation":
        assert event.tally is not None
        return chunks_metadata(ctx, event.envelope.revision, event.tally)
    return embeddings_metadata(ctx, event.summary or LaneSummary())


def sweep_line(ctx: RepoContext, result: SweepResult) -> str:
    counts = result.counts
    return (
        f"{ctx.key}: {result.outcome} (cause {result.report.deferred_cause_code}); "
        f"embedded {counts.embedded} new, "
        f"{counts.already_present or 0} already present, "
        f"{result.errors} error rows in {result.embed_seconds or 0.0:.1f}s"
    )


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
    QUALITY_ASSET: QUALITY_OUT,
}


@dg.multi_asset(
    name=SWEEP_STEP,
    outs=SWEEP_OUTS,
    # Each asset after the one before it: the stages in order, then the quality check.
    internal_asset_deps={
        name: {dg.AssetKey(before)} if before else set()
        for before, name in zip((None, *SWEEP_OUTS), SWEEP_OUTS, strict=False)
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
    ctx = repo_context(context.partition_key, tenants, ledger)
    inputs = SweepInputs(
        ctx=ctx,
        settings=settings.load(),
        ledger=ledger.get(),
        open_store=store.get,
        provider=provider.get(),
        run_id=context.run_id,
        progress=_progress_logger(context, ctx, time.monotonic()),
    )
    # Closed with the asset: a run stopped at a yield still releases the lease and provider.
    with contextlib.closing(sweep_stages(inputs)) as stages:
        while True:
            try:
                event = next(stages)
            except StopIteration as done:
                result: SweepResult = done.value
                break
            metadata = (
                lease_metadata(event.lease)
                if isinstance(event, StageSkipped)
                else stage_metadata(ctx, event)
            )
            yield dg.MaterializeResult(asset_key=event.stage, metadata=metadata)
    doc = result.to_doc()
    if result.outcome == codes.OUTCOME_SKIPPED:
        context.log.warning(f"{ctx.key}: skipped, sweep lease {doc.get('lease')}")
        metadata = {"outcome": result.outcome, **lease_metadata(doc.get("lease") or {})}
    else:
        # One line for the run's log (each log line is an event the instance stores).
        context.log.info(sweep_line(ctx, result))
        sweep_s = run_seconds(context.instance, context.run_id, time.time())
        metadata = census_metadata(ctx, doc, result.embed_seconds or 0.0, sweep_s)
    yield dg.Output(doc, output_name="fence_census", metadata=metadata)
    if result.outcome != codes.OUTCOME_SKIPPED:
        # In this step, with its provider: the model is not loaded again for it.
        quality = quality_after_sweep(
            context.log,
            ctx.tenant_id,
            ctx.repo_slug,
            inputs.settings,
            store.get(),
            inputs.ledger,
            inputs.provider,
        )
        if quality is not None:
            yield quality


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


# ---------------------------------------------------------------------------- the job
sweep_job = dg.define_asset_job(
    "sweep",
    # The four sweep assets are one step (``sweep_repo``); links have their own job.
    selection=dg.AssetSelection.assets(*SWEEP_OUTS),
    partitions_def=tenant_repos,
    description="Sweep one tenant repo: envelope, chunks, embeddings, census.",
    tags={"neo/kind": "sweep"},
)


# ---------------------------------------------------------------------------- automation
def sensor_interval_s() -> int:
    """NEO_SWEEP_SENSOR_INTERVAL_S when the definitions load (a bad value: the default;
    every command names the bad setting itself)."""
    try:
        return load_settings().sweep.sensor_interval_s
    except SettingsError:
        return SweepSettings.model_fields["sensor_interval_s"].default


@dg.sensor(
    job=sweep_job,
    minimum_interval_seconds=sensor_interval_s(),
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Keeps one partition per declared tenant repo and per declared tenant (adding new "
        "ones, removing retired ones; their runs stay in the history) and requests a sweep "
        "for each repo that is due: its revision or declaration moved, its embedding "
        "generation changed, or its deferral backoff elapsed. Requests nothing when nothing "
        "is due."
    ),
)
def sweep_sensor(
    context: dg.SensorEvaluationContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    ledger: LedgerResource,
) -> dg.SensorResult:
    cfg = settings.load()
    the_ledger = ledger.get()
    tenants_file = tenants.load(the_ledger)
    apply_retirement(the_ledger, tenants_file, time.time())
    # What the tenants file gets wrong, on every tick: the misdeclared entry keeps its
    # last good declaration (or is withheld), and every other repo is evaluated as usual.
    for line in warning_lines(tenants_file):
        context.log.warning(line)
    ctxs = declared_repos(tenants_file)
    cursor = json.loads(context.cursor) if context.cursor else {}
    requests = []
    for due in evaluate(ctxs, cfg, the_ledger, time.time()):
        if due.reason is None or cursor.get(due.key) == due.run_key:
            continue
        cursor[due.key] = due.run_key
        requests.append(
            dg.RunRequest(
                run_key=due.run_key,
                partition_key=due.key,
                tags={"neo/due-reason": due.reason, "neo/tenant": due.ctx.tenant_id},
            )
        )
    return dg.SensorResult(
        run_requests=requests,
        # Declared repos and tenants added, retired ones removed (their runs are kept).
        dynamic_partitions_requests=partition_requests(
            context.instance, tenants_file, retired_tenant_ids(the_ledger, tenants_file)
        ),
        cursor=json.dumps(cursor, sort_keys=True),
    )


FORCED_SWEEP_CRON = "0 2 * * *"


@dg.schedule(
    job=sweep_job,
    cron_schedule=FORCED_SWEEP_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description=(
        "Daily forced full sweep (02:00 UTC, off by default): one sweep run per declared "
        "tenant repo, due or not, tagged neo/due-reason=forced. Each run still embeds only "
        "what the collection lacks, so a quiet repo costs a listing and a parse. Turn it on "
        "when the sensor alone is not trusted to notice every change (e.g. repos moved by "
        "force-push or edited outside git)."
    ),
)
def forced_sweep_schedule(
    context: dg.ScheduleEvaluationContext, tenants: TenantsResource, ledger: LedgerResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tenants_file = tenants.load()
    ctxs = declared_repos(tenants_file)
    if not ctxs:
        return dg.SkipReason("no repo is declared in the tenants file")
    # A schedule cannot return partition requests (a sensor can): they are synced here, as
    # the CLI does, so every run request names a known partition.
    sync_partitions(context.instance, tenants_file, retired_tenant_ids(ledger.get(), tenants_file))
    when = context.scheduled_execution_time
    stamp = when.strftime("%Y-%m-%dT%H:%MZ") if when else "unscheduled"
    return [
        dg.RunRequest(
            run_key=f"{DUE_FORCED}:{c.key}:{stamp}",
            partition_key=c.key,
            tags={
                "neo/due-reason": DUE_FORCED,
                "neo/tenant": c.tenant_id,
                "neo/launched-by": "forced_sweep_schedule",
            },
        )
        for c in ctxs
    ]


defs = dg.Definitions(
    assets=[sweep_repo],
    jobs=[sweep_job],
    sensors=[sweep_sensor],
    schedules=[forced_sweep_schedule],
)
