"""When the inputs beside a repo's last attempt were recorded: ``repo_state.attempt_inputs_at``.

A failed sweep used to record its outcome, time and failure count but not what it was
attempted with, so the row kept the inputs of the last classified sweep and the due rule
compared the current declaration with those: after a ``ref:`` typo the declaration had
"moved" on every tick and the failing sweep was relaunched every minute. Failures now
record their inputs (the revision as seen, ``None`` when unreadable) with this column set
to the attempt's time; the rule trusts a failed repo's inputs only when it equals
``last_attempt_at``.

Added when missing (0001 builds its tables from the live schema, so a ledger created since
has it). Old rows read NULL: a failed repo among them reads as "unobserved" and is swept
once, and that sweep records its inputs; complete and deferred repos are unaffected.

Revision ID: 0007
Revises: 0006
"""

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
