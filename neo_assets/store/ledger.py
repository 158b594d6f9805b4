"""The ledger: the project's durable state (SQLite by default, Postgres when shared). A write
a decision depends on is committed before the method returns; a torn or unreadable value
reads as None ("unobserved"), never as a smaller or default value."""

import contextlib
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger_declarations import DeclarationRecords
from neo_assets.store.ledger_engine import ledger_engine, migrate
from neo_assets.store.ledger_fences import FenceRecords
from neo_assets.store.ledger_rows import first_row, repo_rows


class Ledger(DeclarationRecords, FenceRecords):
    """Durable state behind one engine. Construct with ``Ledger.open(url)``; whoever opens
    it disposes of it (``with Ledger.open(url) as ledger:`` does)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.closed = False

    @classmethod
    def open(cls, url: str) -> "Ledger":
        engine = ledger_engine(url)
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
        """The tenant's configVersion for ``digest``: 1 at first, +1 on every change. A process that
        loses the race on the (tenant, version) key reads again."""
        for _ in range(tries - 1):
            with contextlib.suppress(sa.exc.IntegrityError):
                return self._record_config_version(tenant_id, digest, now)
        return self._record_config_version(tenant_id, digest, now)  # the last try raises

    def _record_config_version(self, tenant_id: str, digest: str, now: float) -> int:
        v = t.tenant_config_versions.c
        with self.engine.begin() as conn:
            latest = conn.execute(
                sa.select(v.version, v.digest)
                .where(v.tenant_id == tenant_id)
                .order_by(v.version.desc())
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
        v = t.tenant_config_versions.c
        query = sa.select(sa.func.max(v.version)).where(v.tenant_id == tenant_id)
        with self.engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else int(value)

    # ------------------------------------------------------------------ repo state
    def repo_state(self, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
        query = sa.select(t.repo_state).where(repo_rows(t.repo_state, tenant_id, repo_slug))
        return first_row(self.engine, query)

    def all_repo_states(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.repo_state).order_by(t.repo_state.c.tenant_id, t.repo_state.c.repo_slug)
            ).mappings()
            return [dict(r) for r in rows]

    def upsert_repo_state(self, tenant_id: str, repo_slug: str, **values: Any) -> None:
        """Write ``values`` into the repo's state row in one transaction."""
        key = repo_rows(t.repo_state, tenant_id, repo_slug)
        with self.engine.begin() as conn:
            if conn.execute(sa.select(sa.literal(1)).where(key)).first() is None:
                row = {"tenant_id": tenant_id, "repo_slug": repo_slug, **values}
                conn.execute(sa.insert(t.repo_state).values(**row))
            elif values:
                conn.execute(sa.update(t.repo_state).where(key).values(**values))

    # ------------------------------------------------------------------ completion
    def record_sweep_result(
        self, tenant_id: str, repo_slug: str, *, state: Mapping[str, Any]
    ) -> None:
        """The checkpoint, outcome and both censuses land together (one transaction) or not
        at all."""
        self.upsert_repo_state(tenant_id, repo_slug, **state)
