"""Columns for reuse by blob: which object each declared chunk came from, and the
chunking identity of a declared generation.

They joined the live schema after 0001, which creates its tables from that schema, so a
ledger first migrated before them lacked both and every sweep failed on it ("no such
column: declared_generations.chunking"). Added here when missing; a ledger created
since already has them. Old rows read as "nothing reusable": an empty chunking identity
never matches, a NULL blob never equals one, so the next sweep re-parses and records.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def _columns() -> dict[str, sa.Column]:
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    return {
        "declared_generations": sa.Column(
            "chunking", sa.String(128), nullable=False, server_default=""
        ),
        "declared_chunks": sa.Column("blob", sa.String(64)),
    }


def _has(table: str, column: str) -> bool:
    return column in {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    for table, column in _columns().items():
        if not _has(table, column.name):
            op.add_column(table, column)


def downgrade() -> None:
    # Nothing to undo for a ledger created with the columns; an older one keeps them too
    # (dropping them would break the code that reads them).
    return None
