"""One dynamic partition per declared tenant repo, keyed ``<tenantId>/<repoSlug>``."""

import dagster as dg

TENANT_REPOS = "tenant_repos"
tenant_repos = dg.DynamicPartitionsDefinition(name=TENANT_REPOS)
