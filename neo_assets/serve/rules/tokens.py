"""Tenant API tokens: their format (``neo_<id>_<secret>``), their hash (only the sha256 is
stored, compared with ``hmac.compare_digest``), and their record: what one may read (its
tenant and repo subset; a request can only narrow them). Pure."""

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
    expires_at: float | None = None
    revoked_reason: str = ""

    def public(self) -> dict[str, Any]:
        """What ``token list`` shows: never the hash, never the token."""
        return {
            "id": self.id,
            "tenantId": self.tenant_id,
            "repos": list(self.repos),
            "name": self.name,
            "createdAt": self.created_at,
            "revokedAt": self.revoked_at,
            "expiresAt": self.expires_at,
            "revokedReason": self.revoked_reason or None,
        }


@dataclass(frozen=True)
class Verdict:
    """Who a request is (``record``) or why it is refused (``code``, HTTP 401)."""

    record: TokenRecord | None
    code: str | None


def verify(
    presented: str | None, records: Mapping[str, TokenRecord], now: float | None = None
) -> Verdict:
    """Check a presented bearer token against the records by id (constant-time on the
    hash; the same work whether or not the id is known); past its expiry at ``now`` it is
    refused."""
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
    if now is not None and record.expires_at is not None and now >= record.expires_at:
        return Verdict(None, codes.AUTH_EXPIRED_TOKEN)
    return Verdict(record, None)


_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])", re.ASCII)
_UNIT_S = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
MAX_LIFE_S = 3650 * 86_400


def parse_life(text: str) -> float:
    """Seconds of ``30d`` / ``12h`` / ``90m`` / ``2w``; ValueError naming the shape."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"--expires: {text!r} is not a duration like 30d, 12h, 90m or 2w")
    seconds = float(int(match.group(1)) * _UNIT_S[match.group(2)])
    if seconds > MAX_LIFE_S:
        raise ValueError(f"--expires: {text!r} is over 10 years; omit it for no expiry")
    return seconds


def token_in_query(params: Sequence[tuple[str, str]]) -> str | None:
    """The query-string parameter that carries a token (by name or by shape), else None."""
    for name, value in params:
        if name.lower() in {"token", "access_token", "api_key", "apikey", "key", "auth"}:
            return name
        if TOKEN_PREFIX in value and _TOKEN.search(value):
            return name
    return None
