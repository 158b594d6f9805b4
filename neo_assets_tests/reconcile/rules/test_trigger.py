"""When reconciliation runs: after a tenant's batch of sweeps, nightly, and whether it may
delete."""

from typing import Any

import pytest

from neo_assets.core.codes import (
    RECONCILE_CLASSIFY_ONLY,
    RECONCILE_DISABLED,
    RECONCILE_NOTHING_TO_RECLAIM,
    RECONCILE_PLAN_FOREIGN_ROWS,
    RECONCILE_PLAN_OPENS_HOLE,
)
from neo_assets.reconcile.rules.reclaim_gate import reclaim_blocked
from neo_assets.reconcile.rules.trigger import after_sweep_run_key, nightly_run_key, tenant_of_sweep

DECLARED = ["acme", "globex"]


@pytest.mark.parametrize(
    ("key", "tenant"),
    [("acme/widgets", "acme"), ("acme", None), ("", None), (None, None), ("Acme/w", None)],
)
def test_tenant_of_a_sweep_partition(key: Any, tenant: str | None) -> None:
    assert tenant_of_sweep(key) == tenant


def test_the_last_sweep_of_a_batch_asks_once() -> None:
    # Three sweeps of acme: while others are in flight, a finished one does not ask.
    assert after_sweep_run_key("acme", "run-1", ["acme/b", "acme/c"], DECLARED) is None
    assert after_sweep_run_key("acme", "run-2", ["acme/c"], DECLARED) is None
    last = after_sweep_run_key("acme", "run-3", [], DECLARED)
    assert last is not None and "acme" in last and "run-3" in last
    # Two finishes evaluated after both ended name the same latest sweep: one key, one run.
    assert after_sweep_run_key("acme", "run-3", [None], DECLARED) == last
    # Another tenant's sweeps in flight do not hold acme back; a new batch gets a new key.
    assert after_sweep_run_key("acme", "run-4", ["globex/t"], DECLARED) not in (None, last)


def test_an_undeclared_tenant_is_never_requested() -> None:
    assert after_sweep_run_key("initech", "run-1", [], DECLARED) is None


def test_nightly_keys_differ_per_tenant_and_tick() -> None:
    keys = {nightly_run_key(t, tick) for t in DECLARED for tick in ("d1", "d2")}
    assert len(keys) == 4


OPEN: dict[str, Any] = {
    "write": True,
    "enabled": True,
    "plan_holes": 0,
    "plan_foreign_rows": 0,
    "actionable": 3,
}


def test_a_reclaim_runs_only_when_every_condition_holds() -> None:
    assert reclaim_blocked(**OPEN) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"write": False}, RECONCILE_CLASSIFY_ONLY),
        ({"write": False, "enabled": False}, RECONCILE_CLASSIFY_ONLY),
        ({"enabled": False}, RECONCILE_DISABLED),
        ({"enabled": "true"}, RECONCILE_DISABLED),  # only a real True enables
        ({"enabled": False, "plan_holes": 1}, RECONCILE_DISABLED),
        ({"plan_holes": 2}, RECONCILE_PLAN_OPENS_HOLE),
        ({"plan_holes": 1, "plan_foreign_rows": 1}, RECONCILE_PLAN_OPENS_HOLE),
        ({"plan_foreign_rows": 1}, RECONCILE_PLAN_FOREIGN_ROWS),
        ({"actionable": 0}, RECONCILE_NOTHING_TO_RECLAIM),
    ],
)
def test_the_first_unmet_condition_is_the_reason(change: dict[str, Any], reason: str) -> None:
    assert reclaim_blocked(**{**OPEN, **change}) == reason
