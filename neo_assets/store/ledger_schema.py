"""The ledger's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

import sqlalchemy as sa

metadata = sa.MetaData()


def key_columns(*names: str) -> list[sa.Column]:
    """A table's leading primary-key columns (tenant_id, repo_slug, generation, chunk_id,
    ...): every id the ledger keys rows by is a string of at most 64 characters."""
    return [sa.Column(name, sa.String(64), primary_key=True) for name in names]


tenant_config_versions = sa.Table(
    "tenant_config_versions",
    metadata,
    sa.Column("tenant_id", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
)

repo_state = sa.Table(
    "repo_state",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("last_ingested_rev", sa.String(128)),
    sa.Column("last_attempted_rev", sa.String(128)),
    sa.Column("declaration_digest", sa.String(64)),
    sa.Column("embedding_generation", sa.String(64)),
    sa.Column("last_outcome", sa.String(16)),
    sa.Column("deferred_cause_code", sa.String(64)),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_attempt_at", sa.Float),
    sa.Column("next_due_at", sa.Float),
    sa.Column("recovery_episode_opened_at", sa.Float),
    # The attempt whose inputs last_attempted_rev / declaration_digest /
    # embedding_generation are: equal to last_attempt_at when they are the last attempt's
    # own (the due rule compares a failed repo with those; 0007).
    sa.Column("attempt_inputs_at", sa.Float),
    sa.Column("content_poison_census", sa.Text),
    sa.Column("undeliverable_census", sa.Text),
    sa.Column("secret_census", sa.Text),  # 0017
    sa.Column("last_summary", sa.Text),
    sa.Column("rows", sa.Integer),
    sa.Column("updated_at", sa.Float),
)

envelopes = sa.Table(
    "envelopes",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("revision", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("recorded_at", sa.Float, nullable=False),
    # The digest of the rules a git envelope was listed with (sources/rules/envelope_reuse.py).
    sa.Column("rules", sa.String(64), nullable=False, server_default=""),
)

envelope_paths = sa.Table(
    "envelope_paths",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("yielded", sa.Boolean, nullable=False),
    sa.Column("blob", sa.String(64)),
    sa.Column("size", sa.BigInteger),
    sa.Column("skip_reason", sa.String(32)),
    sa.Column("changed_at", sa.Float),
)

declared_generations = sa.Table(
    "declared_generations",
    metadata,
    *key_columns("tenant_id", "repo_slug"),
    sa.Column("revision", sa.String(128), nullable=False),
    sa.Column("parser_id", sa.String(64), nullable=False),
    sa.Column("parser_version", sa.String(64), nullable=False),
    sa.Column("declaration_digest", sa.String(64), nullable=False),
    # Parser identity plus chunking settings: chunks of an unchanged blob are reused only
    # when this is unchanged too.
    sa.Column("chunking", sa.String(128), nullable=False, server_default=""),
    sa.Column("recorded_at", sa.Float, nullable=False),
)

declared_chunks = sa.Table(
    "declared_chunks",
    metadata,
    *key_columns("tenant_id", "repo_slug", "chunk_id"),
    sa.Column("source_path", sa.Text, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("blob", sa.String(64)),  # the object the chunk was parsed from
    sa.Index("ix_declared_chunks_path", "tenant_id", "repo_slug", "source_path"),
)

fences = sa.Table(
    "fences",
    metadata,
    *key_columns("tenant_id", "repo_slug", "generation", "chunk_id"),
    sa.Column("disposition", sa.String(32), nullable=False),
    sa.Column("reason_code", sa.String(64), nullable=False),
    sa.Column("receipt", sa.Text),
    sa.Column("observed_at", sa.Float, nullable=False),
)

strikes = sa.Table(
    "strikes",
    metadata,
    *key_columns("tenant_id", "repo_slug", "generation", "chunk_id"),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("receipt", sa.Text),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# One row per embedding generation the knowledge base has written (0008): where its rows
# live and what rebuilds its provider for queries (never an API key: keys come from the
# settings at query time). ``collection_name`` NULL: the un-suffixed collection of a
# knowledge base made before generations lived apart (its legacy generation).
embedding_generations = sa.Table(
    "embedding_generations",
    metadata,
    sa.Column("generation", sa.String(64), primary_key=True),
    sa.Column("collection_name", sa.String(128)),
    sa.Column("provider", sa.String(32)),
    sa.Column("model", sa.Text),
    sa.Column("base_url", sa.Text),
    sa.Column("dimensions", sa.Integer),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("reclaimed_at", sa.Float),
)

# Per repo and generation: building until a sweep at it completed, then complete (its
# collection holds a complete set for the repo); progress of the latest sweep at it.
repo_generations = sa.Table(
    "repo_generations",
    metadata,
    *key_columns("tenant_id", "repo_slug", "generation"),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("chunks", sa.Integer),
    sa.Column("present", sa.Integer),
    sa.Column("completed_at", sa.Float),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# One row per remote provider (kind, base URL, model) whose server named a cap on inputs
# per request (TEI's 413 "batch size 64 > maximum allowed batch size 32") (0010): every
# later sweep's lane starts at the cap instead of re-learning it with a refused request.
provider_batch_caps = sa.Table(
    "provider_batch_caps",
    metadata,
    sa.Column("provider_key", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("base_url", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("batch_cap", sa.Integer, nullable=False),
    sa.Column("learned_at", sa.Float, nullable=False),
    sa.Column("evidence", sa.Text),
)

# What a provider said about itself at its last contact (store/provider_limits.py): its
# limit per input and its tokenizer, part of the embedding generation (embedding/band.py).
provider_limits = sa.Table(
    "provider_limits",
    metadata,
    sa.Column("provider_key", sa.String(64), primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("base_url", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("limit_tokens", sa.Integer),
    sa.Column("limit_source", sa.Text, nullable=False),
    sa.Column("tokenizer", sa.String(64)),
    sa.Column("learned_limit", sa.Integer),
    sa.Column("chars_per_token", sa.Float),
    sa.Column("discovered_at", sa.Float, nullable=False),
)
