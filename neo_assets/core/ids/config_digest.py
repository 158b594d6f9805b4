"""Declaration digests: whether a tenant's or a repo's declaration changed (the ledger
numbers a tenant's configVersions: ``Ledger.config_version``). Pure; the caller puts
unordered lists (repos, excludes) in canonical order before hashing."""

import hashlib
import json
from collections.abc import Mapping

# Domain separation: a repo declaration can never collide with a tenant declaration,
# and bumping a tag here deliberately re-versions every tenant.
TENANT_DECLARATION_TAG = "neo-tenant-declaration/1"
REPO_DECLARATION_TAG = "neo-repo-declaration/1"


def canonical_json(value: object) -> str:
    """JSON with sorted keys, no whitespace and no NaN/Infinity, so equal data always
    encodes to equal text regardless of dict insertion order."""
    return json.dumps(
        value,
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )


def _digest(tag: str, plain: Mapping[str, object]) -> str:
    if not isinstance(plain, Mapping):
        raise TypeError(f"a declaration must be a mapping, got {type(plain).__name__}")
    payload = canonical_json([tag, dict(plain)])
    return hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


def declaration_digest(tenant_plain: Mapping[str, object]) -> str:
    """sha256 (64 hex) of a tenant's whole declaration (id and every repo with every
    field): any change to it is a change of the tenant's configVersion."""
    return _digest(TENANT_DECLARATION_TAG, tenant_plain)


def repo_declaration_digest(repo_plain: Mapping[str, object]) -> str:
    """sha256 (64 hex) of one repo's declaration (slug, path, ref, parser, cadence):
    tells whether that repo's declaration moved since its last sweep."""
    return _digest(REPO_DECLARATION_TAG, repo_plain)
