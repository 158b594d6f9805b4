"""Alembic environment: runs on the connection the ledger hands over."""

from alembic import context

from neo_assets.store.ledger_schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
