"""Declaration digests and the tenant configVersion rule.

A tenant's configVersion starts at 1 and increases by one each time its declaration
changes. The ledger remembers the digest of each version; this module decides, from
what the ledger knows and the digest of the current declaration, which version applies.

Pure: plain dicts in, strings and ints out. The caller (``Tenant.to_plain()`` /
``RepoDecl.to_plain()``) is responsible for putting semantically unordered lists (repos,
exclude globs) in a canonical order before hashing.
"""

import hashlib
import json
import re
from collections.abc import Mapping

# Domain separation: a repo declaration can never collide with a tenant declaration,
# and bumping a tag here deliberately re-versions every tenant.
TENANT_DECLARATION_TAG = "neo-tenant-declaration/1"
REPO_DECLARATION_TAG = "neo-repo-declaration/1"

_DIGEST_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)


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


def is_declaration_digest(value: object) -> bool:
    """True only for 64 lowercase hex digits (the form both digest functions return)."""
    return isinstance(value, str) and _DIGEST_RE.fullmatch(value) is not None


def next_config_version(known: Mapping[str, int], digest: str) -> int:
    """The configVersion that applies to a declaration whose digest is ``digest``.

    ``known`` maps each digest the ledger has seen to the LATEST version assigned to it.
    - nothing known: 1;
    - ``digest`` is the current declaration (the one holding the highest version):
      that version, unchanged;
    - anything else, including a digest seen before under an older version: highest + 1.
      Going back to an earlier declaration is a change like any other: versions only
      ever increase, so rows stamped under the intermediate version stay distinguishable
      and "newest version" always means "current declaration". The caller records the
      returned version against ``digest`` (overwriting the digest's older version).

    Raises ValueError on a malformed digest or a corrupt ``known`` (a version that is not
    a positive int, or two digests holding the same version): guessing would silently
    hand out a version that is already in use.
    """
    if not is_declaration_digest(digest):
        raise ValueError(f"not a declaration digest (64 lowercase hex): {digest!r:.80}")
    if not known:
        return 1
    owners: dict[int, str] = {}
    for known_digest, version in known.items():
        if not is_declaration_digest(known_digest):
            raise ValueError(f"corrupt config versions: bad digest {known_digest!r:.80}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(
                f"corrupt config versions: version {version!r:.40} for {known_digest} "
                "is not a positive int"
            )
        if version in owners:
            raise ValueError(
                f"corrupt config versions: version {version} held by both "
                f"{owners[version]} and {known_digest}"
            )
        owners[version] = known_digest
    current = max(owners)
    if owners[current] == digest:
        return current
    return current + 1
