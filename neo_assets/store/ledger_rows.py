"""Statements the ledger's data-access modules share: a tenant repo's rows of a table, the
one row a query finds, and a row written in place of the one with its key."""

from typing import Any

import sqlalchemy as sa


def repo_rows(table: sa.Table, tenant_id: str, repo_slug: str) -> sa.ColumnElement[bool]:
    """The rows of one tenant repo in ``table``."""
    return sa.and_(table.c.tenant_id == tenant_id, table.c.repo_slug == repo_slug)


def first_row(engine: sa.Engine, query: sa.Select) -> dict[str, Any] | None:
    """The first row ``query`` finds, as a dict, or None."""
    with engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return None if row is None else dict(row)


def replace_row(conn: sa.Connection, table: sa.Table, **row: Any) -> None:
    """Write ``row`` in place of the one with its primary key (delete, then insert: the
    same statements on every backend)."""
    conn.execute(sa.delete(table).where(*(c == row[c.name] for c in table.primary_key)))
    conn.execute(sa.insert(table).values(**row))


def write_row(engine: sa.Engine, table: sa.Table, **row: Any) -> None:
    """``replace_row`` in a transaction of its own, committed before returning."""
    with engine.begin() as conn:
        replace_row(conn, table, **row)
