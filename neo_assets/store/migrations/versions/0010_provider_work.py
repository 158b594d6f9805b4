"""The provider-work table: the abandoned-work counter of ledger-wide provider slots.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    # Spelled out here (not taken from slots_schema) so later schema edits never change
    # what this revision created; added only when missing, like 0007.
    if "provider_work" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "provider_work",
        sa.Column("provider_key", sa.String(64), primary_key=True),
        sa.Column("abandoned", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("provider_work")
