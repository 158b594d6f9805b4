"""The parser serving each repo: ``parser_serving`` (``quality/parser_switch.py``), and the
quality label columns widened for a parser switch's labels.

Revision ID: 0019
Revises: 0018"""

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
