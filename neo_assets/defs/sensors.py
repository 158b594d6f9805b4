"""Sensors: sync partitions with tenants.yaml and request sweeps of due repos only.

A quiet knowledge base costs no runs: a tick where nothing moved requests nothing.
"""

import json
import time

import dagster as dg

from neo_assets.defs.jobs import sweep_job
from neo_assets.defs.partition_sync import partition_requests
from neo_assets.defs.resources import LedgerResource, SettingsResource, TenantsResource
from neo_assets.services.sweep.due import declared_repos, evaluate


@dg.sensor(
    job=sweep_job,
    minimum_interval_seconds=60,
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
    tenants_file = tenants.load()
    ctxs = declared_repos(tenants_file)
    cursor = json.loads(context.cursor) if context.cursor else {}
    requests = []
    for due in evaluate(ctxs, cfg, ledger.get(), time.time()):
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
        dynamic_partitions_requests=partition_requests(context.instance, tenants_file),
        cursor=json.dumps(cursor, sort_keys=True),
    )
