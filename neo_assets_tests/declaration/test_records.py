"""The ledger's last good declaration of each tenant (declaration/records.py)."""

from pathlib import Path

import sqlalchemy as sa

from neo_assets.declaration.records import last_good_declarations, record_good_declaration
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import tenant_declarations


def test_the_last_good_declaration_round_trips_and_changes_only_with_its_digest(
    tmp_path: Path,
) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    try:
        plain = {"id": "acme", "repos": [{"slug": "w", "path": "/r/w"}]}
        assert last_good_declarations(ledger) == {}
        assert record_good_declaration(ledger, "acme", "d" * 64, plain, 1.0)
        assert not record_good_declaration(ledger, "acme", "d" * 64, plain, 2.0)
        assert last_good_declarations(ledger) == {"acme": plain}
        newer = {"id": "acme", "repos": []}
        assert record_good_declaration(ledger, "acme", "e" * 64, newer, 3.0)
        assert last_good_declarations(ledger) == {"acme": newer}
        # A torn row (not JSON, or another tenant's declaration) reads as unobserved.
        with ledger.engine.begin() as conn:
            conn.execute(
                sa.insert(tenant_declarations).values(
                    tenant_id="globex", digest="f" * 64, declaration="{torn", recorded_at=4.0
                )
            )
            conn.execute(
                sa.insert(tenant_declarations).values(
                    tenant_id="initech",
                    digest="f" * 64,
                    declaration='{"id": "acme", "repos": []}',
                    recorded_at=4.0,
                )
            )
        assert set(last_good_declarations(ledger)) == {"acme"}
    finally:
        ledger.dispose()
