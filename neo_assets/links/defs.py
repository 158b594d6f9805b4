"""The links capability: ``chunk_links``, one repo's related-chunk links, after its sweep.
Links are derived data, off the sweep's critical path: the ``links`` job runs them when
``links_sensor`` finds them due (``links.rules.due``); the CLI's sweep runs it right after."""

import time
from typing import Any

import dagster as dg

from neo_assets.declaration.in_force import warning_lines
from neo_assets.defs.metadata import markdown_table
from neo_assets.defs.partitions import TENANT_REPOS, tenant_repos
from neo_assets.defs.resources import (
    LedgerResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.links.due import evaluate_links
from neo_assets.links.link_repo import LinkReport, link_repo
from neo_assets.links.params import LinkParams
from neo_assets.links.rules.passes import LinkStats
from neo_assets.links.rules.records import LINK_KINDS
from neo_assets.sweep.defs import OWNERS, repo_context
from neo_assets.sweep.due import declared_repos
from neo_assets.sweep.lease import SweepLease
from neo_assets.sweep.progress import report as report_progress


def links_metadata(report: LinkReport) -> dict[str, Any]:
    """Numbers the UI plots per materialization, and a markdown summary."""
    meta: dict[str, Any] = {
        "stored": report.stored,
        "revision": report.revision or "",
        "declared_chunks": report.declared_chunks,
        "rows": report.rows,
        "undated_rows": report.undated_rows,
        "embedding_generations": report.generations,
        "linked_chunks": report.linked_chunks,
        "max_links_per_chunk": report.max_links_per_chunk,
        "links_seconds": float(report.seconds),
        # How much of the run followed the change: incremental, or full and why.
        "mode": report.mode or "",
        "full_reason": report.full_reason or "",
        "vectors_read": report.vectors_read,
        "recomputed_chunks": report.recomputed_chunks,
        "rows_written": report.rows_written,
    }
    table = []
    for kind in LINK_KINDS:
        stats = report.per_kind.get(kind) or LinkStats(0, 0, 0, 0)
        links, linked, most = stats.links, stats.linked_chunks, stats.max_links_per_chunk
        meta[f"{kind}_links"] = links
        meta[f"{kind}_linked_chunks"] = linked
        meta[f"{kind}_max_per_chunk"] = most
        table.append({"kind": kind, "links": links, "linked chunks": linked, "max/chunk": most})
    meta["dagster/row_count"] = sum(row["links"] for row in table)
    key = f"{report.tenant_id}/{report.repo_slug}"
    if report.stored:
        text = (
            f"**{key}** at `{(report.revision or '')[:12]}`: **{meta['dagster/row_count']}** "
            f"links over {report.rows} rows ({report.linked_chunks} linked, at most "
            f"{report.max_links_per_chunk} per chunk) in {report.seconds:.2f}s."
        )
    else:
        text = f"**{key}**: links not stored ({report.reason})."
    meta["summary"] = dg.MetadataValue.md(
        text + "\n\n" + markdown_table(table, ["kind", "links", "linked chunks", "max/chunk"])
    )
    return meta


@dg.asset(
    partitions_def=tenant_repos,
    group_name="sweep",
    kinds={"sqlite"},
    owners=OWNERS,
    deps=[dg.AssetKey("fence_census")],
    description=(
        "Related-chunk links of the repo's declared generation, kept in the ledger: temporal "
        "(files changed within the window, same chunk kind) and semantic (cosine above the "
        "threshold, within one embedding generation). Refreshed by the links job after a "
        "sweep moved the generation or added rows."
    ),
)
def chunk_links(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.MaterializeResult:
    ctx = repo_context(context.partition_key, tenants, ledger)
    # Links are written under the repo's sweep lease, so a sweep never moves the declared
    # generation under a links run (the write would be refused, but the work lost): wait
    # for a running sweep of the repo to end, as a sweep would.
    with SweepLease(ledger.get(), ctx, context.run_id, settings.load()) as lease:
        if not lease.held:
            context.log.warning(f"{ctx.key}: links not refreshed, sweep lease {lease.info}")
            return dg.MaterializeResult(metadata={"stored": False})
        cfg = settings.load()
        report = link_repo(
            ledger.get(),
            # The configured generation's rows: where the sweep wrote the repo's chunks.
            generation_store(cfg, ledger.get(), store.get(), configured_generation(cfg)),
            ctx.tenant_id,
            ctx.repo_slug,
            LinkParams.from_settings(settings.load()),
            now=time.time(),
            # Per-machine derived data (rebuilt when missing), whichever ledger is used.
            cache_dir=settings.load().store.home_dir / "links-cache",
            progress=_links_progress(context, ctx.key),
        )
    if report.stored:
        context.log.info(
            f"{ctx.key}: "
            + ", ".join(f"{k} {report.per_kind[k].links}" for k in LINK_KINDS)
            + f" links over {report.rows} rows in {report.seconds:.2f}s"
        )
    else:
        context.log.warning(f"{ctx.key}: links not stored ({report.reason})")
    return dg.MaterializeResult(metadata=links_metadata(report))


# A links run's log gets a progress line at most this often (and at each new stage).
PROGRESS_LOG_EVERY_S = 5.0


def _links_progress(context: dg.AssetExecutionContext, key: str) -> Any:
    """The run log every few seconds and at each stage; the CLI's bar, when one listens."""
    started = time.monotonic()
    last: dict[str, Any] = {"at": started, "stage": None}

    def progress(stage: str, done: int, total: int) -> None:
        report_progress(f"{key} links: {stage}", done, total, done)
        now = time.monotonic()
        if stage == last["stage"] and now - last["at"] < PROGRESS_LOG_EVERY_S:
            return
        last["at"], last["stage"] = now, stage
        context.log.info(f"links {key}: {stage} {done}/{total} rows, {now - started:.1f}s")

    return progress


links_job = dg.define_asset_job(
    "links",
    selection=dg.AssetSelection.assets("chunk_links"),
    partitions_def=tenant_repos,
    description="Compute one tenant repo's related-chunk links from its declared generation.",
    tags={"neo/kind": "links"},
)


@dg.sensor(
    job=links_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Requests a links run for each declared repo whose links are behind: its declared "
        "generation moved, a sweep added rows since the last links run, or the link "
        "parameters changed. Requests nothing when every repo's links are current."
    ),
)
def links_sensor(
    context: dg.SensorEvaluationContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    ledger: LedgerResource,
) -> dg.SensorResult:
    tenants_file = tenants.load(ledger.get())
    for line in warning_lines(tenants_file):  # a misdeclaration is said on every tick
        context.log.warning(line)
    known = set(context.instance.get_dynamic_partitions(TENANT_REPOS))
    requests = [
        dg.RunRequest(
            run_key=due.run_key,
            partition_key=due.key,
            tags={"neo/links-reason": due.reason, "neo/tenant": due.ctx.tenant_id},
        )
        for due in evaluate_links(declared_repos(tenants_file), settings.load(), ledger.get())
        # A repo the sweep sensor has not registered yet has never been swept either.
        if due.reason is not None and due.key in known
    ]
    return dg.SensorResult(run_requests=requests)


defs = dg.Definitions(assets=[chunk_links], jobs=[links_job], sensors=[links_sensor])
