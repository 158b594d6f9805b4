"""API tokens of the query service (hashed; tenant and repo subset per token).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    # Spelled out here (not taken from tokens_schema) so later schema edits never change
    # what this revision created; added only when missing, like 0007.
    if "api_tokens" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("repos", sa.Text, nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
