"""API tokens in the ledger: issue (the token leaves once, its hash stays), list, revoke,
and the records a request is verified against (read on every request, so a revocation
takes effect at once)."""

import json
import secrets
from typing import Any

import sqlalchemy as sa

from neo_assets.serve.rules.tokens import TokenRecord, format_token, token_hash
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import api_tokens


def _record(row: Any) -> TokenRecord:
    return TokenRecord(
        id=row["id"],
        token_hash=row["token_hash"],
        tenant_id=row["tenant_id"],
        repos=tuple(json.loads(row["repos"] or "[]")),
        name=row["name"] or "",
        created_at=float(row["created_at"]),
        revoked_at=None if row["revoked_at"] is None else float(row["revoked_at"]),
        expires_at=None if row.get("expires_at") is None else float(row["expires_at"]),
        revoked_reason=row.get("revoked_reason") or "",
    )


def issue_token(
    ledger: Ledger,
    tenant_id: str,
    repos: list[str],
    name: str,
    now: float,
    life_s: float | None = None,
) -> tuple[TokenRecord, str]:
    """A new token for ``tenant_id`` (``repos``: its subset, [] = all): the record and the
    token itself, which is never stored and cannot be shown again."""
    token_id = secrets.token_hex(8)
    token = format_token(token_id, secrets.token_urlsafe(32))
    values = {
        "id": token_id,
        "token_hash": token_hash(token),
        "tenant_id": tenant_id,
        "repos": json.dumps(sorted(set(repos))),
        "name": name,
        "created_at": now,
        "revoked_at": None,
        "expires_at": None if life_s is None else now + life_s,
        "revoked_reason": "",
    }
    with ledger.engine.begin() as conn:
        conn.execute(sa.insert(api_tokens).values(**values))
    return _record(values), token


def list_tokens(ledger: Ledger) -> list[TokenRecord]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(api_tokens).order_by(api_tokens.c.tenant_id, api_tokens.c.created_at)
        ).mappings()
        return [_record(r) for r in rows]


def token_record(ledger: Ledger, token_id: str) -> TokenRecord | None:
    with ledger.engine.connect() as conn:
        row = (
            conn.execute(sa.select(api_tokens).where(api_tokens.c.id == token_id))
            .mappings()
            .first()
        )
    return None if row is None else _record(row)


def revoke_token(ledger: Ledger, token_id: str, now: float) -> bool:
    """Revoke ``token_id``; False when there is no such token. Revoking twice keeps the
    first time."""
    with ledger.engine.begin() as conn:
        found = conn.execute(
            sa.select(api_tokens.c.revoked_at).where(api_tokens.c.id == token_id)
        ).first()
        if found is None:
            return False
        if found[0] is None:
            conn.execute(
                sa.update(api_tokens).where(api_tokens.c.id == token_id).values(revoked_at=now)
            )
    return True


TENANT_REMOVED = "its tenant was removed from the tenants file"


def revoke_tenant_tokens(ledger: Ledger, tenant_ids: list[str], now: float) -> int:
    """Revoke every live token of ``tenant_ids`` (tenants no longer declared), so a later
    tenant of the same id does not inherit them. Returns how many were revoked."""
    if not tenant_ids:
        return 0
    with ledger.engine.begin() as conn:
        done = conn.execute(
            sa.update(api_tokens)
            .where(api_tokens.c.tenant_id.in_(tenant_ids), api_tokens.c.revoked_at.is_(None))
            .values(revoked_at=now, revoked_reason=TENANT_REMOVED)
        )
    return int(done.rowcount or 0)
