"""The ledger's tables, every capability's (SQLAlchemy Core). The migrations in
``migrations/`` create them; each but ``0001`` spells its tables out, so an edit here never
changes a migration."""

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

# The last good declaration of each tenant (``declaration/in_force.py``; 0012).
tenant_declarations = sa.Table(
    "tenant_declarations",
    metadata,
    sa.Column("tenant_id", sa.String(64), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),  # Tenant.declaration_digest()
    sa.Column("declaration", sa.Text, nullable=False),  # canonical JSON of Tenant.to_plain()
    sa.Column("recorded_at", sa.Float, nullable=False),
)

# One row per issued API token, its hash only (``serve/tokens.py``; 0009).
api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("token_hash", sa.String(64), nullable=False),  # sha256 of the whole token
    sa.Column("tenant_id", sa.String(64), nullable=False),
    sa.Column("repos", sa.Text, nullable=False),  # JSON list; [] = every repo
    sa.Column("name", sa.String(200), nullable=False, server_default=""),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float),
    sa.Column("expires_at", sa.Float),  # None: never (0013)
    sa.Column("revoked_reason", sa.String(200), nullable=False, server_default=""),
)

# The abandoned-work counter of the ledger-wide provider slots (the slots themselves are
# advisory locks, ``store/ledger_slots.py``; 0010).
provider_work = sa.Table(
    "provider_work",
    metadata,
    sa.Column("provider_key", sa.String(64), primary_key=True),
    sa.Column("abandoned", sa.BigInteger, nullable=False, server_default="0"),
)

# One row per lease key: the current (or last) holder and its expiry (``store/leases.py``;
# 0004).
leases = sa.Table(
    "leases",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    # Fencing token: grows by one each time a different holder takes the key.
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    # Where the holder runs (host, pid), for the operator reading a stuck lease.
    sa.Column("detail", sa.Text),
)

# ---- links: a repo's related-chunk links and the set they belong to (``links/store.py``;
# 0002).
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

# ---- health: canary records and the collection freeze record (``health/records.py``; 0003).
# One row per canary that actually probed (a cache hit writes nothing); pruned to the
# newest ``CANARY_RECORDS_KEPT`` by the data-access module.
canary_records = sa.Table(
    "canary_records",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("observed_at", sa.Float, nullable=False),
    sa.Column("healthy", sa.Boolean, nullable=False),
    sa.Column("code", sa.String(80)),
    sa.Column("failure_code", sa.String(80)),
    sa.Column("cause_code", sa.String(80)),
    sa.Column("operation_label", sa.String(120), nullable=False),
    sa.Column("timeout_ms", sa.Integer, nullable=False),
    sa.Column("elapsed_ms", sa.Float, nullable=False),
    sa.Column("dimension", sa.Integer),
    sa.Column("expected_dimension", sa.Integer, nullable=False),
    # The provider identity the record answers for (never a key or a secret).
    sa.Column("provider", sa.String(80), nullable=False),
    sa.Column("model", sa.String(300), nullable=False),
    sa.Column("endpoint", sa.String(500)),
    sa.Column("consecutive_failures", sa.Integer, nullable=False),
    sa.Column("retry_at", sa.Float),
    sa.Column("detail", sa.Text),
    sa.Index("ix_canary_records_observed_at", "observed_at"),
)

# One row per collection: its freeze state and the consecutive circuit-open sweep streak.
collection_freeze = sa.Table(
    "collection_freeze",
    metadata,
    sa.Column("collection", sa.String(200), primary_key=True),
    sa.Column("state", sa.String(20), nullable=False),  # clear / frozen / contained
    # Grows with every change of the freeze fields: writes are compare-and-set on it.
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("circuit_streak", sa.Integer, nullable=False),
    sa.Column("frozen_at", sa.Float),
    sa.Column("trigger", sa.String(80)),
    sa.Column("trigger_detail", sa.Text),  # JSON
    sa.Column("attempts", sa.Integer),
    sa.Column("next_probe_at", sa.Float),
    sa.Column("last_probe_at", sa.Float),
    sa.Column("last_probe", sa.Text),  # JSON: the last re-probe's receipt
    sa.Column("lifted_at", sa.Float),
    sa.Column("lifted_by", sa.String(40)),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# ---- quality: self-evaluations, the operators' quality decisions (``quality/records.py``;
# 0016) and the parser serving each repo (``quality/parser_switch.py``; 0019).
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

# ---- code tools: one file map per repo revision, published last (0014), and one row per
# file content, so a revision writes only what changed (0018) (``code_tools/index_store.py``;
# a record is ``code_tools.rules.index.file_record``).
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
    sa.Column("record", sa.LargeBinary, nullable=False),  # zlib(JSON of a file_record)
)
