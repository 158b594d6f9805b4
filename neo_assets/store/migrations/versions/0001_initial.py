"""The initial ledger: config versions, repo state, envelopes, declared generations,
fences and strikes.

Revision ID: 0001
Revises:
"""

from alembic import op

from neo_assets.store import ledger_schema as s

revision = "0001"
down_revision = None

_TABLES = [
    s.tenant_config_versions,
    s.repo_state,
    s.envelopes,
    s.envelope_paths,
    s.declared_generations,
    s.declared_chunks,
    s.fences,
    s.strikes,
]


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        table.create(bind, checkfirst=True)


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(_TABLES):
        table.drop(bind, checkfirst=True)
