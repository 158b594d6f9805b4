"""The ledger's records of what a sweep listed and declared: each repo's latest complete
envelope (its paths) and its declared generation (path -> chunk ids). Mixed into
``Ledger`` (``store/ledger.py``); every write commits before returning."""

from collections.abc import Iterable, Mapping
from itertools import starmap
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger_rows import first_row, replace_row, repo_rows


def _observed_time(value: Any) -> float | None:
    """A change time as stored: None for unobserved (a frame's NaN included)."""
    if value is None:
        return None
    value = float(value)
    return None if value != value else value


# Paths per DELETE ... IN (...): well under every backend's limit on bound parameters.
_DELETE_BATCH = 500
_INSERT_BATCH = 5000


def _insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows: on SQLite through the driver's executemany (SQLAlchemy's per-row
    parameter handling cost more than the insert), elsewhere through SQLAlchemy, whose
    Postgres path batches the rows into few statements."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(sa.insert(table), rows)
        return
    columns = list(rows[0])
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    )
    conn.exec_driver_sql(sql, [tuple(r[c] for c in columns) for r in rows])


def _envelope_head(conn: sa.Connection, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
    """The repo's recorded envelope row (revision, kind, recorded_at, rules), or None."""
    query = sa.select(t.envelopes).where(repo_rows(t.envelopes, tenant_id, repo_slug))
    head = conn.execute(query).mappings().first()
    return None if head is None else dict(head)


def _replace_repo_rows(
    conn: sa.Connection,
    table: sa.Table,
    key: dict[str, str],
    rows: list[dict[str, Any]],
    path_column: str,
    paths: Iterable[str] | None,
) -> None:
    """The repo's rows of ``table`` replaced by ``rows``: all of them, or with ``paths``
    only those of these paths (``path_column``)."""
    scope = repo_rows(table, **key)
    if paths is None:
        conn.execute(sa.delete(table).where(scope))
    else:
        gone = sorted(set(paths))
        for start in range(0, len(gone), _DELETE_BATCH):
            batch = gone[start : start + _DELETE_BATCH]
            conn.execute(sa.delete(table).where(scope, table.c[path_column].in_(batch)))
    for start in range(0, len(rows), _INSERT_BATCH):
        _insert_rows(conn, table, rows[start : start + _INSERT_BATCH])


class DeclarationRecords:
    """Envelopes and declared generations, on ``self.engine``."""

    engine: Engine

    # ------------------------------------------------------------------ envelopes
    def record_envelope(
        self,
        tenant_id: str,
        repo_slug: str,
        *,
        revision: str,
        kind: str,
        entries: Iterable[Mapping[str, Any]],
        now: float,
        rules: str = "",
        replacing: Iterable[str] | None = None,
    ) -> None:
        """Replace the repo's latest complete envelope; ``rules``: the digest of the rules
        that listed it ("" when none may reuse it). With ``replacing``, ``entries`` are
        only the changed paths and ``replacing`` the recorded ones they replace or that
        are gone: the rest stays."""
        key = {"tenant_id": tenant_id, "repo_slug": repo_slug}
        rows = [
            {
                **key,
                "path": e["path"],
                "yielded": bool(e["yielded"]),
                "blob": e.get("blob"),
                "size": None if e.get("size") is None else int(e["size"]),
                "skip_reason": e.get("skip_reason"),
                "changed_at": _observed_time(e.get("changed_at")),
            }
            for e in entries
        ]
        gone = None if replacing is None else set(replacing) | {r["path"] for r in rows}
        with self.engine.begin() as conn:
            _replace_repo_rows(conn, t.envelope_paths, key, rows, "path", gone)
            head = {"revision": revision, "kind": kind, "recorded_at": now, "rules": rules}
            replace_row(conn, t.envelopes, **key, **head)

    def touch_envelope(
        self, tenant_id: str, repo_slug: str, *, now: float, rules: str | None = None
    ) -> None:
        """The same envelope was observed again: its recorded time moves (and the digest
        of its rules, when given: the same paths may have been listed by new rules)."""
        values: dict[str, Any] = {"recorded_at": now}
        if rules is not None:
            values["rules"] = rules
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(t.envelopes)
                .where(repo_rows(t.envelopes, tenant_id, repo_slug))
                .values(**values)
            )

    def envelope(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        """The latest complete envelope: revision, kind, recorded_at and its paths."""
        with self.engine.connect() as conn:
            head = _envelope_head(conn, tenant_id, repo_slug)
            if head is None:
                return None
            paths = conn.execute(
                sa.select(t.envelope_paths).where(repo_rows(t.envelope_paths, tenant_id, repo_slug))
            )
            # Plain rows zipped with the keys: a third of the cost of a mapping per row.
            keys = list(paths.keys())
            return {**head, "paths": [dict(zip(keys, p, strict=True)) for p in paths]}

    def envelope_rows(
        self, tenant_id: str, repo_slug: str
    ) -> tuple[dict[str, Any], list[tuple[Any, ...]]] | None:
        """The latest complete envelope as (head, path rows), each row ``(path, size, blob,
        yielded, skip_reason, changed_at)``: what a sweep rebuilds it from, without a dict
        per path (half the cost of ``envelope`` for 2,000 paths)."""
        p = t.envelope_paths.c
        with self.engine.connect() as conn:
            head = _envelope_head(conn, tenant_id, repo_slug)
            if head is None:
                return None
            rows = conn.execute(
                sa.select(p.path, p.size, p.blob, p.yielded, p.skip_reason, p.changed_at).where(
                    repo_rows(t.envelope_paths, tenant_id, repo_slug)
                )
            ).all()
            return head, [tuple(r) for r in rows]

    # ------------------------------------------------------------------ declared generation
    def record_generation(
        self,
        tenant_id: str,
        repo_slug: str,
        *,
        revision: str,
        parser_id: str,
        parser_version: str,
        declaration_digest: str,
        chunks: Iterable[DeclaredChunk],
        now: float,
        chunking: str = "",
        replace_paths: Iterable[str] | None = None,
    ) -> None:
        """Record the repo's declared generation (path -> chunk ids) in one transaction; with
        ``replace_paths`` only those paths' chunks are replaced."""
        key = {"tenant_id": tenant_id, "repo_slug": repo_slug}
        rows = [
            {
                **key,
                "chunk_id": c.chunk_id,
                "source_path": c.source_path,
                "kind": c.kind,
                "name": c.name,
                "blob": c.blob,
            }
            for c in chunks
        ]
        with self.engine.begin() as conn:
            _replace_repo_rows(conn, t.declared_chunks, key, rows, "source_path", replace_paths)
            replace_row(
                conn,
                t.declared_generations,
                **key,
                revision=revision,
                parser_id=parser_id,
                parser_version=parser_version,
                declaration_digest=declaration_digest,
                chunking=chunking,
                recorded_at=now,
            )

    def declared_generation(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        table = t.declared_generations
        return first_row(
            self.engine, sa.select(table).where(repo_rows(table, tenant_id, repo_slug))
        )

    def declared_chunks(self, tenant_id: str, repo_slug: str) -> list[DeclaredChunk]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    t.declared_chunks.c.chunk_id,
                    t.declared_chunks.c.source_path,
                    t.declared_chunks.c.kind,
                    t.declared_chunks.c.name,
                    t.declared_chunks.c.blob,
                ).where(repo_rows(t.declared_chunks, tenant_id, repo_slug))
            )
            # Rows are tuples already: attribute access on 8,000 Rows cost more than the query.
            return list(starmap(DeclaredChunk, rows.all()))
