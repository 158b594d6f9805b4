"""Retirement: a tenant or repo the ledger remembers but tenants.yaml no longer declares.
Pure. Design: docs/design/reconcile.md#retirement"""

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

RETIRED_REPO = "retired-repo"
RETIRED_TENANT = "retired-tenant"
RETIRED_KINDS = (RETIRED_REPO, RETIRED_TENANT)


@dataclass(frozen=True)
class Retired:
    """Retired tenants, and retired repos of still-declared tenants, as (tenantId, slug)."""

    tenants: frozenset[str] = frozenset()
    repos: frozenset[tuple[str, str]] = frozenset()

    def kind(self, tenant_id: str, repo_slug: object) -> str | None:
        """RETIRED_TENANT / RETIRED_REPO for a row so stamped, None when it is not retired."""
        if tenant_id in self.tenants:
            return RETIRED_TENANT
        if type(repo_slug) is str and (tenant_id, repo_slug) in self.repos:
            return RETIRED_REPO
        return None

    def repos_of(self, tenant_id: str) -> tuple[str, ...]:
        """The retired repo slugs of a declared tenant, sorted."""
        return tuple(sorted(slug for tid, slug in self.repos if tid == tenant_id))


def retired(
    declared: Mapping[str, Set[str]],
    known_tenants: Iterable[str],
    known_repos: Iterable[tuple[str, str]],
) -> Retired:
    """What is retired: ``declared`` is tenantId -> declared repo slugs (tenants.yaml now);
    ``known_*`` what the ledger remembers. A known repo of a retired tenant is covered by
    the tenant and not listed again."""
    known_repos = list(known_repos)
    tenants = {tid for tid in known_tenants if tid not in declared}
    tenants |= {tid for tid, _slug in known_repos if tid not in declared}
    repos = {
        (tid, slug) for tid, slug in known_repos if tid in declared and slug not in declared[tid]
    }
    return Retired(tenants=frozenset(tenants), repos=frozenset(repos))


def scope_label(tenant_id: str, repo_slug: str | None = None) -> str:
    """How an alert and the status name a retired scope: ``globex`` or ``acme/widgets``."""
    return tenant_id if repo_slug is None else f"{tenant_id}/{repo_slug}"
