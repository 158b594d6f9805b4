"""Leases: a per-key holder with an expiry, so two processes never sweep one repo at once.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    # Spelled out here (not taken from lease_schema) so later schema edits never change
    # what this revision created.
    op.create_table(
        "leases",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("detail", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("leases")
