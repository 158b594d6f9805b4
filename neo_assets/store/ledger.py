"""The ledger: the project's durable state (SQLite by default, Postgres when shared).

Every write a decision depends on is committed before the method returns, so the
decision can be acted on. Records are read back as plain data; a torn or unreadable
value reads as None ("unobserved"), never as a smaller or default value.
"""

import contextlib
import fcntl
import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import starmap
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store import ledger_schema as t

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _observed_time(value: Any) -> float | None:
    """A change time as stored: None for unobserved (a frame's NaN included)."""
    if value is None:
        return None
    value = float(value)
    return None if value != value else value


# Paths per DELETE ... IN (...): well under every backend's limit on bound parameters.
_DELETE_BATCH = 500


def _insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows. On SQLite straight through the driver's executemany: there
    SQLAlchemy's handling of each row's parameters cost more than the insert itself
    (2,000 declared chunks, one wave of a first sweep: 30 ms against 13 ms). Elsewhere
    through SQLAlchemy, whose Postgres path batches the rows into few statements."""
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


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        # The file's path; of a SQLite URI (``file:/path?mode=ro&uri=true``) the part
        # between "file:" and the query.
        path = url.split("///", 1)[-1].removeprefix("file:").split("?", 1)[0]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            # WAL lets the webserver read while a run writes; busy_timeout waits for locks.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


# Any constant shared by every process of the project: the key of the advisory lock its
# migrations take on Postgres.
_MIGRATION_LOCK_KEY = 0x6E656F5F6C6467  # "neo_ldg"


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest alembic revision (idempotent).

    Processes opening a new ledger at once (the webserver, the daemon and a
    ``neo-assets sweep`` started together) would otherwise all run the migrations, and all
    but one fail creating tables that now exist. So one migrates while the others wait,
    then find the schema at head and do nothing: on Postgres under a transaction-scoped
    advisory lock, on a SQLite file under an exclusive lock on a file beside it."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with _sqlite_file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY}
            )
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """An exclusive lock on ``<ledger file>.migrate-lock`` (kept, empty) while migrating.
    pysqlite runs DDL outside a transaction, so SQLite's own locks do not serialize two
    migrations; a memory database is private to its process and needs none."""
    database = engine.url.database
    if engine.url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        yield
        return
    database = database.removeprefix("file:")  # a SQLite URI: see ``_engine``
    with open(f"{database}.migrate-lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _envelope_head(conn: sa.Connection, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
    """The repo's recorded envelope row (revision, kind, recorded_at, rules), or None."""
    e = t.envelopes.c
    head = (
        conn.execute(
            sa.select(t.envelopes).where(e.tenant_id == tenant_id, e.repo_slug == repo_slug)
        )
        .mappings()
        .first()
    )
    return None if head is None else dict(head)


