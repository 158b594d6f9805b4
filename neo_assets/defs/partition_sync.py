"""The dynamic partitions brought to the tenants file (core/ids/partition_changes.py); a
retired tenant keeps its reconciliation partition so its rows can still be reclaimed.
Every evaluation that requests partitioned runs syncs first (a sensor as requests, a
schedule and the CLI directly)."""

from collections.abc import Sequence

import dagster as dg

from neo_assets.core.ids.partition_changes import (
    partition_changes,
    repo_partition_keys,
    tenant_partition_keys,
)
from neo_assets.defs.partitions import TENANT_REPOS, TENANTS
from neo_assets.tenants.validation import TenantsFile

PartitionRequest = dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest


def declared_partitions(
    tenants: TenantsFile, retained_tenants: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Each dynamic partitions definition's declared keys (and the retained tenants')."""
    declaration = [(t.id, [r.slug for r in t.repos]) for t in tenants.tenants]
    return {
        TENANT_REPOS: repo_partition_keys(declaration),
        TENANTS: tenant_partition_keys(declaration) + list(retained_tenants),
    }


def partition_requests(
    instance: dg.DagsterInstance, tenants: TenantsFile, retained: Sequence[str] = ()
) -> list[PartitionRequest]:
    """What brings the instance's partitions to ``tenants``: adds, then removals."""
    requests: list[PartitionRequest] = []
    for name, declared in declared_partitions(tenants, retained).items():
        changes = partition_changes(declared, instance.get_dynamic_partitions(name))
        # A withheld (misdeclared, no last good) tenant or repo keeps the partition it
        # has (a typo removes nothing), and gets none it never had.
        remove = [key for key in changes.remove if not _withheld(tenants, key)]
        if changes.add:
            requests.append(dg.AddDynamicPartitionsRequest(name, list(changes.add)))
        if remove:
            requests.append(dg.DeleteDynamicPartitionsRequest(name, remove))
    return requests


def _withheld(tenants: TenantsFile, key: str) -> bool:
    """Whether a partition key (``tenant`` or ``tenant/repo``) names something withheld;
    while part of the file names no tenant, every key may be (nothing is removed)."""
    if tenants.retires_nothing:
        return True
    tenant_id, _, slug = key.partition("/")
    return (tenant_id, None) in tenants.withheld or (tenant_id, slug or None) in tenants.withheld


def apply_requests(instance: dg.DagsterInstance, requests: list[PartitionRequest]) -> None:
    """What the daemon does with a sensor's partition requests."""
    for request in requests:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


def sync_partitions(
    instance: dg.DagsterInstance, tenants: TenantsFile, retained: Sequence[str] = ()
) -> list[PartitionRequest]:
    """Apply ``partition_requests`` now; returns what was applied."""
    requests = partition_requests(instance, tenants, retained)
    apply_requests(instance, requests)
    return requests
