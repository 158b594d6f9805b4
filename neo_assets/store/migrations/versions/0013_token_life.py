"""Tokens with a life: ``api_tokens.expires_at`` (None: never) and ``revoked_reason`` (a
token whose tenant left is revoked, so a later tenant of that id does not inherit it).

Revision ID: 0013
Revises: 0012"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "api_tokens" not in inspector.get_table_names():
        return
    have = {c["name"] for c in inspector.get_columns("api_tokens")}
    with op.batch_alter_table("api_tokens") as batch:
        if "expires_at" not in have:
            batch.add_column(sa.Column("expires_at", sa.Float, nullable=True))
        if "revoked_reason" not in have:
            batch.add_column(
                sa.Column("revoked_reason", sa.String(200), nullable=False, server_default="")
            )


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("revoked_reason")
        batch.drop_column("expires_at")
