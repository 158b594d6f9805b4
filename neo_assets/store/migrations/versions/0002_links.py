"""Links: a repo's related-chunk links and the set they were computed as.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
# TODO lead: "0001", together with 0003_health -> "0002" and 0004_leases -> "0003".
# Until then this chains after the current head (0001 -> 0004 -> 0003): a second child of
# 0001 would make two heads, and the ledger's `upgrade head` refuses to run with two.
down_revision = "0001"


def upgrade() -> None:
    # Spelled out here (not taken from links_schema) so later schema edits never change
    # what this revision created.
    op.create_table(
        "chunk_links",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("repo_slug", sa.String(64), primary_key=True),
        sa.Column("chunk_id", sa.String(64), primary_key=True),
        sa.Column("link_kind", sa.String(16), primary_key=True),
        sa.Column("neighbours", sa.Text, nullable=False),
    )
    op.create_index("ix_chunk_links_chunk", "chunk_links", ["tenant_id", "chunk_id"])
    op.create_table(
        "chunk_link_sets",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("repo_slug", sa.String(64), primary_key=True),
        sa.Column("revision", sa.String(128), nullable=False),
        sa.Column("generation_recorded_at", sa.Float, nullable=False),
        sa.Column("computed_at", sa.Float, nullable=False),
        sa.Column("chunks", sa.Integer, nullable=False),
        sa.Column("temporal_links", sa.Integer, nullable=False),
        sa.Column("semantic_links", sa.Integer, nullable=False),
        sa.Column("params", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("chunk_link_sets")
    op.drop_index("ix_chunk_links_chunk", table_name="chunk_links")
    op.drop_table("chunk_links")
