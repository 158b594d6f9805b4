"""The ledger's fences and strikes per (tenant, repo, generation, chunk): what the lane
fenced and the strikes on the way there. Mixed into ``Ledger`` (``store/ledger.py``);
every write commits before returning."""

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger_rows import repo_rows, write_row


def _loads(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None


def _chunk_rows(table: sa.Table, tenant_id: str, repo_slug: str, generation: str) -> Any:
    return repo_rows(table, tenant_id, repo_slug) & (table.c.generation == generation)


class FenceRecords:
    """Fences and strikes, on ``self.engine``."""

    engine: Engine

    def _read(self, table: sa.Table, *scope: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(table).where(_chunk_rows(table, *scope))).mappings()
            return [{**dict(r), "receipt": _loads(r["receipt"])} for r in rows]

    def _replace(
        self,
        table: sa.Table,
        scope: tuple[str, str, str, str],
        receipt: Mapping[str, Any],
        **values: Any,
    ) -> None:
        """The chunk's one row of ``table``, rewritten whole."""
        tenant_id, repo_slug, generation, chunk_id = scope
        write_row(
            self.engine,
            table,
            tenant_id=tenant_id,
            repo_slug=repo_slug,
            generation=generation,
            chunk_id=chunk_id,
            receipt=json.dumps(dict(receipt), sort_keys=True, default=str),
            **values,
        )

    # ------------------------------------------------------------------ fences and strikes
    def fences(self, tenant_id: str, repo_slug: str, generation: str) -> list[dict[str, Any]]:
        return self._read(t.fences, tenant_id, repo_slug, generation)

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
        self._replace(
            t.fences,
            (tenant_id, repo_slug, generation, chunk_id),
            receipt,
            disposition=disposition,
            reason_code=reason_code,
            observed_at=observed_at,
        )

    def delete_fence(self, tenant_id: str, repo_slug: str, generation: str, chunk_id: str) -> None:
        """Lift one fence (a ``secret`` fence whose chunk the scan no longer flags: the
        rules changed). Committed before returning, like every fence write."""
        with self.engine.begin() as conn:
            conn.execute(
                sa.delete(t.fences).where(
                    _chunk_rows(t.fences, tenant_id, repo_slug, generation),
                    t.fences.c.chunk_id == chunk_id,
                )
            )

    def strikes(self, tenant_id: str, repo_slug: str, generation: str) -> list[dict[str, Any]]:
        return self._read(t.strikes, tenant_id, repo_slug, generation)

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
        self._replace(
            t.strikes,
            (tenant_id, repo_slug, generation, chunk_id),
            receipt,
            kind=kind,
            count=count,
            updated_at=now,
        )
