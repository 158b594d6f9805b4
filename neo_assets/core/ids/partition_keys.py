"""One dynamic partition per tenant repo: ``<tenantId>/<repoSlug>``.

Both halves match ``^[a-z0-9][a-z0-9-]{0,62}$``, so the slash is unambiguous.
"""

import re

_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}", re.ASCII)


def partition_key(tenant_id: str, repo_slug: str) -> str:
    return f"{tenant_id}/{repo_slug}"


def parse_partition_key(key: str) -> tuple[str, str]:
    """Split a key into (tenantId, repoSlug); ValueError names the bad key."""
    tenant_id, sep, repo_slug = key.partition("/")
    if not sep or not _ID.fullmatch(tenant_id) or not _ID.fullmatch(repo_slug):
        raise ValueError(
            f"partition key {key!r} is not '<tenantId>/<repoSlug>' "
            "(each matching ^[a-z0-9][a-z0-9-]{0,62}$)"
        )
    return tenant_id, repo_slug
