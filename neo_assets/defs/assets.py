"""The sweep's assets: repo_envelope -> chunk_generation -> kb_embeddings -> fence_census,
one dynamic partition per tenant repo, and the unpartitioned operator snapshot kb_status.

Each asset only wires I/O to a step in ``neo_assets.sweep.steps`` and describes the
result as metadata the UI can show and plot.
"""

import time
from typing import Any

import dagster as dg
import pandas as pd

from neo_assets.core.partition_keys import parse_partition_key
from neo_assets.defs.metadata import counts_metadata, preview_table
from neo_assets.defs.partitions import tenant_repos
from neo_assets.defs.resources import (
    LedgerResource,
    ProviderResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.status import build_status
from neo_assets.sweep.steps import (
    EmbedContext,
    EnvelopeResult,
    RepoContext,
    census_step,
    chunk_step,
    embed_step,
    envelope_step,
)

OWNERS = ["team:knowledge-platform"]


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
    result = envelope_step(ctx, settings.load(), ledger.get(), time.time())
    frame = result.frame
    frame.attrs.update(
        {
            "config_version": result.config_version,
            "declaration_digest": result.declaration_digest,
            "repo_declaration_digest": result.repo_declaration_digest,
        }
    )
    yielded = int(frame["yielded"].sum()) if len(frame) else 0
    skipped = frame[~frame["yielded"]] if len(frame) else frame
    return dg.Output(
        frame,
        metadata={
            "revision": result.revision,
            "envelope_kind": result.kind,
            "paths": len(frame),
            "yielded_paths": yielded,
            "skipped_paths": len(frame) - yielded,
            "tenant_config_version": result.config_version,
            "skip_reasons": dg.MetadataValue.json(
                skipped["skip_reason"].value_counts().to_dict() if len(skipped) else {}
            ),
            "dagster/row_count": len(frame),
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
    envelope = _envelope_result(repo_envelope)
    chunks = chunk_step(ctx, settings.load(), ledger.get(), envelope, time.time())
    chunks.attrs.update(repo_envelope.attrs)
    kinds = chunks["kind"].value_counts().to_dict() if len(chunks) else {}
    return dg.Output(
        chunks,
        metadata={
            "revision": envelope.revision,
            "parser_id": ctx.repo.parser.id,
            "parser_version": ctx.repo.parser.version,
            "chunks": len(chunks),
            "paths_with_chunks": int(chunks["source_path"].nunique()) if len(chunks) else 0,
            "kinds": dg.MetadataValue.json(kinds),
            "dagster/row_count": len(chunks),
            "preview": preview_table(chunks, ["source_path", "kind", "name", "start_line"]),
        },
    )


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"chroma"},
    owners=OWNERS,
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
    envelope = _envelope_result(chunk_generation)
    started = time.monotonic()
    last_log = [started]

    def progress(done: int, total: int, embedded: int) -> None:
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

    summary = embed_step(
        ctx,
        settings.load(),
        store.get(),
        ledger.get(),
        envelope,
        chunk_generation,
        EmbedContext(provider=provider.build(), progress=progress),
    )
    seconds = time.monotonic() - started
    summary["seconds"] = seconds
    counts = summary.get("counts", {})
    context.log.info(
        f"embedded {ctx.key}: {counts.get('embedded', 0)} new, "
        f"{counts.get('already_present', 0)} already present, "
        f"{len(summary.get('errors', []))} error rows in {seconds:.1f}s"
    )
    summary["envelope"] = dict(chunk_generation.attrs)
    return dg.Output(
        summary,
        metadata={
            **counts_metadata(counts),
            "embedding_generation": summary.get("generation", ""),
            "errors": len(summary.get("errors", [])),
            "strikes": dg.MetadataValue.json(summary.get("strikes", [])),
            "embed_seconds": float(seconds),
            "chunks_per_second": float(counts.get("embedded", 0)) / max(seconds, 1e-9),
            "dagster/row_count": int(counts.get("embedded", 0)),
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
    envelope = EnvelopeResult(
        frame=pd.DataFrame(),
        revision=attrs["revision"],
        kind=attrs["kind"],
        config_version=int(attrs["config_version"]),
        declaration_digest=attrs["declaration_digest"],
        repo_declaration_digest=attrs["repo_declaration_digest"],
    )
    result = census_step(ctx, settings.load(), ledger.get(), envelope, kb_embeddings, time.time())
    poison = result["contentPoisonChunks"]
    undeliverable = result["undeliverableChunks"]
    context.log.info(f"{ctx.key}: {result['outcome']} (cause {result['deferredCauseCode']})")
    return dg.Output(
        result,
        metadata={
            "outcome": result["outcome"],
            "deferred_cause_code": result["deferredCauseCode"] or "",
            "consecutive_failures": result["consecutiveFailures"],
            "next_due_at": dg.MetadataValue.timestamp(result["nextDueAt"])
            if result["nextDueAt"]
            else "",
            "content_poison_chunks": poison["count"],
            "undeliverable_chunks": undeliverable["count"],
            "strikes": len(result["strikes"]),
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
            "preview": preview_table(
                frame, ["tenantId", "repoSlug", "outcome", "deferredCauseCode", "rows"]
            ),
        },
    )
