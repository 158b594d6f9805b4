"""The code tools' index: ``code_indexes`` (symbols, identifiers and the file map of one
repo at one revision, written by the sweep's chunk stage).

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    # Spelled out here (not taken from code_tools/schema) so later schema edits never
    # change what this revision created.
    if "code_indexes" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "code_indexes",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("repo_slug", sa.String(64), primary_key=True),
        sa.Column("revision", sa.String(128), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("files", sa.Integer, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("code_indexes")
