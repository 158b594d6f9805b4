"""A provider's learned batch cap, remembered across sweeps: ``provider_batch_caps`` (keyed
by kind, base URL and model), so a new sweep process need not pay a refused request to
learn it again. Added when missing.

Revision ID: 0011
Revises: 0010"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    if "provider_batch_caps" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "provider_batch_caps",
        sa.Column("provider_key", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("base_url", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("batch_cap", sa.Integer, nullable=False),
        sa.Column("learned_at", sa.Float, nullable=False),
        sa.Column("evidence", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("provider_batch_caps")
