"""Health: canary records and the collection freeze record.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
# TODO lead: "0002", together with 0002_links -> "0001" and 0004_leases -> "0003". Until
# then the chain is 0001 -> 0004 -> 0003 -> 0002: a second child of 0001 would make two
# heads, and the ledger's `upgrade head` refuses to run with two heads.
down_revision = "0002"


def upgrade() -> None:
    # Spelled out here (not taken from health_schema) so later schema edits never change
    # what this revision created.
    op.create_table(
        "canary_records",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("observed_at", sa.Float, nullable=False),
        sa.Column("healthy", sa.Boolean, nullable=False),
        sa.Column("code", sa.String(80)),
        sa.Column("failure_code", sa.String(80)),
        sa.Column("cause_code", sa.String(80)),
        sa.Column("operation_label", sa.String(120), nullable=False),
        sa.Column("timeout_ms", sa.Integer, nullable=False),
        sa.Column("elapsed_ms", sa.Float, nullable=False),
        sa.Column("dimension", sa.Integer),
        sa.Column("expected_dimension", sa.Integer, nullable=False),
        sa.Column("provider", sa.String(80), nullable=False),
        sa.Column("model", sa.String(300), nullable=False),
        sa.Column("endpoint", sa.String(500)),
        sa.Column("consecutive_failures", sa.Integer, nullable=False),
        sa.Column("retry_at", sa.Float),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_canary_records_observed_at", "canary_records", ["observed_at"])
    op.create_table(
        "collection_freeze",
        sa.Column("collection", sa.String(200), primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("circuit_streak", sa.Integer, nullable=False),
        sa.Column("frozen_at", sa.Float),
        sa.Column("trigger", sa.String(80)),
        sa.Column("trigger_detail", sa.Text),
        sa.Column("attempts", sa.Integer),
        sa.Column("next_probe_at", sa.Float),
        sa.Column("last_probe_at", sa.Float),
        sa.Column("last_probe", sa.Text),
        sa.Column("lifted_at", sa.Float),
        sa.Column("lifted_by", sa.String(40)),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("collection_freeze")
    op.drop_index("ix_canary_records_observed_at", table_name="canary_records")
    op.drop_table("canary_records")
