"""The status capability in Dagster: ``kb_status``, the operator's per-repo snapshot, and
the job that refreshes it."""

import dagster as dg
import pandas as pd

from neo_assets.defs.metadata import preview_table, status_summary
from neo_assets.defs.resources import (
    LedgerResource,
    SettingsResource,
    StoreResource,
    TenantsResource,
)
from neo_assets.defs.sweep import OWNERS
from neo_assets.services.status import build_status


@dg.asset(
    group_name="status",
    kinds={"pandas"},
    owners=OWNERS,
    deps=[dg.AssetKey("fence_census")],
    description="The operator's snapshot: one row per declared repo (checkpoint, outcome, "
    "cause, next due time, censuses, strikes, rows; the serving and the building embedding "
    "generation with its progress).",
)
def kb_status(
    settings: SettingsResource,
    tenants: TenantsResource,
    store: StoreResource,
    ledger: LedgerResource,
) -> dg.Output[pd.DataFrame]:
    snapshot = build_status(settings.load(), tenants.load(), ledger.get(), store.get())
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
                    "outcome",
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
        },
    )


status_job = dg.define_asset_job(
    "status",
    selection=dg.AssetSelection.assets("kb_status"),
    description="Refresh the operator's per-repo snapshot.",
)


defs = dg.Definitions(assets=[kb_status], jobs=[status_job])