def _loads(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None


class Ledger:
    """Durable state behind one engine. Construct with ``Ledger.open(url)``; whoever opens
    it disposes of it (``with Ledger.open(url) as ledger:`` does)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.closed = False

    @classmethod
    def open(cls, url: str) -> "Ledger":
        engine = _engine(url)
        migrate(engine)
        return cls(engine)

    def dispose(self) -> None:
        """Close the engine's pooled connections (a SQLite file is then no longer open)."""
        self.engine.dispose()
        self.closed = True

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.dispose()

    # ------------------------------------------------------------------ config versions
    def config_version(self, tenant_id: str, digest: str, now: float, *, tries: int = 20) -> int:
        """The tenant's configVersion for ``digest``: 1 at first, +1 on every change.

        Sweeps of the tenant's repos in other processes may record the next version at the
        same moment: the loser's insert hits the (tenant, version) key, and it reads again
        (the winner's version when the digest is the same, the one after it when not)."""
        for _ in range(tries - 1):
            with contextlib.suppress(sa.exc.IntegrityError):
                return self._record_config_version(tenant_id, digest, now)
        return self._record_config_version(tenant_id, digest, now)  # the last try raises

    def _record_config_version(self, tenant_id: str, digest: str, now: float) -> int:
        with self.engine.begin() as conn:
            latest = conn.execute(
                sa.select(t.tenant_config_versions.c.version, t.tenant_config_versions.c.digest)
                .where(t.tenant_config_versions.c.tenant_id == tenant_id)
                .order_by(t.tenant_config_versions.c.version.desc())
                .limit(1)
            ).first()
            if latest is not None and latest.digest == digest:
                return int(latest.version)
            version = 1 if latest is None else int(latest.version) + 1
            conn.execute(
                sa.insert(t.tenant_config_versions).values(
                    tenant_id=tenant_id, version=version, digest=digest, recorded_at=now
                )
            )
            return version

    def current_config_version(self, tenant_id: str) -> int | None:
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.select(sa.func.max(t.tenant_config_versions.c.version)).where(
                    t.tenant_config_versions.c.tenant_id == tenant_id
                )
            ).scalar()
        return None if value is None else int(value)

    # ------------------------------------------------------------------ repo state
    def repo_state(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.select(t.repo_state).where(
                        t.repo_state.c.tenant_id == tenant_id, t.repo_state.c.repo_slug == repo_slug
                    )
                )
                .mappings()
                .first()
            )
        return None if row is None else dict(row)

    def all_repo_states(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.repo_state).order_by(t.repo_state.c.tenant_id, t.repo_state.c.repo_slug)
            ).mappings()
            return [dict(r) for r in rows]

    def upsert_repo_state(self, tenant_id: str, repo_slug: str, **values: Any) -> None:
        """Write ``values`` into the repo's state row in one transaction."""
        with self.engine.begin() as conn:
            self._upsert_repo_state(conn, tenant_id, repo_slug, values)

    def _upsert_repo_state(
        self, conn: sa.Connection, tenant_id: str, repo_slug: str, values: Mapping[str, Any]
    ) -> None:
        key = (t.repo_state.c.tenant_id == tenant_id) & (t.repo_state.c.repo_slug == repo_slug)
        exists = conn.execute(sa.select(sa.literal(1)).where(key)).first() is not None
        if exists:
            if values:
                conn.execute(sa.update(t.repo_state).where(key).values(**values))
        else:
            conn.execute(
                sa.insert(t.repo_state).values(tenant_id=tenant_id, repo_slug=repo_slug, **values)
            )

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
        """Replace the repo's latest complete envelope (all paths, yielded or not);
        ``rules``: the digest of the rules that listed it ("" when none may reuse it).

        ``replacing``: when given, ``entries`` are only the paths that changed since the
        recorded envelope and ``replacing`` the recorded paths they replace or that are
        gone; every other recorded path stays as it is. After a one-file commit that is
        one row rewritten, not 2,000 (12 ms of a ~140 ms sweep)."""
        key_e = (t.envelopes.c.tenant_id == tenant_id) & (t.envelopes.c.repo_slug == repo_slug)
        key_p = (t.envelope_paths.c.tenant_id == tenant_id) & (
            t.envelope_paths.c.repo_slug == repo_slug
        )
        rows = [
            {
                "tenant_id": tenant_id,
                "repo_slug": repo_slug,
                "path": e["path"],
                "yielded": bool(e["yielded"]),
                "blob": e.get("blob"),
                "size": None if e.get("size") is None else int(e["size"]),
                "skip_reason": e.get("skip_reason"),
                "changed_at": _observed_time(e.get("changed_at")),
            }
            for e in entries
        ]
        with self.engine.begin() as conn:
            if replacing is None:
                conn.execute(sa.delete(t.envelope_paths).where(key_p))
            else:
                gone = sorted(set(replacing) | {r["path"] for r in rows})
                for start in range(0, len(gone), _DELETE_BATCH):
                    batch = gone[start : start + _DELETE_BATCH]
                    conn.execute(
                        sa.delete(t.envelope_paths).where(
                            key_p & t.envelope_paths.c.path.in_(batch)
                        )
                    )
            _insert_rows(conn, t.envelope_paths, rows)
            conn.execute(sa.delete(t.envelopes).where(key_e))
            conn.execute(
                sa.insert(t.envelopes).values(
                    tenant_id=tenant_id,
                    repo_slug=repo_slug,
                    revision=revision,
                    kind=kind,
                    recorded_at=now,
                    rules=rules,
                )
            )

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
                .where(t.envelopes.c.tenant_id == tenant_id, t.envelopes.c.repo_slug == repo_slug)
                .values(**values)
            )

    def envelope(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        """The latest complete envelope: revision, kind, recorded_at and its paths."""
        with self.engine.connect() as conn:
            head = _envelope_head(conn, tenant_id, repo_slug)
            if head is None:
                return None
            paths = conn.execute(
                sa.select(t.envelope_paths).where(
                    t.envelope_paths.c.tenant_id == tenant_id,
                    t.envelope_paths.c.repo_slug == repo_slug,
                )
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
                    p.tenant_id == tenant_id, p.repo_slug == repo_slug
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
        """Record the repo's declared generation (path -> chunk ids) in one transaction.

        With ``replace_paths`` only those paths' chunks are replaced (a sweep after a small
        commit rewrites what changed); without it the whole generation is replaced.
        """
        key_g = (t.declared_generations.c.tenant_id == tenant_id) & (
            t.declared_generations.c.repo_slug == repo_slug
        )
        key_c = (t.declared_chunks.c.tenant_id == tenant_id) & (
            t.declared_chunks.c.repo_slug == repo_slug
        )
        rows = [
            {
                "tenant_id": tenant_id,
                "repo_slug": repo_slug,
                "chunk_id": c.chunk_id,
                "source_path": c.source_path,
                "kind": c.kind,
                "name": c.name,
                "blob": c.blob,
            }
            for c in chunks
        ]
        with self.engine.begin() as conn:
            if replace_paths is None:
                conn.execute(sa.delete(t.declared_chunks).where(key_c))
            else:
                paths = sorted(set(replace_paths))
                for start in range(0, len(paths), 500):
                    conn.execute(
                        sa.delete(t.declared_chunks).where(
                            key_c & t.declared_chunks.c.source_path.in_(paths[start : start + 500])
                        )
                    )
            for start in range(0, len(rows), 5000):
                _insert_rows(conn, t.declared_chunks, rows[start : start + 5000])
            conn.execute(sa.delete(t.declared_generations).where(key_g))
            conn.execute(
                sa.insert(t.declared_generations).values(
                    tenant_id=tenant_id,
                    repo_slug=repo_slug,
                    revision=revision,
                    parser_id=parser_id,
                    parser_version=parser_version,
                    declaration_digest=declaration_digest,
                    chunking=chunking,
                    recorded_at=now,
                )
            )

    def declared_generation(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.select(t.declared_generations).where(
                        t.declared_generations.c.tenant_id == tenant_id,
                        t.declared_generations.c.repo_slug == repo_slug,
                    )
                )
                .mappings()
                .first()
            )
        return None if row is None else dict(row)

    def declared_chunks(self, tenant_id: str, repo_slug: str) -> list[DeclaredChunk]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    t.declared_chunks.c.chunk_id,
                    t.declared_chunks.c.source_path,
                    t.declared_chunks.c.kind,
                    t.declared_chunks.c.name,
                    t.declared_chunks.c.blob,
                ).where(
                    t.declared_chunks.c.tenant_id == tenant_id,
                    t.declared_chunks.c.repo_slug == repo_slug,
                )
            )
            # Rows are tuples already: attribute access on 8,000 Rows cost more than the query.
            return list(starmap(DeclaredChunk, rows.all()))

    # ------------------------------------------------------------------ fences and strikes
    def fences(self, tenant_id: str, repo_slug: str, generation: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.fences).where(
                    t.fences.c.tenant_id == tenant_id,
                    t.fences.c.repo_slug == repo_slug,
                    t.fences.c.generation == generation,
                )
            ).mappings()
            return [{**dict(r), "receipt": _loads(r["receipt"])} for r in rows]

    def record_fence(
        self,
        tenant_id: str,
        repo_slug: str,
        generation: str,
        chunk_id: str,
        *,
        disposition: str,
        reason_code: str,
        receipt: Mapping[str, Any],
        observed_at: float,
    ) -> None:
        key = (
            (t.fences.c.tenant_id == tenant_id)
            & (t.fences.c.repo_slug == repo_slug)
            & (t.fences.c.generation == generation)
            & (t.fences.c.chunk_id == chunk_id)
        )
        with self.engine.begin() as conn:
            conn.execute(sa.delete(t.fences).where(key))
            conn.execute(
                sa.insert(t.fences).values(
                    tenant_id=tenant_id,
                    repo_slug=repo_slug,
                    generation=generation,
                    chunk_id=chunk_id,
                    disposition=disposition,
                    reason_code=reason_code,
                    receipt=json.dumps(dict(receipt), sort_keys=True, default=str),
                    observed_at=observed_at,
                )
            )

    def delete_fence(self, tenant_id: str, repo_slug: str, generation: str, chunk_id: str) -> None:
        """Lift one fence (a ``secret`` fence whose chunk the scan no longer flags: the
        rules changed). Committed before returning, like every fence write."""
        with self.engine.begin() as conn:
            conn.execute(
                sa.delete(t.fences).where(
                    (t.fences.c.tenant_id == tenant_id)
                    & (t.fences.c.repo_slug == repo_slug)
                    & (t.fences.c.generation == generation)
                    & (t.fences.c.chunk_id == chunk_id)
                )
            )

    def strikes(self, tenant_id: str, repo_slug: str, generation: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.strikes).where(
                    t.strikes.c.tenant_id == tenant_id,
                    t.strikes.c.repo_slug == repo_slug,
                    t.strikes.c.generation == generation,
                )
            ).mappings()
            return [{**dict(r), "receipt": _loads(r["receipt"])} for r in rows]

    def record_strike(
        self,
        tenant_id: str,
        repo_slug: str,
        generation: str,
        chunk_id: str,
        *,
        kind: str,
        count: int,
        receipt: Mapping[str, Any],
        now: float,
    ) -> None:
        key = (
            (t.strikes.c.tenant_id == tenant_id)
            & (t.strikes.c.repo_slug == repo_slug)
            & (t.strikes.c.generation == generation)
            & (t.strikes.c.chunk_id == chunk_id)
        )
        with self.engine.begin() as conn:
            conn.execute(sa.delete(t.strikes).where(key))
            conn.execute(
                sa.insert(t.strikes).values(
                    tenant_id=tenant_id,
                    repo_slug=repo_slug,
                    generation=generation,
                    chunk_id=chunk_id,
                    kind=kind,
                    count=count,
                    receipt=json.dumps(dict(receipt), sort_keys=True, default=str),
                    updated_at=now,
                )
            )

    # ------------------------------------------------------------------ completion
    def record_sweep_result(
        self, tenant_id: str, repo_slug: str, *, state: Mapping[str, Any]
    ) -> None:
        """The checkpoint, outcome and both censuses land together or not at all."""
        with self.engine.begin() as conn:
            self._upsert_repo_state(conn, tenant_id, repo_slug, state)
