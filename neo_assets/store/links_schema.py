"""The ledger's link tables: a repo's related-chunk links and the set they belong to, known
to ``ledger_schema.metadata`` once imported; the migration ``0002_links``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import key_columns, metadata

# One row per (chunk, link kind): its kept links, best first, as JSON ``[[id, weight], ...]``.
# A row per link would be 20-40x the rows, and writing and deleting them dominated a
# repo's links run. Both ends belong to the same tenant repo (links are computed per
# repo); tenant_id is stored so every read can be scoped by it.
chunk_links = sa.Table(
    "chunk_links",
    metadata,
    *key_columns("tenant_id", "repo_slug", "chunk_id"),
    sa.Column("link_kind", sa.String(16), primary_key=True),  # temporal / semantic
    sa.Column("neighbours", sa.Text, nullable=False),
    sa.Index("ix_chunk_links_chunk", "tenant_id", "chunk_id"),
)

# One row per repo: which declared generation the links were computed from, and with what.
chunk_link_sets = sa.Table(
    "chunk_link_sets",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("revision", sa.String(128), nullable=False),
    sa.Column("generation_recorded_at", sa.Float, nullable=False),
    sa.Column("computed_at", sa.Float, nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False),  # rows the passes saw
    sa.Column("temporal_links", sa.Integer, nullable=False),
    sa.Column("semantic_links", sa.Integer, nullable=False),
    sa.Column("params", sa.Text),  # JSON: window, caps, threshold
)
