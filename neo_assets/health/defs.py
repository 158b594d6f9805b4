"""Provider health in Dagster: the canary schedule and the freeze re-probe sensor, both
STOPPED until an operator turns them on. Neither probes per row, batch or sweep."""

import time
from typing import Any

import dagster as dg

from neo_assets.defs.resources import LedgerResource, SettingsResource
from neo_assets.health.canary import run_canary
from neo_assets.health.reprobe import run_due_reprobe

CANARY_CRON = "*/5 * * * *"


@dg.op(
    description=(
        "Runs the provider health canary once: a fixed short text through the embedding "
        "provider under its own deadline (NEO_CANARY_TIMEOUT_MS), recorded in the ledger. "
        "A healthy result within NEO_CANARY_TTL_S is reused without a request."
    ),
)
def provider_canary(
    context: dg.OpExecutionContext, settings: SettingsResource, ledger: LedgerResource
) -> dg.Output[dict[str, Any]]:
    result = run_canary(settings.load(), ledger.get(), clock=time.time)
    doc = result.to_doc()
    record = result.record
    context.log.info(
        f"canary {'healthy' if record.healthy else 'UNHEALTHY'}"
        f"{' (cached)' if result.cached else ''}: code {record.code}, "
        f"{record.elapsed_ms:.0f} ms of {record.timeout_ms} ms, dimension {record.dimension}"
    )
    metadata: dict[str, Any] = {
        "healthy": record.healthy,
        "cached": result.cached,
        "code": record.code or "",
        "operation_label": record.operation_label,
        "timeout_ms": record.timeout_ms,
        "elapsed_ms": float(record.elapsed_ms),
        "expected_dimension": record.expected_dimension,
    }
    if record.dimension is not None:  # no answer, no dimension: left out, not faked
        metadata["dimension"] = record.dimension
    return dg.Output(doc, metadata=metadata)


@dg.job(
    name="provider_health",
    description="Run the provider health canary once and record it (see provider_canary).",
    tags={"neo/kind": "health"},
)
def provider_health_job() -> None:
    provider_canary()


provider_health_schedule = dg.ScheduleDefinition(
    name="provider_health_schedule",
    job=provider_health_job,
    cron_schedule=CANARY_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description=(
        "Provider health canary every 5 minutes (off by default). Each run embeds one fixed "
        "short text with its own deadline (NEO_CANARY_TIMEOUT_MS) and records healthy or not "
        "in the ledger and on the kb_status snapshot; healthy results are cached for "
        "NEO_CANARY_TTL_S, failures back off 30 s doubling to 10 min. A healthy canary ends a "
        "recovery episode: a repo deferred by a provider failure becomes due at once."
    ),
)


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Freeze re-probe: when the embedding write path is frozen and its durable freeze "
        "record is due (own back-off), probes the provider once under its own deadline "
        "(NEO_RECOVERY_FREEZE_REPROBE_TIMEOUT_MS; keep it below the sensor evaluation "
        "timeout). Only a valid vector of the collection's dimension, in time, lifts the "
        "freeze; anything else backs off, and past the attempt cap the record is contained "
        "until `neo-assets unfreeze`. Ticks where nothing is due probe nothing. Launches no "
        "runs."
    ),
)
def freeze_reprobe_sensor(
    context: dg.SensorEvaluationContext, settings: SettingsResource, ledger: LedgerResource
) -> dg.SkipReason:
    report = run_due_reprobe(settings.load(), ledger.get(), clock=time.time)
    message = report.message()
    if report.probed:
        context.log.info(message)
    return dg.SkipReason(message)


defs = dg.Definitions(
    jobs=[provider_health_job],
    schedules=[provider_health_schedule],
    sensors=[freeze_reprobe_sensor],
)
