"""When a repo's related-chunk links need computing again: by their own run after the sweep
that moved the declared generation or the rows, never on the sweep's critical path. Pure."""

import math
from collections.abc import Mapping
from typing import Any

LINKS_NEVER = "never linked"
LINKS_GENERATION_MOVED = "declared generation moved"
LINKS_PARAMS_CHANGED = "link parameters changed"
LINKS_ROWS_ADDED = "rows added since the last links run"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def links_due_reason(
    *,
    generation_recorded_at: float | None,
    link_set: Mapping[str, Any] | None,
    params: Mapping[str, Any],
    last_sweep_at: float | None,
    last_sweep_embedded: int,
) -> str | None:
    """Why the repo's links are due now, or None. ``link_set``: the stored set, None when never
    computed; a torn field of it reads as unobserved, which makes the links due (safe)."""
    if generation_recorded_at is None:
        return None
    if link_set is None:
        return LINKS_NEVER
    if link_set.get("params") != dict(params):
        return LINKS_PARAMS_CHANGED
    linked_generation = _number(link_set.get("generation_recorded_at"))
    if linked_generation is None or linked_generation != float(generation_recorded_at):
        return LINKS_GENERATION_MOVED
    computed_at = _number(link_set.get("computed_at"))
    swept_at = _number(last_sweep_at)
    if last_sweep_embedded > 0 and swept_at is not None:
        # Rows of the same generation arrived (a deferred sweep finished): more to link.
        if computed_at is None or swept_at > computed_at:
            return LINKS_ROWS_ADDED
    return None


def links_run_key(
    key: str,
    *,
    generation_recorded_at: float | None,
    link_set: Mapping[str, Any] | None,
    last_sweep_at: float | None,
) -> str:
    """Idempotent per state: the same facts never launch two links runs, and any later
    sweep or links run makes a new key (so a run that found the lease busy is retried
    after the next sweep)."""
    computed_at = (link_set or {}).get("computed_at")
    return f"links:{key}@{generation_recorded_at}:{computed_at}:{last_sweep_at}"
