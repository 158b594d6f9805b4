"""The ledger's engine: one per URL (SQLite with WAL and a busy timeout, or Postgres),
and its schema brought to the newest alembic revision, one process at a time."""

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def ledger_engine(url: str) -> Engine:
    """The engine behind a ledger URL (a SQLite file's folder is created)."""
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
            for pragma in ("journal_mode=WAL", "busy_timeout=60000", "synchronous=NORMAL"):
                cur.execute(f"PRAGMA {pragma}")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


# Any constant shared by every process of the project: the key of the advisory lock its
# migrations take on Postgres.
_MIGRATION_LOCK_KEY = 0x6E656F5F6C6467  # "neo_ldg"


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest alembic revision (idempotent). Processes opening a new
    ledger at once would all migrate and all but one fail, so one migrates under a lock
    (Postgres advisory, or a file lock beside the SQLite file) while the others wait."""
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
    database = database.removeprefix("file:")  # a SQLite URI: see ``ledger_engine``
    with open(f"{database}.migrate-lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
