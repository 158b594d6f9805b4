"""The ledger's self-evaluations and the operators' quality decisions
(``quality/records.py``); the migration ``0016_quality`` creates them."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

retrieval_quality = sa.Table(
    "retrieval_quality",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(64), nullable=False),
    sa.Column("repo_slug", sa.String(128), nullable=False),
    sa.Column("generation", sa.String(64), nullable=False),  # embedding generation
    sa.Column("revision", sa.String(128), nullable=False, server_default=""),
    sa.Column("question_set", sa.String(64), nullable=False),  # digest of the questions
    sa.Column("questions", sa.Integer, nullable=False),
    sa.Column("recall_at_1", sa.Float, nullable=False),
    sa.Column("recall_at_5", sa.Float, nullable=False),
    sa.Column("recall_at_10", sa.Float, nullable=False),
    sa.Column("mrr_at_10", sa.Float, nullable=False),
    sa.Column("evaluated_at", sa.Float, nullable=False),
    sa.Index("ix_retrieval_quality_repo", "tenant_id", "repo_slug", "generation"),
)

quality_decisions = sa.Table(
    "quality_decisions",
    metadata,
    sa.Column("tenant_id", sa.String(64), primary_key=True),
    sa.Column("generation", sa.String(64), primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("decided_by", sa.String(200), nullable=False),
    sa.Column("decided_at", sa.Float, nullable=False),
)
