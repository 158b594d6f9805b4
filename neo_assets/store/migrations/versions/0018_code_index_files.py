"""The code index per file: ``code_index_files`` (one row per indexed file content, shared
by the revisions whose map in ``code_indexes`` names it), so a sweep writes only the files
a commit changed.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    # Spelled out here (not taken from code_tools/schema) so later schema edits never
    # change what this revision created. Indexes of the older one-payload form read as
    # absent (their format differs) and are rebuilt by the repo's next sweep.
    if "code_index_files" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "code_index_files",
        sa.Column("tenant_id", sa.String(64), primary_key=True),
        sa.Column("repo_slug", sa.String(64), primary_key=True),
        sa.Column("file_key", sa.String(64), primary_key=True),
        sa.Column("blob", sa.String(64), nullable=False),
        sa.Column("record", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("code_index_files")
