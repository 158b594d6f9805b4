"""The ledger's self-evaluations, the operators' quality decisions (``quality/records.py``;
the migration ``0016_quality``) and the parser serving each repo
(``quality/parser_switch.py``; ``0019_parser_serving``)."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import key_columns, metadata

retrieval_quality = sa.Table(
    "retrieval_quality",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(64), nullable=False),
    sa.Column("repo_slug", sa.String(128), nullable=False),
    # The embedding generation, or a parser switch's label (``quality.gate.parser_label``).
    sa.Column("generation", sa.String(200), nullable=False),
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
    sa.Column("generation", sa.String(200), primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("decided_by", sa.String(200), nullable=False),
    sa.Column("decided_at", sa.Float, nullable=False),
)

parser_serving = sa.Table(
    "parser_serving",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("parser_id", sa.String(64), nullable=False),
    sa.Column("parser_version", sa.String(64), nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
