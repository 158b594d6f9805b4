"""Columns for reuse by blob: each declared chunk's object and a generation's chunking
identity. Added when missing (a ledger first migrated before they joined 0001's schema
lacks them); old rows read as "nothing reusable", so the next sweep re-parses.

Revision ID: 0005
Revises: 0004"""

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
