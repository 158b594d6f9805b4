"""The links capability: ``chunk_links``, one repo's related-chunk links, after its sweep.

It runs as the last step of the ``sweep`` job (see ``defs/jobs.py``), so every sweep that
reaches its census also refreshes the repo's links; ``query --expand`` reads them.
"""

import time
from typing import Any

import dagster as dg

from neo_assets.core.link_records import LINK_KINDS
from neo_assets.defs.assets import OWNERS, repo_context
from neo_assets.defs.metadata import markdown_table
from neo_assets.defs.partitions import tenant_repos
from neo_assets.defs.resources import (
    LedgerResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.links_service import LinkParams, LinkReport, link_repo
from neo_assets.sweep.sweep_lease import StepLease


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
    }
    table = []
    for kind in LINK_KINDS:
        stats = report.per_kind.get(kind)
        links = stats.links if stats else 0
        linked = stats.linked_chunks if stats else 0
        most = stats.max_links_per_chunk if stats else 0
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
        "threshold, within one embedding generation). Replaced as a whole each sweep."
    ),
)
def chunk_links(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.MaterializeResult:
    ctx = repo_context(context.partition_key, tenants)
    # Links are written under the repo's sweep lease too, so two sweeps of one repo never
    # interleave their link writes; the lease is released when this last step ends.
    # No waiting: if another sweep of this repo holds the lease, it refreshes the links.
    no_wait = settings.load().model_copy(update={"sweep_lease_wait_s": 0.0})
    with StepLease(ledger.get(), ctx, context.run_id, no_wait, last=True) as lease:
        if not lease.held:
            context.log.warning(f"{ctx.key}: links not refreshed, sweep lease {lease.info}")
            return dg.MaterializeResult(metadata={"stored": False})
        report = link_repo(
            ledger.get(),
            store.get(),
            ctx.tenant_id,
            ctx.repo_slug,
            LinkParams.from_settings(settings.load()),
            now=time.time(),
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


defs = dg.Definitions(assets=[chunk_links])
