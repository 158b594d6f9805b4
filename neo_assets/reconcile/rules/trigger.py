"""When a tenant's reconciliation is requested, and the run keys that make it idempotent
(one run per batch of sweeps; one per tenant per nightly tick).
Design: docs/design/reconcile.md#triggers"""

from collections.abc import Iterable

from neo_assets.core.ids.partition_keys import parse_partition_key

RUN_KEY_PREFIX = "reconcile"


def tenant_of_sweep(partition_key: str | None) -> str | None:
    """The tenantId of a sweep partition ``<tenantId>/<repoSlug>`` (None for another shape)."""
    if not partition_key:
        return None
    try:
        return parse_partition_key(partition_key)[0]
    except ValueError:
        return None


def after_sweep_run_key(
    tenant_id: str,
    latest_finished_sweep_run_id: str,
    in_flight_sweep_partitions: Iterable[str | None],
    declared_tenants: Iterable[str],
) -> str | None:
    """The run key of the reconciliation a finished sweep of ``tenant_id`` asks for, or
    None: the tenant is not declared (nothing to reconcile against) or another sweep of it
    is still in flight (the last one to finish asks)."""
    if tenant_id not in set(declared_tenants):
        return None
    if any(tenant_of_sweep(key) == tenant_id for key in in_flight_sweep_partitions):
        return None
    return f"{RUN_KEY_PREFIX}:{tenant_id}:after:{latest_finished_sweep_run_id}"


def nightly_run_key(tenant_id: str, tick: str) -> str:
    """The run key of one tenant's reconciliation at one scheduled tick."""
    return f"{RUN_KEY_PREFIX}:{tenant_id}:nightly:{tick}"
