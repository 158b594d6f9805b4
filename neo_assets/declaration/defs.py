"""The tenants file's misdeclarations as asset checks: each tenant's own on its
reconciliation (another tenant's typo never turns it red) and the whole file's on
``kb_status``. WARN while a last good declaration stands in; ERROR when nothing does."""

import warnings

import dagster as dg

from neo_assets.declaration.in_force import file_verdict, tenant_verdict
from neo_assets.declaration.rules import DeclarationVerdict
from neo_assets.defs.partitions import tenants_partitions
from neo_assets.defs.resources import LedgerResource, TenantsResource


def _result(verdict: DeclarationVerdict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=verdict.passed,
        severity=dg.AssetCheckSeverity.ERROR if verdict.error else dg.AssetCheckSeverity.WARN,
        metadata={
            "summary": dg.MetadataValue.md(verdict.summary),
            "offending": dg.MetadataValue.json(list(verdict.offending)),
        },
    )


# Partitioned checks are a preview feature in Dagster 1.13 (see reconcile/defs.py).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)

    @dg.asset_check(
        asset=dg.AssetKey("kb_reconciliation"),
        partitions_def=tenants_partitions,
        description=(
            "Declaration: the tenant's block of tenants.yaml can be used. Fails naming each "
            "misdeclared repo (or the tenant), the file's line, what is wrong and what is "
            "allowed: WARN while its last good declaration stays in force, ERROR when "
            "there is none (it is not swept or served; none of its rows is retired). "
            "Another tenant's problem never fails this tenant's check."
        ),
    )
    def declaration(
        context: dg.AssetCheckExecutionContext, tenants: TenantsResource, ledger: LedgerResource
    ) -> dg.AssetCheckResult:
        return _result(tenant_verdict(tenants.load(ledger.get()), context.partition_key))


@dg.asset_check(
    asset=dg.AssetKey("kb_status"),
    description=(
        "Tenants file: every entry of tenants.yaml can be used and the file can be read. "
        "Fails naming each problem with its line and what is allowed (entries that name "
        "no tenant, and a file that cannot be read at all, whose last good declarations "
        "stay in force, included)."
    ),
)
def tenants_file(tenants: TenantsResource, ledger: LedgerResource) -> dg.AssetCheckResult:
    return _result(file_verdict(tenants.load(ledger.get())))


defs = dg.Definitions(asset_checks=[declaration, tenants_file])
