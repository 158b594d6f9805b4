"""The ledger's code-index tables: ``code_indexes`` (one file map per repo revision,
published last; migration ``0014_code_tools``) and ``code_index_files`` (one row per file
content, so a revision writes only what changed; ``0018_code_index_files``)."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import key_columns, metadata

code_indexes = sa.Table(
    "code_indexes",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("revision", sa.String(128), primary_key=True),
    # sha256 over the chunking identity and every (path, blob): what the index was built from
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),  # "git" or "dir": how files are read
    sa.Column("files", sa.Integer, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),  # zlib(header + file map)
    sa.Column("created_at", sa.Float, nullable=False),
)

code_index_files = sa.Table(
    "code_index_files",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    # sha256 over the index format, the chunking identity, the path and the blob: the
    # record depends on the content and on the language the path gives it
    sa.Column("file_key", sa.String(64), primary_key=True),
    sa.Column("blob", sa.String(64), nullable=False),
    sa.Column("record", sa.LargeBinary, nullable=False),  # zlib(JSON): rules.file_record
)
