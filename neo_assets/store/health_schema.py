"""The ledger's health tables: canary records and the collection freeze record, known to
``ledger_schema.metadata`` once imported; the migration ``0003_health``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

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
