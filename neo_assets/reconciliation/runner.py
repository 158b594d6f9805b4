"""Run reconciliations through Dagster against a persistent instance (the CLI), so every
run, its materialization and its check results show in the UI."""

from typing import Any

from neo_assets.settings import Settings
from neo_assets.sweep.runner import QUIET_CONSOLE
from neo_assets.tenants import TenantsFile

ASSET = "kb_reconciliation"


def _checks(result: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ev in result.get_asset_check_evaluations():
        md = {key: getattr(value, "value", value) for key, value in ev.metadata.items()}
        md.pop("summary", None)
        out[ev.check_name] = {
            "passed": bool(ev.passed),
            "severity": ev.severity.value,
            "metadata": md,
        }
    return out


def _failure(result: Any) -> str:
    """The first failed step's error, by its innermost cause (what actually went wrong)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            lines = error.message.strip().splitlines() or [""]
            return f"{event.step_key}: {lines[0]}"[:500]
    return ""


def run_reconciliation(
    settings: Settings,
    tenants: TenantsFile,
    instance: Any,
    *,
    tenant: str | None = None,
    apply: bool = False,
) -> list[dict[str, Any]]:
    """One ``reconcile`` run per selected declared tenant. Without ``apply`` the run is
    classify-only (no write of any kind); with it, the run re-stamps and, as the setting
    alone decides, reclaims. Returns one report per tenant, with its checks' verdicts."""
    from neo_assets.definitions import defs
    from neo_assets.defs.reconciliation_defs import RECONCILE_JOB, TENANTS

    tenant_ids = [t.id for t in tenants.tenants if tenant is None or t.id == tenant]
    known = set(instance.get_dynamic_partitions(TENANTS))
    missing = [t for t in tenant_ids if t not in known]
    if missing:
        instance.add_dynamic_partitions(TENANTS, missing)
    job = defs.resolve_job_def(RECONCILE_JOB)
    reports: list[dict[str, Any]] = []
    for tenant_id in tenant_ids:
        result = job.execute_in_process(
            instance=instance,
            partition_key=tenant_id,
            run_config={
                **QUIET_CONSOLE,
                "ops": {ASSET: {"config": {"classify_only": not apply}}},
            },
            raise_on_error=False,
            tags={"neo/tenant": tenant_id, "neo/launched-by": "cli"},
        )
        try:
            report = dict(result.output_for_node(ASSET))
        except Exception:  # the asset step failed: report the run, not a plan
            report = {
                "tenantId": tenant_id,
                "enabled": settings.reconciliation_enabled,
                "orphans": {},
                "reclaimed": 0,
                "skippedUnstamped": 0,
                "error": _failure(result),
            }
        report.pop("reclaimedPaths", None)
        report["checks"] = _checks(result)
        report["runId"] = result.run_id
        report["success"] = bool(result.success)
        reports.append(report)
    return reports
