"""Read and write the last good declaration of each tenant (``store/ledger_schema.py``)."""

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from neo_assets.core.ids.config_digest import canonical_json
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import tenant_declarations as td


def last_good_declarations(ledger: Ledger) -> dict[str, dict[str, Any]]:
    """tenant id -> its last good plain declaration. A row that does not read back as a
    mapping with that id is skipped (unobserved), never guessed at."""
    with ledger.engine.connect() as conn:
        rows = conn.execute(sa.select(td.c.tenant_id, td.c.declaration)).all()
    out: dict[str, dict[str, Any]] = {}
    for tenant_id, raw in rows:
        try:
            plain = json.loads(raw)
        except (TypeError, ValueError):
            continue
        if isinstance(plain, dict) and plain.get("id") == tenant_id:
            out[tenant_id] = plain
    return out


def record_good_declaration(
    ledger: Ledger, tenant_id: str, digest: str, plain: Mapping[str, Any], now: float
) -> bool:
    """Remember ``plain`` as the tenant's last good declaration; True when it changed."""
    text = canonical_json(dict(plain))
    try:
        return _record(ledger, tenant_id, digest, text, now)
    except sa.exc.IntegrityError:  # another process recorded it at the same moment
        return False


def _record(ledger: Ledger, tenant_id: str, digest: str, text: str, now: float) -> bool:
    with ledger.engine.begin() as conn:
        found = conn.execute(sa.select(td.c.digest).where(td.c.tenant_id == tenant_id)).first()
        if found is not None and found.digest == digest:
            return False
        if found is None:
            conn.execute(
                sa.insert(td).values(
                    tenant_id=tenant_id, digest=digest, declaration=text, recorded_at=now
                )
            )
        else:
            conn.execute(
                sa.update(td)
                .where(td.c.tenant_id == tenant_id)
                .values(digest=digest, declaration=text, recorded_at=now)
            )
    return True
