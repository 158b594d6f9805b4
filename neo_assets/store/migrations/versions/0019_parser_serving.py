"""The parser serving each repo: ``parser_serving``; quality labels widened.

A repo's parser-version switch is held by the quality gate until its self-evaluation
is not worse than the serving parser's; this table names the parser whose chunks serve
(``quality/parser_switch.py``). A parser switch's self-evaluations and decisions are
recorded under labels longer than an embedding generation's digest, so those columns
widen (SQLite does not enforce the length).

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"


def upgrade() -> None:
    # Spelled out (not taken from quality_schema) so later schema edits never change this.
    bind = op.get_bind()
    if "parser_serving" not in sa.inspect(bind).get_table_names():
        op.create_table(
            "parser_serving",
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("repo_slug", sa.String(64), primary_key=True),
            sa.Column("parser_id", sa.String(64), nullable=False),
            sa.Column("parser_version", sa.String(64), nullable=False),
            sa.Column("updated_at", sa.Float, nullable=False),
        )
    if bind.dialect.name != "sqlite":
        for table in ("retrieval_quality", "quality_decisions"):
            op.alter_column(table, "generation", type_=sa.String(200), existing_type=sa.String(64))


def downgrade() -> None:
    op.drop_table("parser_serving")
