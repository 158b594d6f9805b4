"""The ledger's code-index table: one row per repo per indexed revision, written whole in
one transaction (so a reader never sees half an index). Migration ``0014_code_tools``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

code_indexes = sa.Table(
    "code_indexes",
    metadata,
    sa.Column("tenant_id", sa.String(64), primary_key=True),
    sa.Column("repo_slug", sa.String(64), primary_key=True),
    sa.Column("revision", sa.String(128), primary_key=True),
    # sha256 over the chunking identity and every (path, blob): what the index was built from
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),  # "git" or "dir": how files are read
    sa.Column("files", sa.Integer, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),  # zlib(JSON)
    sa.Column("created_at", sa.Float, nullable=False),
)
