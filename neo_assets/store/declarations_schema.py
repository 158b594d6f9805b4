"""The ledger's last good declaration of each tenant (``declaration/in_force.py``), known to
``ledger_schema.metadata`` once imported; the migration ``0012_tenant_declarations``."""

import sqlalchemy as sa

from neo_assets.store.ledger_schema import metadata

tenant_declarations = sa.Table(
    "tenant_declarations",
    metadata,
    sa.Column("tenant_id", sa.String(64), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),  # Tenant.declaration_digest()
    sa.Column("declaration", sa.Text, nullable=False),  # canonical JSON of Tenant.to_plain()
    sa.Column("recorded_at", sa.Float, nullable=False),
)
