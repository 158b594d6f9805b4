"""The dynamic partitions: one per declared tenant repo (``<tenantId>/<repoSlug>``, the
sweep and the links) and one per declared tenant (``<tenantId>``, the reconciliation).
defs/partition_sync.py keeps both matching the tenants file."""

import dagster as dg

TENANT_REPOS = "tenant_repos"
tenant_repos = dg.DynamicPartitionsDefinition(name=TENANT_REPOS)
TENANTS = "tenants"
tenants_partitions = dg.DynamicPartitionsDefinition(name=TENANTS)
