"""The status capability in Dagster: ``kb_status``, the operator's per-repo snapshot, the
job that refreshes it, and the sensor that runs that job after every sweep and
reconciliation run that ended (succeeded, failed or was canceled), however it was
launched, so the UI's snapshot is never older than the last run (``status.rules``)."""

import datetime

import dagster as dg
import pandas as pd

from neo_assets.defs.metadata import preview_table, status_summary
from neo_assets.defs.resources import (
    LedgerResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.reconcile.defs import RECONCILE_JOB
from neo_assets.status.report import build_status
from neo_assets.status.rules import FinishedRun, refresh_request
from neo_assets.sweep.defs import OWNERS, sweep_job


@dg.asset(
    group_name="status",
    kinds={"pandas"},
    owners=OWNERS,
    deps=[dg.AssetKey("fence_census")],
    description="The operator's snapshot: one row per declared repo, and per retired one "
    "(checkpoint, outcome, cause, next due time, censuses, strikes, rows; the serving and the "
    "building embedding generation with its progress) with its state in words: complete / "
    "deferred (cause, next try) / failed (error and fix) / retired.",
)
def kb_status(
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.Output[pd.DataFrame]:
    the_ledger = ledger.get()
    snapshot = build_status(settings.load(), tenants.load(the_ledger), the_ledger, store.get())
    frame = pd.DataFrame(snapshot["repos"])
    return dg.Output(
        frame,
        metadata={
            "repos": len(frame),
            "dagster/row_count": len(frame),
            "summary": status_summary(frame),
            "preview": preview_table(
                frame,
                [
                    "tenantId",
                    "repoSlug",
                    "state",
                    "deferredCauseCode",
                    "rows",
                    "servingGeneration",
                    "buildingGeneration",
                    "buildingProgress",
                ],
            ),
            # The provider's health and the write path's freeze, beside the repos.
            "canary": dg.MetadataValue.json(snapshot.get("canary") or {}),
            "freeze": dg.MetadataValue.json(snapshot.get("freeze") or {}),
            # Where the declaration in force came from and what the file gets wrong.
            "declaration": dg.MetadataValue.json(snapshot.get("declaration") or {}),
            "misdeclared": sum(1 for r in snapshot["repos"] if r.get("misdeclared")),
        },
    )


status_job = dg.define_asset_job(
    "status",
    selection=dg.AssetSelection.assets("kb_status"),
    description="Refresh the operator's per-repo snapshot.",
)


# The runs whose end changes what kb_status shows.
MONITORED_JOBS = (sweep_job.name, RECONCILE_JOB)
ENDED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
RECENT_RUNS = 100


def finished_runs(instance: dg.DagsterInstance, after: float | None) -> list[FinishedRun]:
    """Monitored runs that ended after ``after`` (epoch seconds; None: the latest ones)."""
    since = None if after is None else datetime.datetime.fromtimestamp(after, datetime.UTC)
    out = []
    for job in MONITORED_JOBS:
        records = instance.get_run_records(
            filters=dg.RunsFilter(job_name=job, statuses=ENDED, updated_after=since),
            limit=RECENT_RUNS,
        )
        out += [
            FinishedRun(r.dagster_run.run_id, float(r.end_time))
            for r in records
            if r.end_time is not None
        ]
    return out


@dg.sensor(
    job=status_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Refreshes kb_status after sweep and reconciliation runs end (succeeded, failed or "
        "canceled), however they were launched: one status run per batch of ended runs. "
        "Running by default: it launches a small run only when one of those ended."
    ),
)
def status_refresh_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    last = float(context.cursor) if context.cursor else None
    key, cursor = refresh_request(finished_runs(context.instance, last), last)
    requests = (
        []
        if key is None
        else [dg.RunRequest(run_key=key, tags={"neo/launched-by": "status_refresh_sensor"})]
    )
    return dg.SensorResult(run_requests=requests, cursor=None if cursor is None else repr(cursor))


defs = dg.Definitions(assets=[kb_status], jobs=[status_job], sensors=[status_refresh_sensor])
