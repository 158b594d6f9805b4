"""When the inputs beside a repo's last attempt were recorded: ``repo_state.attempt_inputs_at``.
The due rule trusts a failed repo's recorded inputs only when this equals
``last_attempt_at`` (without it a failing sweep whose declaration "moved" relaunched every
tick). Added when missing; a failed repo with NULL reads "unobserved" and is swept once.

Revision ID: 0007
Revises: 0006"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("repo_state")}
    if "attempt_inputs_at" not in have:
        op.add_column("repo_state", sa.Column("attempt_inputs_at", sa.Float))


def downgrade() -> None:
    # Code that reads the column needs it; an older ledger keeps it too.
    return None
