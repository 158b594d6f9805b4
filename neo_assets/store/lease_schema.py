"""The ledger's lease table: one row per key, the current (or last) holder and its expiry,
known to ``ledger_schema.metadata`` once imported; the migration ``0004_leases``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    # Fencing token: grows by one each time a different holder takes the key.
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    # Where the holder runs (host, pid), for the operator reading a stuck lease.
    sa.Column("detail", sa.Text),
)
