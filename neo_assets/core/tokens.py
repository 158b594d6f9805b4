"""Tenant API tokens: their format, their hash, and what one may read.

Pure. A token is ``neo_<id>_<secret>``: the id (public, printed by ``token list``) finds
the record, the sha256 of the whole token is all that is stored, and the presented
token's hash is compared with ``hmac.compare_digest``. The tenant and the repo subset come
from the record alone; a request can only narrow them.
"""

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo_assets.core import codes

TOKEN_PREFIX = "neo_"
_TOKEN = re.compile(r"neo_([0-9a-f]{16})_([A-Za-z0-9_-]{43})", re.ASCII)
# Hashed when no record matches, so an unknown id costs what a known one does.
_DUMMY_HASH = hashlib.sha256(b"neo_no-such-token").hexdigest()


def format_token(token_id: str, secret: str) -> str:
    return f"{TOKEN_PREFIX}{token_id}_{secret}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_id_of(presented: str) -> str | None:
    """The id inside a well-formed token, else None."""
    match = _TOKEN.fullmatch(presented)
    return None if match is None else match.group(1)


@dataclass(frozen=True)
class TokenRecord:
    id: str
    token_hash: str
    tenant_id: str
    repos: tuple[str, ...]  # empty: every repo of the tenant
    name: str
    created_at: float
    revoked_at: float | None

    def public(self) -> dict[str, Any]:
        """What ``token list`` shows: never the hash, never the token."""
        return {
            "id": self.id,
            "tenantId": self.tenant_id,
            "repos": list(self.repos),
            "name": self.name,
            "createdAt": self.created_at,
            "revokedAt": self.revoked_at,
        }


@dataclass(frozen=True)
class Verdict:
    """Who a request is (``record``) or why it is refused (``code``, HTTP 401)."""

    record: TokenRecord | None
    code: str | None


def verify(presented: str | None, records: Mapping[str, TokenRecord]) -> Verdict:
    """Check a presented bearer token against the records by id (constant-time on the
    hash; the same work whether or not the id is known)."""
    if not presented:
        return Verdict(None, codes.AUTH_MISSING_TOKEN)
    token_id = token_id_of(presented)
    record = records.get(token_id) if token_id is not None else None
    expected = record.token_hash if record is not None else _DUMMY_HASH
    matches = hmac.compare_digest(token_hash(presented), expected)
    if record is None or not matches:
        return Verdict(None, codes.AUTH_UNKNOWN_TOKEN)
    if record.revoked_at is not None:
        return Verdict(None, codes.AUTH_REVOKED_TOKEN)
    return Verdict(record, None)


def readable_repos(record: TokenRecord, declared: Sequence[str]) -> list[str]:
    """The repos the token may read among those its tenant declares now."""
    if not record.repos:
        return list(declared)
    return [slug for slug in declared if slug in record.repos]


def may_read_repo(record: TokenRecord, repo: str) -> bool:
    return not record.repos or repo in record.repos
