"""`neo-assets reconcile`: classify orphans per tenant and, with ``--apply``, reclaim
(refused, exit 2, unless ``NEO_RECONCILIATION_ENABLED``: the setting is the switch, the
flag only confirms it). One Dagster run per tenant; exit 1 when a run or an ERROR check
failed."""

from typing import Annotated, Any

import typer

from neo_assets.cli import common

ENABLE_HINT = "set NEO_RECONCILIATION_ENABLED=true to let reconciliation delete orphan rows"


def _failed_checks(report: dict[str, Any]) -> list[str]:
    return [
        name
        for name, check in report.get("checks", {}).items()
        if not check["passed"] and check["severity"] == "ERROR"
    ]


def _line(report: dict[str, Any]) -> str:
    kinds = ", ".join(
        f"{kind} {entry['count']}"
        for kind, entry in report.get("orphans", {}).items()
        if entry.get("count")
    )
    blocked = report.get("reclaimBlocked")
    failed = _failed_checks(report)
    return (
        f"{report['tenantId']}: {kinds or 'no orphans'}; reclaimed {report.get('reclaimed', 0)}"
        f", re-stamped {report.get('restamped', 0)}, skipped unstamped "
        f"{report.get('skippedUnstamped', 0)}"
        + (f" (reclaim not run: {blocked})" if blocked else "")
        + (f"; FAILED checks: {', '.join(failed)}" if failed else "")
        + (f"; error: {report['error']}" if report.get("error") else "")
    )


def register(app: typer.Typer) -> None:
    """Add ``reconcile`` to ``app``."""

    @app.command()
    def reconcile(
        tenant: Annotated[str | None, typer.Option(help="only this tenant")] = None,
        apply: Annotated[
            bool,
            typer.Option(
                "--apply",
                help="reclaim actionable orphans (refused unless NEO_RECONCILIATION_ENABLED)",
            ),
        ] = False,
        as_json: common.JsonOpt = False,
    ) -> None:
        """Classify orphan rows per tenant and kind; --apply reclaims them."""

        def go() -> int:
            settings, tenants = common.load_config()
            in_force = any(t.id == tenant for t in tenants.tenants)
            if tenant and not in_force and (tenant, None) in tenants.withheld:
                raise common.UsageError(
                    f"tenant {tenant!r} is misdeclared in {tenants.path} and has no last good "
                    "declaration: nothing of it is reconciled (or reclaimed) until the file "
                    "is fixed (see the warning)"
                )
            if tenant and not in_force:
                from neo_assets.reconcile.retirement import retired_tenant_ids
                from neo_assets.services.handles import open_ledger

                with open_ledger(settings) as ledger:
                    retired = retired_tenant_ids(ledger, tenants)
                if tenant not in retired:
                    raise common.UsageError(
                        f"no tenant {tenant!r} in {tenants.path}, and none retired by that "
                        f"id: name a declared tenant, or one of {sorted(retired) or 'none'}"
                    )
            if apply and not settings.reconcile.enabled:
                raise common.UsageError(
                    f"--apply refused: reconciliation is disabled; {ENABLE_HINT}"
                )
            from neo_assets.cli.launch import dagster_instance, run_reconciliation

            instance = dagster_instance(settings)
            reports = run_reconciliation(settings, tenants, instance, tenant=tenant, apply=apply)
            common.emit({"tenants": reports}, as_json)
            if not as_json:
                for report in reports:
                    common.err.print(_line(report), highlight=False)
            bad = any(not r.get("success", False) or _failed_checks(r) for r in reports)
            return common.EXIT_FAILED if bad else common.EXIT_OK

        common.run(go, as_json)
