"""The ledger's API token table: one row per issued token, its hash only; known to
``ledger_schema.metadata`` once imported; the migration ``0009_tokens``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("token_hash", sa.String(64), nullable=False),  # sha256 of the whole token
    sa.Column("tenant_id", sa.String(64), nullable=False),
    sa.Column("repos", sa.Text, nullable=False),  # JSON list; [] = every repo
    sa.Column("name", sa.String(200), nullable=False, server_default=""),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float),
    sa.Column("expires_at", sa.Float),  # None: never (0013)
    sa.Column("revoked_reason", sa.String(200), nullable=False, server_default=""),
)
