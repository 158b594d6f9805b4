"""The last good declaration of each tenant: ``tenant_declarations``, so a problem in one
tenant's block keeps that tenant's last good declaration in force (config versions keep
only digests). Added when missing.

Revision ID: 0012
Revises: 0011"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    # Spelled out (not taken from declarations_schema) so later schema edits never change this.
    if "tenant_declarations" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "tenant_declarations",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("declaration", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tenant_declarations")
