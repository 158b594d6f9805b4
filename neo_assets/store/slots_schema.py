"""The ledger's provider-work table: the abandoned-work counter of the ledger-wide provider
slots (the slots themselves are advisory locks, ``store/ledger_slots.py``); the migration
``0010_provider_work``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

provider_work = sa.Table(
    "provider_work",
    metadata,
    sa.Column("provider_key", sa.String(64), primary_key=True),
    sa.Column("abandoned", sa.BigInteger, nullable=False, server_default="0"),
)
