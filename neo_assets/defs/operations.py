"""The operator's automation: the daily forced full sweep and the alert sensor.

Both start STOPPED; an operator turns them on in the UI (Automation tab).
"""

import time

import dagster as dg

from neo_assets.core.alerts import (
    advance_cursor,
    encode_cursor,
    initial_cursor,
    merge_pending,
    parse_cursor,
)
from neo_assets.defs.alert_events import read_pending
from neo_assets.defs.jobs import sweep_job
from neo_assets.defs.partition_sync import sync_partitions
from neo_assets.defs.resources import SettingsResource, TenantsResource
from neo_assets.services.alerts.delivery import deliver_in_order
from neo_assets.services.alerts.sinks import sink_from_settings
from neo_assets.services.sweep.due import DUE_FORCED, declared_repos

FORCED_SWEEP_CRON = "0 2 * * *"
# A sensor turned on without a cursor reports the failures of the last day, not all time.
ALERT_LOOKBACK_S = 24 * 3600.0
# Events read per stream per tick; more wait for the next tick (the cursor says where).
ALERT_READ_LIMIT = 100


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
    context: dg.ScheduleEvaluationContext, tenants: TenantsResource
) -> list[dg.RunRequest] | dg.SkipReason:
    tenants_file = tenants.load()
    ctxs = declared_repos(tenants_file)
    if not ctxs:
        return dg.SkipReason("no repo is declared in the tenants file")
    # A schedule cannot return partition requests (a sensor can): they are synced here, as
    # the CLI does, so every run request names a known partition.
    sync_partitions(context.instance, tenants_file)
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


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Delivers each failed asset check (ERROR and WARN) and each failed run once, in event "
        "order, to the alert sink: a Slack-shaped webhook when NEO_ALERT_WEBHOOK_URL is set, "
        "else $NEO_HOME/alerts.jsonl. The alert names tenant, repo, check, severity, up to 20 "
        "offending paths/ids and links the run. The cursor advances only after delivery; a "
        "failing sink is retried with backoff (bounded per tick) and the rest waits behind "
        "it. Launches no runs, so it never blocks sweeps."
    ),
)
def asset_check_alert_sensor(
    context: dg.SensorEvaluationContext, settings: SettingsResource
) -> dg.SensorResult:
    cfg = settings.load()
    cursor = parse_cursor(context.cursor) or initial_cursor(time.time(), ALERT_LOOKBACK_S)
    batches, full = read_pending(context.instance, cursor, cfg.alerts.ui_base_url, ALERT_READ_LIMIT)
    pending = merge_pending(batches, full)
    sink = sink_from_settings(cfg)
    report = deliver_in_order(pending, sink)
    moved = advance_cursor(cursor, report.handled)
    for alert_id in report.delivered:
        context.log.info(f"alert {alert_id} delivered to {sink.name}")
    for alert_id in report.repeats:
        context.log.info(f"alert {alert_id} was already delivered to {sink.name}")
    # No run is ever requested: the skip reason is the tick's line in the UI's history.
    delivered = f"{len(report.delivered)} alert(s) delivered to {sink.name}"
    if report.failed is not None:
        skip = (
            f"{delivered}; alert {report.failed.alert_id} not delivered: {report.error}; "
            f"{len(pending) - len(report.handled)} event(s) wait for the next tick"
        )
        context.log.warning(skip)
    elif report.out_of_time:
        skip = f"{delivered}; tick budget spent, the remaining events wait for the next tick"
    elif report.delivered:
        skip = delivered
    else:
        skip = "no new failure"
    return dg.SensorResult(skip_reason=skip, cursor=encode_cursor(moved))


defs = dg.Definitions(schedules=[forced_sweep_schedule], sensors=[asset_check_alert_sensor])
