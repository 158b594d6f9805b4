"""The reconciliation capability: ``kb_reconciliation`` per tenant, its three asset checks,
the ``reconcile`` job, the after-sweeps sensor and the nightly schedule. Run config can
turn deletion off (``classify_only``), never on."""

import time
import warnings
from typing import Any

import dagster as dg
from pydantic import Field

from neo_assets.defs.metadata import markdown_table
from neo_assets.defs.partition_sync import partition_requests, sync_partitions
from neo_assets.defs.partitions import tenants_partitions
from neo_assets.defs.resources import (
    LedgerResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.reconcile import checks
from neo_assets.reconcile.retirement import retired_tenant_ids
from neo_assets.reconcile.rules.plan import ACTIONABLE_KINDS, ORPHAN_KINDS
from neo_assets.reconcile.rules.trigger import (
    after_sweep_run_key,
    nightly_run_key,
    tenant_of_sweep,
)
from neo_assets.reconcile.tenant import reconcile_tenant
from neo_assets.sweep.defs import sweep_job

OWNERS = ["team:knowledge-platform"]
RECONCILE_JOB = "reconcile"
NIGHTLY_CRON = "0 3 * * *"  # after the forced full sweep at 02:00 UTC
# Sweep runs still to finish, for the after-sweeps sensor.
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
# How far back the sensor looks for the tenant's latest finished sweep.
RECENT_SWEEPS = 200
EXAMPLES_IN_SUMMARY = 3


class ReconcileConfig(dg.Config):
    classify_only: bool = Field(
        default=False,
        description=(
            "Classify and report only: no re-stamp, no delete. This can only turn writes "
            "off; whether orphans are deleted is NEO_RECONCILIATION_ENABLED's alone."
        ),
    )


def metric_name(kind: str) -> str:
    """The metadata key under which a kind's count is plotted (``orphans_<kind>``)."""
    return "orphans_" + kind.replace("-", "_")


def _summary(report: dict[str, Any]) -> str:
    rows = [
        {
            "kind": kind,
            "rows": entry["count"],
            "actionable": "yes" if kind in ACTIONABLE_KINDS else "no",
            "reclaimed": report["reclaimedByKind"].get(kind, 0),
            "examples": ", ".join(i[:12] for i in entry["ids"][:EXAMPLES_IN_SUMMARY]),
        }
        for kind, entry in report["orphans"].items()
    ]
    blocked = report["reclaimBlocked"]
    state = (
        f"reclaim **not run** (`{blocked}`)"
        if blocked
        else f"reclaimed **{report['reclaimed']}** rows in {report['deleteBatches']} batches"
    )
    return (
        f"**{report['tenantId']}** (config v{report['configVersion']}): {report['rows']} rows "
        f"read; {report['actionable']} actionable, {report['pending']} pending their "
        f"replacement, {report['restamp']} config-stale ({report['restamped']} re-stamped), "
        f"{report['skippedUnstamped']} skipped unstamped; {state}; residue share "
        f"{report['residueShare']:.2%}.\n\n"
        + markdown_table(rows, ["kind", "rows", "actionable", "reclaimed", "examples"])
    )


def report_metadata(report: dict[str, Any]) -> dict[str, Any]:
    """Numbers the UI plots (one per kind, and the totals), the examples, the summary."""
    numbers = {metric_name(kind): int(report["orphans"][kind]["count"]) for kind in ORPHAN_KINDS}
    return {
        **numbers,
        "rows": int(report["rows"]),
        "actionable": int(report["actionable"]),
        "pending": int(report["pending"]),
        "reclaimed": int(report["reclaimed"]),
        "restamped": int(report["restamped"]),
        "unconfirmed": int(report["unconfirmed"]),
        "skippedUnstamped": int(report["skippedUnstamped"]),
        "residue_share": float(report["residueShare"]),
        "enabled": bool(report["enabled"]),
        "reclaim_blocked": report["reclaimBlocked"] or "",
        "plan_rows_by_tenant": dg.MetadataValue.json(report["planRowsByTenant"]),
        "examples": dg.MetadataValue.json(
            {kind: entry["ids"][:5] for kind, entry in report["orphans"].items() if entry["ids"]}
        ),
        "repos": dg.MetadataValue.json(report["repos"]),
        "summary": dg.MetadataValue.md(_summary(report)),
    }


@dg.asset(
    partitions_def=tenants_partitions,
    group_name="reconciliation",
    kinds={"chroma"},
    owners=OWNERS,
    deps=[dg.AssetDep("fence_census", partition_mapping=dg.AllPartitionMapping())],
    description=(
        "Orphan rows of one tenant, classified per kind against its declaration and the "
        "latest complete envelope of each repo (manifest orphan, undeclared repo, unyielded "
        "path, superseded generation, stale content, their pending forms, config-stale). "
        "Always classifies; re-stamps config-stale declared rows; deletes actionable rows "
        "in re-verified id batches only when NEO_RECONCILIATION_ENABLED is true."
    ),
)
def kb_reconciliation(
    context: dg.AssetExecutionContext,
    config: ReconcileConfig,
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.Output[dict[str, Any]]:
    tenant_id = context.partition_key
    tenants_file = tenants.load()
    if not any(t.id == tenant_id for t in tenants_file.tenants):
        context.log.warning(
            f"tenant {tenant_id!r} is retired (no longer declared in {tenants_file.path}): "
            "every row of it is an undeclared-repo orphan, reclaimed when "
            "NEO_RECONCILIATION_ENABLED=true"
        )
    outcome = reconcile_tenant(
        settings.load(),
        tenants_file,
        tenant_id,
        store.get(),
        ledger.get(),
        write=not config.classify_only,
        log=context.log.info,
    )
    report = outcome.report
    context.log.info(
        f"{tenant_id}: {report['actionable']} actionable, {report['pending']} pending, "
        f"reclaimed {report['reclaimed']}, re-stamped {report['restamped']}"
        + (f" (reclaim not run: {report['reclaimBlocked']})" if report["reclaimBlocked"] else "")
    )
    value = {
        **report,
        "reclaimedPaths": {slug: sorted(paths) for slug, paths in outcome.reclaimed_paths.items()},
        "departedPaths": {slug: sorted(paths) for slug, paths in outcome.departed_paths.items()},
        "finishedAt": time.time(),
    }
    return dg.Output(value, metadata=report_metadata(report))


def _result(outcome: checks.CheckOutcome, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {
        key: dg.MetadataValue.json(value) if isinstance(value, dict | list) else value
        for key, value in outcome.metadata.items()
    }
    metadata["summary"] = dg.MetadataValue.md(outcome.summary)
    if outcome.warn:  # something to act on, not a breach (retired rows waiting)
        severity = dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(passed=outcome.passed, severity=severity, metadata=metadata)


# Partitioned checks are a preview feature in Dagster 1.13; they are what gives each tenant
# its own check results, so the warning is silenced here rather than the feature avoided.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)

    @dg.asset_check(
        asset=kb_reconciliation,
        partitions_def=tenants_partitions,
        blocking=True,
        description=(
            "No hole: every path the declared parser yields holds a complete set of rows: "
            "its declared generation complete (every id present or durably fenced at the "
            "current embedding generation), or an earlier generation's rows still there. A "
            "path this reconciliation removed rows from must be complete; in a repo whose "
            "sweep completed, every yielded path must be. Rows of a path that left the "
            "manifest (deleted, moved, renamed) go only once the repo's declared generation "
            "is complete, so moved content is never absent. The reclaim plan must not have "
            "named a path losing its last complete set. Names the offending paths."
        ),
    )
    def no_hole(
        context: dg.AssetCheckExecutionContext,
        kb_reconciliation: dict[str, Any],
        settings: SettingsResource,
        tenants: TenantsResource,
        store: StoreResource,
        ledger: LedgerResource,
    ) -> dg.AssetCheckResult:
        outcome = checks.no_hole(
            settings.load(),
            tenants.load(),
            context.partition_key,
            store.get(),
            ledger.get(),
            kb_reconciliation.get("reclaimedPaths", {}),
            kb_reconciliation.get("planHoles"),
            kb_reconciliation.get("departedPaths", {}),
        )
        return _result(outcome, dg.AssetCheckSeverity.ERROR)

    @dg.asset_check(
        asset=kb_reconciliation,
        partitions_def=tenants_partitions,
        blocking=True,
        description=(
            "Tenant containment: every row of the collection carries a valid tenantId of a "
            "declared tenant that declares its repoSlug (counted per tenantId), or is a "
            "retired tenant's or repo's (WARN on its own tenant only: retired-tenant, "
            "retired-repo, rows waiting for reclamation, never a breach); the reclaim "
            "plan's rows, re-read by id before deleting, are all this tenant's; a "
            "tenant-scoped query returns only this tenant's rows. Names the offending ids."
        ),
    )
    def tenant_containment(
        context: dg.AssetCheckExecutionContext,
        kb_reconciliation: dict[str, Any],
        tenants: TenantsResource,
        store: StoreResource,
        ledger: LedgerResource,
    ) -> dg.AssetCheckResult:
        outcome = checks.tenant_containment(
            tenants.load(),
            context.partition_key,
            store.get(),
            kb_reconciliation.get("planRowsByTenant"),
            ledger.get(),
        )
        return _result(outcome, dg.AssetCheckSeverity.ERROR)

    @dg.asset_check(
        asset=kb_reconciliation,
        partitions_def=tenants_partitions,
        description=(
            "Generation residue (WARN): the share of the tenant's rows whose parser identity "
            "is not their repo's declared one, so the backlog can be watched shrinking."
        ),
    )
    def generation_residue(
        context: dg.AssetCheckExecutionContext,
        settings: SettingsResource,
        tenants: TenantsResource,
        store: StoreResource,
        ledger: LedgerResource,
    ) -> dg.AssetCheckResult:
        outcome = checks.generation_residue(
            settings.load(), tenants.load(), context.partition_key, store.get(), ledger.get()
        )
        return _result(outcome, dg.AssetCheckSeverity.WARN)


reconcile_job = dg.define_asset_job(
    RECONCILE_JOB,
    selection=dg.AssetSelection.assets(kb_reconciliation),
    description="Reconcile one tenant: classify, re-stamp, reclaim when enabled; run the checks.",
    tags={"neo/kind": "reconcile"},
)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[sweep_job],
    request_job=reconcile_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "After a tenant's sweeps finish, requests one reconciliation of that tenant: a "
        "finished sweep asks only when no other sweep of the tenant is still queued or "
        "running, and the run key names the tenant's latest finished sweep, so one batch of "
        "sweeps costs one reconciliation. Passes no config: deletion follows "
        "NEO_RECONCILIATION_ENABLED alone."
    ),
)
def reconciliation_sensor(
    context: dg.RunStatusSensorContext, tenants: TenantsResource, ledger: LedgerResource
) -> dg.SensorResult | dg.SkipReason:
    run = context.dagster_run
    tenant_id = tenant_of_sweep(run.tags.get("dagster/partition"))
    if tenant_id is None:
        return dg.SkipReason(f"sweep run {run.run_id} has no tenant partition")
    instance = context.instance
    in_flight = instance.get_runs(
        filters=dg.RunsFilter(job_name=sweep_job.name, statuses=IN_FLIGHT)
    )
    finished = instance.get_runs(
        filters=dg.RunsFilter(job_name=sweep_job.name, statuses=[dg.DagsterRunStatus.SUCCESS]),
        limit=RECENT_SWEEPS,
    )
    latest = next(
        (
            r.run_id
            for r in finished
            if tenant_of_sweep(r.tags.get("dagster/partition")) == tenant_id
        ),
        run.run_id,
    )
    tenants_file = tenants.load()
    declared = [t.id for t in tenants_file.tenants]
    key = after_sweep_run_key(
        tenant_id, latest, [r.tags.get("dagster/partition") for r in in_flight], declared
    )
    if key is None:
        return dg.SkipReason(
            f"{tenant_id}: not declared, or another sweep of it is still in flight"
        )
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=key,
                partition_key=tenant_id,
                tags={"neo/tenant": tenant_id, "neo/launched-by": "reconciliation_sensor"},
            )
        ],
        # The tenant's partition, should the sweep sensor not have registered it yet.
        dynamic_partitions_requests=partition_requests(
            instance, tenants_file, retired_tenant_ids(ledger.get(), tenants_file)
        ),
    )


