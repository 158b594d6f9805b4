"""The alerts capability in Dagster: the sensor that delivers each failed asset check and
failed run once, read from the event log's index, whose storage ids increase across runs,
so one integer per stream is a sound cursor on SQLite and Postgres alike."""

import time
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

from neo_assets.alerts.delivery import deliver_in_order
from neo_assets.alerts.rules import (
    STREAM_CHECKS,
    STREAM_RUNS,
    AlertCursor,
    CheckEvaluation,
    Pending,
    RunFailure,
    advance_cursor,
    alert_from_check,
    alert_from_run_failure,
    encode_cursor,
    initial_cursor,
    merge_pending,
    parse_cursor,
)
from neo_assets.alerts.sinks import sink_from_settings
from neo_assets.defs.resources import SettingsResource

PARTITION_TAG = "dagster/partition"
TENANT_TAG = "neo/tenant"


def plain_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Dagster MetadataValues as plain JSON-ready values (text, numbers, lists, dicts)."""
    raws = {key: getattr(value, "value", value) for key, value in metadata.items()}
    plain = str | int | float | bool | list | dict | None
    return {key: raw if isinstance(raw, plain) else str(raw) for key, raw in raws.items()}


def _check_records(
    instance: dg.DagsterInstance, after: int | None, since: float, limit: int
) -> list[Any]:
    records_filter = dg.EventRecordsFilter(
        event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION,
        after_cursor=after,
        after_timestamp=since if after is None else None,
    )
    storage = instance.event_log_storage
    if isinstance(storage, SqlEventLogStorage):
        # SQLite's run-sharded storage overrides get_event_records to scan run shards
        # without cursor support; the base SQL implementation reads the cross-run index,
        # where asset-check evaluations are mirrored with global ids (the same bypass
        # Dagster's own fetch_run_status_changes makes for run events).
        return list(
            SqlEventLogStorage.get_event_records(storage, records_filter, limit, ascending=True)
        )
    return list(storage.get_event_records(records_filter, limit, ascending=True))


def _run_info(
    instance: dg.DagsterInstance, run_id: str, cache: dict[str, tuple[dict[str, str], str]]
) -> tuple[dict[str, str], str]:
    """(tags, job name) of a run, read once per tick."""
    if run_id not in cache:
        run = instance.get_run_by_id(run_id)
        cache[run_id] = (dict(run.tags), run.job_name) if run else ({}, "")
    return cache[run_id]


def read_pending(
    instance: dg.DagsterInstance, cursor: AlertCursor, ui_base_url: str | None, limit: int
) -> tuple[dict[str, list[Pending]], dict[str, bool]]:
    """Per stream, the events after the cursor (oldest first) and whether the read was full."""
    runs_cache: dict[str, tuple[dict[str, str], str]] = {}
    checks: list[Pending] = []
    records = _check_records(instance, cursor.after.get(STREAM_CHECKS), cursor.since, limit)
    for record in records:
        entry = record.event_log_entry
        data = entry.dagster_event.event_specific_data if entry.dagster_event else None
        if not isinstance(data, dg.AssetCheckEvaluation):
            checks.append(Pending(STREAM_CHECKS, record.storage_id, None))
            continue
        tags, _ = _run_info(instance, entry.run_id, runs_cache)
        evaluation = CheckEvaluation(
            event_id=record.storage_id,
            run_id=entry.run_id,
            occurred_at=entry.timestamp,
            asset_key=data.asset_key.to_user_string(),
            check_name=data.check_name,
            passed=data.passed,
            severity=data.severity.value,
            partition_key=data.partition or tags.get(PARTITION_TAG),
            description=data.description,
            metadata=plain_metadata(data.metadata),
        )
        checks.append(
            Pending(STREAM_CHECKS, record.storage_id, alert_from_check(evaluation, ui_base_url))
        )

    after_runs = cursor.after.get(STREAM_RUNS)
    result = instance.fetch_run_status_changes(
        dg.RunStatusChangeRecordsFilter(
            event_type=dg.DagsterEventType.RUN_FAILURE,
            after_storage_id=after_runs,
            after_timestamp=cursor.since if after_runs is None else None,
        ),
        limit=limit,
        ascending=True,
    )
    runs: list[Pending] = []
    for record in result.records:
        entry = record.event_log_entry
        tags, job_name = _run_info(instance, entry.run_id, runs_cache)
        failure = RunFailure(
            event_id=record.storage_id,
            run_id=entry.run_id,
            occurred_at=entry.timestamp,
            job_name=job_name or entry.job_name or "",
            partition_key=tags.get(PARTITION_TAG),
            tenant_tag=tags.get(TENANT_TAG),
            message=_failure_message(entry),
        )
        runs.append(
            Pending(STREAM_RUNS, record.storage_id, alert_from_run_failure(failure, ui_base_url))
        )
    batches = {STREAM_CHECKS: checks, STREAM_RUNS: runs}
    full = {STREAM_CHECKS: len(records) >= limit, STREAM_RUNS: len(result.records) >= limit}
    return batches, full


def _failure_message(entry: Any) -> str:
    """The run's failure message, with the first failed step's error when Dagster has it."""
    message = entry.message or ""
    data = entry.dagster_event.event_specific_data if entry.dagster_event else None
    step = getattr(data, "first_step_failure_event", None)
    error = getattr(getattr(step, "event_specific_data", None), "error", None)
    while error is not None and error.cause is not None:
        error = error.cause  # the user's exception, not Dagster's wrapper
    if error is not None and error.message:
        message = f"{message} {error.message.strip().splitlines()[0]}"
    return message


# ---------------------------------------------------------------------------- the sensor
# A sensor turned on without a cursor reports the failures of the last day, not all time.
ALERT_LOOKBACK_S = 24 * 3600.0
# Events read per stream per tick; more wait for the next tick (the cursor says where).
ALERT_READ_LIMIT = 100


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


defs = dg.Definitions(sensors=[asset_check_alert_sensor])
