"""Secrets never leave the repo: ``repo_state.secret_census``, the census of the chunks
fenced ``secret`` (issue 36), beside the two other fence families' censuses.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "repo_state" not in inspector.get_table_names():
        return
    have = {c["name"] for c in inspector.get_columns("repo_state")}
    if "secret_census" not in have:
        with op.batch_alter_table("repo_state") as batch:
            batch.add_column(sa.Column("secret_census", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repo_state") as batch:
        batch.drop_column("secret_census")
