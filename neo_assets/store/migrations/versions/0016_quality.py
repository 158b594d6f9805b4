"""Self-evaluations and quality decisions: ``retrieval_quality``, ``quality_decisions``.
Added when missing.

Revision ID: 0016
Revises: 0015"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"


def upgrade() -> None:
    # Spelled out (not taken from quality_schema) so later schema edits never change this.
    have = set(sa.inspect(op.get_bind()).get_table_names())
    if "retrieval_quality" not in have:
        op.create_table(
            "retrieval_quality",
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("tenant_id", sa.String(64), nullable=False),
            sa.Column("repo_slug", sa.String(128), nullable=False),
            sa.Column("generation", sa.String(64), nullable=False),
            sa.Column("revision", sa.String(128), nullable=False, server_default=""),
            sa.Column("question_set", sa.String(64), nullable=False),
            sa.Column("questions", sa.Integer, nullable=False),
            sa.Column("recall_at_1", sa.Float, nullable=False),
            sa.Column("recall_at_5", sa.Float, nullable=False),
            sa.Column("recall_at_10", sa.Float, nullable=False),
            sa.Column("mrr_at_10", sa.Float, nullable=False),
            sa.Column("evaluated_at", sa.Float, nullable=False),
        )
        op.create_index(
            "ix_retrieval_quality_repo",
            "retrieval_quality",
            ["tenant_id", "repo_slug", "generation"],
        )
    if "quality_decisions" not in have:
        op.create_table(
            "quality_decisions",
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("generation", sa.String(64), primary_key=True),
            sa.Column("reason", sa.Text, nullable=False),
            sa.Column("decided_by", sa.String(200), nullable=False),
            sa.Column("decided_at", sa.Float, nullable=False),
        )


def downgrade() -> None:
    op.drop_table("quality_decisions")
    op.drop_index("ix_retrieval_quality_repo", "retrieval_quality")
    op.drop_table("retrieval_quality")
