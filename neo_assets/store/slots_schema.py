"""The ledger's provider-work table: per provider, how often work was abandoned at it.

The provider-wide request slots themselves are Postgres advisory locks held by the
requests' connections (``store/ledger_slots.py``), not rows; only the abandoned-work
counter needs a row. The migration ``0010_provider_work`` creates it.
"""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

provider_work = sa.Table(
    "provider_work",
    metadata,
    sa.Column("provider_key", sa.String(64), primary_key=True),
    sa.Column("abandoned", sa.BigInteger, nullable=False, server_default="0"),
)
