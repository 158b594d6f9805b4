"""What a provider said about itself at its last contact: ``provider_limits`` (limit per
input, tokenizer endpoint; keyed like ``provider_batch_caps``), read by every generation
digest instead of the network.

Revision ID: 0015
Revises: 0014"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    if "provider_limits" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "provider_limits",
        sa.Column("provider_key", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("base_url", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("limit_tokens", sa.Integer),
        sa.Column("limit_source", sa.Text, nullable=False),
        sa.Column("tokenizer", sa.String(64)),
        sa.Column("learned_limit", sa.Integer),
        sa.Column("chars_per_token", sa.Float),
        sa.Column("discovered_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("provider_limits")
