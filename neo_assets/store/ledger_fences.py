"""The ledger's fences and strikes per (tenant, repo, generation, chunk): what the lane
fenced and the strikes on the way there. Mixed into ``Ledger`` (``store/ledger.py``);
every write commits before returning."""

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from neo_assets.store import ledger_schema as t


def _loads(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None


class FenceRecords:
    """Fences and strikes, on ``self.engine``."""

    engine: Engine

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
