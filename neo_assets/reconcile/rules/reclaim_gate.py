"""Whether a reconciliation may delete, and if not, why (the first unmet condition): one
decision, in one place. Design: docs/design/reconcile.md#deleting"""

from neo_assets.core import codes

RECONCILE_CLASSIFY_ONLY = codes.RECONCILE_CLASSIFY_ONLY
RECONCILE_DISABLED = codes.RECONCILE_DISABLED
RECONCILE_PLAN_OPENS_HOLE = codes.RECONCILE_PLAN_OPENS_HOLE
RECONCILE_PLAN_FOREIGN_ROWS = codes.RECONCILE_PLAN_FOREIGN_ROWS
RECONCILE_NOTHING_TO_RECLAIM = codes.RECONCILE_NOTHING_TO_RECLAIM


def reclaim_blocked(
    *, write: bool, enabled: bool, plan_holes: int, plan_foreign_rows: int, actionable: int
) -> str | None:
    """None when the reclaim may run, else the first reason it may not."""
    if not write:
        return RECONCILE_CLASSIFY_ONLY
    if enabled is not True:
        return RECONCILE_DISABLED
    if plan_holes != 0:
        return RECONCILE_PLAN_OPENS_HOLE
    if plan_foreign_rows != 0:
        return RECONCILE_PLAN_FOREIGN_ROWS
    if actionable <= 0:
        return RECONCILE_NOTHING_TO_RECLAIM
    return None