@dg.schedule(
    job=reconcile_job,
    cron_schedule=NIGHTLY_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description=(
        "Nightly reconciliation of every declared tenant and every retired one (03:00 UTC, "
        "off by default), after the forced full sweep. Passes no config: deletion follows "
        "NEO_RECONCILIATION_ENABLED."
    ),
)
def nightly_reconciliation_schedule(
    context: dg.ScheduleEvaluationContext, tenants: TenantsResource, ledger: LedgerResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tenants_file = tenants.load()
    retired = retired_tenant_ids(ledger.get(), tenants_file)
    tenant_ids = [t.id for t in tenants_file.tenants] + retired
    if not tenant_ids:
        return dg.SkipReason("no tenant is declared in the tenants file, and none is retired")
    # A schedule cannot return partition requests: the partitions are synced here.
    sync_partitions(context.instance, tenants_file, retired)
    when = context.scheduled_execution_time
    tick = when.strftime("%Y-%m-%dT%H:%MZ") if when else "unscheduled"
    return [
        dg.RunRequest(
            run_key=nightly_run_key(tenant_id, tick),
            partition_key=tenant_id,
            tags={"neo/tenant": tenant_id, "neo/launched-by": "nightly_reconciliation_schedule"},
        )
        for tenant_id in tenant_ids
    ]


defs = dg.Definitions(
    assets=[kb_reconciliation],
    asset_checks=[no_hole, tenant_containment, generation_residue],
    jobs=[reconcile_job],
    sensors=[reconciliation_sensor],
    schedules=[nightly_reconciliation_schedule],
)
