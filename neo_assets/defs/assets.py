"""The sweep's assets: repo_envelope -> chunk_generation -> kb_embeddings -> fence_census,
one dynamic partition per tenant repo, and the unpartitioned operator snapshot kb_status.

Each asset only wires I/O to a step in ``neo_assets.sweep.steps`` and describes the
result as metadata the UI can show and plot.
"""

import time
from typing import Any

import dagster as dg
import pandas as pd

from neo_assets.core import codes
from neo_assets.core.partition_keys import parse_partition_key
from neo_assets.defs.metadata import (
    census_summary,
    chunks_summary,
    counts_metadata,
    embeddings_summary,
    envelope_summary,
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
from neo_assets.status import build_status
from neo_assets.sweep.progress import report as report_progress
from neo_assets.sweep.steps import (
    EmbedContext,
    EnvelopeResult,
    RepoContext,
    SweepAborted,
    census_step,
    chunk_step,
    embed_step,
    envelope_step,
    failure_recorded,
)
from neo_assets.sweep.sweep_lease import (
    LEASE_ATTR,
    StepLease,
    lease_metadata,
    skipped_chunks_frame,
    skipped_envelope_frame,
    skipped_result,
    skipped_summary,
)

OWNERS = ["team:knowledge-platform"]
# The Dagster concurrency pool of everything that calls the embedding provider.
EMBEDDING_POOL = "neo-embedding-provider"


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


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"git", "python"},
    owners=OWNERS,
    description=(
        "The repository at its revision: every path of the tree (git commit or content "
        "digest), marked yielded or skipped-with-reason. The authority on path membership."
    ),
)
def repo_envelope(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    ledger: LedgerResource,
) -> dg.Output[pd.DataFrame]:
    ctx = repo_context(context.partition_key, tenants)
    with StepLease(ledger.get(), ctx, context.run_id, settings.load()) as lease:
        if not lease.held:  # another sweep of this repo holds it: write nothing
            context.log.warning(f"{ctx.key}: skipped, sweep lease {lease.info}")
            info = lease.info
            return dg.Output(skipped_envelope_frame(info), metadata=lease_metadata(info))
        with failure_recorded(ctx, settings.load(), ledger.get(), codes.SOURCE_UNREADABLE):
            result = envelope_step(ctx, settings.load(), ledger.get(), time.time())
    frame = result.frame
    frame.attrs.update(
        {
            "config_version": result.config_version,
            "declaration_digest": result.declaration_digest,
            "repo_declaration_digest": result.repo_declaration_digest,
            LEASE_ATTR: lease.info,
        }
    )
    yielded = int(frame["yielded"].sum()) if len(frame) else 0
    skipped = frame[~frame["yielded"]] if len(frame) else frame
    skip_reasons = skipped["skip_reason"].value_counts().to_dict() if len(skipped) else {}
    return dg.Output(
        frame,
        metadata={
            "revision": result.revision,
            "envelope_kind": result.kind,
            "paths": len(frame),
            "yielded_paths": yielded,
            "skipped_paths": len(frame) - yielded,
            "tenant_config_version": result.config_version,
            "skip_reasons": dg.MetadataValue.json(skip_reasons),
            "dagster/row_count": len(frame),
            "summary": envelope_summary(
                ctx.key, result.revision, result.kind, len(frame), yielded, skip_reasons
            ),
            "preview": preview_table(frame, ["path", "size", "yielded", "skip_reason"]),
        },
    )


