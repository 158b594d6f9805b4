"""The digest of the rules a git envelope was listed with, so an envelope at the recorded
commit under the recorded rules is reused (sources/rules/envelope_reuse.py). Added when
missing; old rows read "" and never match.

Revision ID: 0006
Revises: 0005"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("envelopes")}
    if "rules" not in have:
        op.add_column(
            "envelopes", sa.Column("rules", sa.String(64), nullable=False, server_default="")
        )


def downgrade() -> None:
    # Code that reads the column needs it; an older ledger keeps it too.
    return None
