"""Read what is retired: tenants.yaml now against what the ledger remembers (the rule is
``neo_assets.reconcile.rules.retirement``), and how many rows of each retired scope wait."""

import sqlalchemy as sa

from neo_assets.code_tools.index_store import forget_repo, indexed_revisions
from neo_assets.reconcile.rules.retirement import Retired, retired
from neo_assets.serve.tokens import revoke_tenant_tokens
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import TenantsFile


def declared_owners(tenants: TenantsFile) -> dict[str, set[str]]:
    """tenantId -> its declared repo slugs. A withheld (misdeclared, no last good) tenant
    or repo counts as declared: a typo never retires anything (declaration/rules.py)."""
    owners = {tenant.id: {repo.slug for repo in tenant.repos} for tenant in tenants.tenants}
    for tenant_id, slug in tenants.withheld:
        slugs = owners.setdefault(tenant_id, set())
        if slug is not None:
            slugs.add(slug)
    return owners


def read_retired(ledger: Ledger, tenants: TenantsFile) -> Retired:
    """The retired tenants and repos: known to the ledger, no longer declared. None while
    part of the tenants file names no tenant (``TenantsFile.retires_nothing``)."""
    if tenants.retires_nothing:
        return Retired()
    with ledger.engine.connect() as conn:
        known_tenants = conn.execute(sa.select(t.tenant_config_versions.c.tenant_id).distinct())
        tenant_ids = [row[0] for row in known_tenants]
        pairs = {
            (row[0], row[1])
            for table in (t.repo_state, t.envelopes)
            for row in conn.execute(sa.select(table.c.tenant_id, table.c.repo_slug))
        }
    owners = declared_owners(tenants)
    for tenant_id, slug in tenants.withheld:
        if slug is None:  # the whole tenant is withheld: every repo it had stays declared
            owners[tenant_id].update(s for tid, s in pairs if tid == tenant_id)
    return retired(owners, tenant_ids, sorted(pairs))


def retired_tenant_ids(ledger: Ledger, tenants: TenantsFile) -> list[str]:
    """The retired tenants, sorted: reconciliation visits them as it visits declared ones."""
    return sorted(read_retired(ledger, tenants).tenants)


def apply_retirement(ledger: Ledger, tenants: TenantsFile, now: float) -> None:
    """What follows a tenant or repo out of the declaration at once, at every sweep
    launch and sensor tick (its rows wait for reconciliation): its tokens revoked, for good
    (a tenant declared later with the same id is another tenant), and its code tools'
    indexes dropped (derived data, never served once retired; a repo declared again is
    indexed by its next sweep)."""
    found = read_retired(ledger, tenants)
    revoke_tenant_tokens(ledger, sorted(found.tenants), now)
    gone = [(tid, slug) for tid in sorted(found.tenants) for slug in indexed_revisions(ledger, tid)]
    gone += [
        (tid, slug) for tid, slug in sorted(found.repos) if slug in indexed_revisions(ledger, tid)
    ]
    for tid, slug in gone:
        forget_repo(ledger, tid, slug)
