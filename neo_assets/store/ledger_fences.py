"""The ledger's fences and strikes per (tenant, repo, generation, chunk): what the lane
fenced and the strikes on the way there. Mixed into ``Ledger`` (``store/ledger.py``), and
the lane's fence book over them (``LedgerFenceBook``); every write commits before returning."""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from neo_assets.embedding.rules.lane import FenceRecord, StrikeRecord
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger_rows import repo_rows, write_row

if TYPE_CHECKING:  # the ledger mixes the records in: imported for the hint only
    from neo_assets.store.ledger import Ledger


def _loads(raw: str | None) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):  # None (TypeError) or torn: unobserved
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


@dataclass(eq=False)
class LedgerFenceBook:
    """The lane's fence book (``embedding.lane_memory.FenceBook``) on the ledger, bound to one
    tenant repo; each record_* call commits before returning."""

    ledger: "Ledger"
    tenant_id: str
    repo_slug: str
    clock: Callable[[], float] = field(kw_only=True)

    def fence_records(self, generation: str) -> dict[str, FenceRecord]:
        rows = self.ledger.fences(self.tenant_id, self.repo_slug, generation)
        return {r["chunk_id"]: FenceRecord.from_row(r) for r in rows}

    def strike_records(self, generation: str) -> dict[str, StrikeRecord]:
        rows = self.ledger.strikes(self.tenant_id, self.repo_slug, generation)
        return {r["chunk_id"]: StrikeRecord.from_row(r) for r in rows}

    def record_fence(self, generation: str, fence: FenceRecord) -> None:
        assert fence.observed_at is not None  # the lane stamps every fence it records
        self.ledger.record_fence(
            self.tenant_id,
            self.repo_slug,
            generation,
            fence.chunk_id,
            disposition=fence.disposition,
            reason_code=fence.reason_code,
            receipt=fence.receipt,
            observed_at=fence.observed_at,
        )

    def record_strike(self, generation: str, strike: StrikeRecord) -> None:
        self.ledger.record_strike(
            self.tenant_id,
            self.repo_slug,
            generation,
            strike.chunk_id,
            kind=strike.kind,
            count=strike.count,
            receipt=strike.receipt,
            now=self.clock(),
        )
