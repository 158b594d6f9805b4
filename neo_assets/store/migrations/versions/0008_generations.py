"""Embedding generations side by side: ``embedding_generations`` and ``repo_generations``.
A knowledge base made before keeps its one (un-suffixed) collection: every completed repo
is recorded complete at its generation there, so a model change migrates by the same
switch as any other. Added when missing.

Revision ID: 0008
Revises: 0007"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    bind = op.get_bind()
    have = set(sa.inspect(bind).get_table_names())
    # Spelled out (not taken from ledger_schema) so later schema edits never change this.
    if "embedding_generations" not in have:
        op.create_table(
            "embedding_generations",
            sa.Column("generation", sa.String(64), primary_key=True),
            sa.Column("collection_name", sa.String(128)),
            sa.Column("provider", sa.String(32)),
            sa.Column("model", sa.Text),
            sa.Column("base_url", sa.Text),
            sa.Column("dimensions", sa.Integer),
            sa.Column("created_at", sa.Float, nullable=False),
            sa.Column("reclaimed_at", sa.Float),
        )
    if "repo_generations" not in have:
        op.create_table(
            "repo_generations",
            sa.Column("tenant_id", sa.String(64), primary_key=True),
            sa.Column("repo_slug", sa.String(64), primary_key=True),
            sa.Column("generation", sa.String(64), primary_key=True),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("chunks", sa.Integer),
            sa.Column("present", sa.Integer),
            sa.Column("completed_at", sa.Float),
            sa.Column("updated_at", sa.Float, nullable=False),
        )
    _adopt_legacy(bind)


def _adopt_legacy(bind: sa.Connection) -> None:
    """Repos complete before generations lived apart: complete at their generation, in
    the legacy collection. Only when nothing is recorded yet (idempotent)."""
    if bind.execute(sa.text("SELECT COUNT(*) FROM embedding_generations")).scalar():
        return
    rows = bind.execute(
        sa.text(
            "SELECT tenant_id, repo_slug, embedding_generation, updated_at FROM repo_state "
            "WHERE last_outcome = 'complete' AND embedding_generation IS NOT NULL "
            "AND last_ingested_rev IS NOT NULL"
        )
    ).all()
    now = time.time()
    for generation in sorted({r[2] for r in rows}):
        bind.execute(
            sa.text(
                "INSERT INTO embedding_generations (generation, collection_name, created_at) "
                "VALUES (:g, NULL, :now)"
            ),
            {"g": generation, "now": now},
        )
    for tenant_id, repo_slug, generation, updated_at in rows:
        bind.execute(
            sa.text(
                "INSERT INTO repo_generations (tenant_id, repo_slug, generation, state, "
                "completed_at, updated_at) VALUES (:t, :r, :g, 'complete', :at, :now)"
            ),
            {"t": tenant_id, "r": repo_slug, "g": generation, "at": updated_at or now, "now": now},
        )


def downgrade() -> None:
    # Code that reads the tables needs them; an older ledger keeps them too.
    return None
