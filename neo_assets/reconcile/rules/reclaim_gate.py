"""Whether a reconciliation may delete, and if not, why (the first unmet condition): one
decision, in one place. Design: docs/design/reconcile.md#deleting"""

from neo_assets.core import codes


def reclaim_blocked(
    *, write: bool, enabled: bool, plan_holes: int, plan_foreign_rows: int, actionable: int
) -> str | None:
    """None when the reclaim may run, else the first reason it may not."""
    if not write:
        return codes.RECONCILE_CLASSIFY_ONLY
    if enabled is not True:
        return codes.RECONCILE_DISABLED
    if plan_holes != 0:
        return codes.RECONCILE_PLAN_OPENS_HOLE
    if plan_foreign_rows != 0:
        return codes.RECONCILE_PLAN_FOREIGN_ROWS
    if actionable <= 0:
        return codes.RECONCILE_NOTHING_TO_RECLAIM
    return None
