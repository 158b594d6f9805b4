"""Declaration digests and the tenant configVersion rule (1 at first, +1 on each change).
Pure; the caller puts unordered lists (repos, excludes) in canonical order before hashing."""

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
    """The configVersion for ``digest``, given ``known`` (digest -> latest version): 1 when
    nothing is known, the highest when ``digest`` holds it, else highest + 1 (going back is a
    change too: versions only increase). ValueError on a malformed digest or corrupt ``known``."""
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