def _envelope_result(frame: pd.DataFrame) -> EnvelopeResult:
    return EnvelopeResult(
        frame=frame,
        revision=frame.attrs["revision"],
        kind=frame.attrs["kind"],
        config_version=int(frame.attrs["config_version"]),
        declaration_digest=frame.attrs["declaration_digest"],
        repo_declaration_digest=frame.attrs["repo_declaration_digest"],
    )


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"python"},
    owners=OWNERS,
    description=(
        "The declared generation: every yielded path parsed by the declared parser into "
        "chunks whose ids hash (tenant, repo, kind, name, content, path, parser id, version)."
    ),
)
def chunk_generation(
    context: dg.AssetExecutionContext,
    repo_envelope: pd.DataFrame,
    settings: SettingsResource,
    tenants: TenantsResource,
    ledger: LedgerResource,
) -> dg.Output[pd.DataFrame]:
    ctx = repo_context(context.partition_key, tenants)
    with StepLease(
        ledger.get(), ctx, context.run_id, settings.load(), upstream=repo_envelope.attrs
    ) as lease:
        if not lease.held:
            return dg.Output(skipped_chunks_frame(lease.info), metadata=lease_metadata(lease.info))
        envelope = _envelope_result(repo_envelope)
        with failure_recorded(ctx, settings.load(), ledger.get(), codes.PARSE_FAILED):
            chunks = chunk_step(ctx, settings.load(), ledger.get(), envelope, time.time())
    chunks.attrs.update(repo_envelope.attrs)
    kinds = chunks["kind"].value_counts().to_dict() if len(chunks) else {}
    paths_with_chunks = int(chunks["source_path"].nunique()) if len(chunks) else 0
    return dg.Output(
        chunks,
        metadata={
            "revision": envelope.revision,
            "parser_id": ctx.repo.parser.id,
            "parser_version": ctx.repo.parser.version,
            "chunks": len(chunks),
            "paths_with_chunks": paths_with_chunks,
            "kinds": dg.MetadataValue.json(kinds),
            "dagster/row_count": len(chunks),
            "summary": chunks_summary(
                ctx.key,
                f"{ctx.repo.parser.id} {ctx.repo.parser.version}",
                len(chunks),
                paths_with_chunks,
                kinds,
            ),
            "preview": preview_table(chunks, ["source_path", "kind", "name", "start_line"]),
        },
    )


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"chroma"},
    owners=OWNERS,
    # N sweeps share the provider's slots: limit the pool on the instance (deploy/README.md).
    pool=EMBEDDING_POOL,
    description=(
        "Rows in the shared collection: what it lacked at the current embedding generation, "
        "minus what is fenced, embedded through the lane and added batch by batch."
    ),
)
def kb_embeddings(
    context: dg.AssetExecutionContext,
    chunk_generation: pd.DataFrame,
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
    provider: ProviderResource,
) -> dg.Output[dict[str, Any]]:
    ctx = repo_context(context.partition_key, tenants)
    started = time.monotonic()
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

    with StepLease(
        ledger.get(), ctx, context.run_id, settings.load(), upstream=chunk_generation.attrs
    ) as lease:
        if not lease.held:
            return dg.Output(skipped_summary(lease.info), metadata=lease_metadata(lease.info))
        envelope = _envelope_result(chunk_generation)
        with failure_recorded(
            ctx, settings.load(), ledger.get(), codes.KB_VECTOR_EMBED_UNCLASSIFIED
        ):
            try:
                summary = embed_step(
                    ctx,
                    settings.load(),
                    store.get(),
                    ledger.get(),
                    envelope,
                    chunk_generation,
                    EmbedContext(provider=provider.build(), progress=progress, guard=lease.check),
                )
            except SweepAborted as aborted:
                # An upstream abort (Ctrl-C, a run terminated from the UI): record the
                # sweep as the lane left it (deferred, cause aborted), then end the run.
                census_step(
                    ctx, settings.load(), ledger.get(), envelope, aborted.summary, time.time()
                )
                raise aborted.interrupt from None
        if not lease.held:  # lost mid-way: the writes stopped; the new holder finishes
            info = lease.info
            return dg.Output(skipped_summary(info, summary), metadata=lease_metadata(info))
    seconds = time.monotonic() - started
    summary["seconds"] = seconds
    counts = summary.get("counts", {})
    context.log.info(
        f"embedded {ctx.key}: {counts.get('embedded', 0)} new, "
        f"{counts.get('already_present', 0)} already present, "
        f"{len(summary.get('errors', []))} error rows in {seconds:.1f}s"
    )
    summary["envelope"] = dict(chunk_generation.attrs)
    strikes = summary.get("strikes", [])
    numbers = sweep_numbers(counts, len(strikes), seconds)
    return dg.Output(
        summary,
        metadata={
            **counts_metadata(counts),
            **numbers,
            "embedding_generation": summary.get("generation", ""),
            "errors": len(summary.get("errors", [])),
            "strike_rows": strikes_table(strikes),
            "embed_seconds": float(seconds),
            "dagster/row_count": int(counts.get("embedded", 0)),
            "summary": embeddings_summary(ctx.key, numbers, strikes),
        },
    )


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"sqlite"},
    owners=OWNERS,
    description=(
        "The sweep's verdict: complete / deferred / failed from codes and the fence gate; "
        "moves the checkpoint and persists both fence censuses with it."
    ),
)
def fence_census(
    context: dg.AssetExecutionContext,
    kb_embeddings: dict[str, Any],
    settings: SettingsResource,
    tenants: TenantsResource,
    ledger: LedgerResource,
) -> dg.Output[dict[str, Any]]:
    ctx = repo_context(context.partition_key, tenants)
    attrs = kb_embeddings["envelope"]
    with StepLease(
        ledger.get(), ctx, context.run_id, settings.load(), upstream=attrs, last=True
    ) as lease:
        if not lease.held:
            result = skipped_result(ctx, lease.info)
            context.log.warning(f"{ctx.key}: skipped ({result['deferredCauseCode']})")
            return dg.Output(
                result, metadata={"outcome": result["outcome"], **lease_metadata(lease.info)}
            )
        envelope = EnvelopeResult(
            frame=pd.DataFrame(),
            revision=attrs["revision"],
            kind=attrs["kind"],
            config_version=int(attrs["config_version"]),
            declaration_digest=attrs["declaration_digest"],
            repo_declaration_digest=attrs["repo_declaration_digest"],
        )
        with failure_recorded(ctx, settings.load(), ledger.get(), codes.STORE_FAILED):
            result = census_step(
                ctx, settings.load(), ledger.get(), envelope, kb_embeddings, time.time()
            )
        result["lease"] = lease.info
    poison = result["contentPoisonChunks"]
    undeliverable = result["undeliverableChunks"]
    context.log.info(f"{ctx.key}: {result['outcome']} (cause {result['deferredCauseCode']})")
    numbers = sweep_numbers(
        result.get("counts", {}), len(result["strikes"]), float(kb_embeddings.get("seconds", 0))
    )
    sweep_s = run_seconds(context.instance, context.run_id, time.time())
    if sweep_s is not None:
        numbers["sweep_seconds"] = sweep_s
    return dg.Output(
        result,
        metadata={
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
        },
    )


@dg.asset(
    group_name="status",
    kinds={"pandas"},
    owners=OWNERS,
    deps=[fence_census],
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
