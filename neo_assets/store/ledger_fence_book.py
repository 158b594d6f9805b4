"""The lane's fence book on the SQL ledger, bound to one tenant repo; each record_* call
commits before returning."""

from collections.abc import Callable, Mapping
from typing import Any

from neo_assets.embedding.rules.lane import FenceRecord, StrikeRecord
from neo_assets.store.ledger import Ledger


class LedgerFenceBook:
    def __init__(
        self, ledger: Ledger, tenant_id: str, repo_slug: str, *, clock: Callable[[], float]
    ) -> None:
        self.ledger = ledger
        self.tenant_id = tenant_id
        self.repo_slug = repo_slug
        self.clock = clock

    def fence_records(self, generation: str) -> dict[str, FenceRecord]:
        rows = self.ledger.fences(self.tenant_id, self.repo_slug, generation)
        return {r["chunk_id"]: FenceRecord.from_row(r) for r in rows}

    def strike_records(self, generation: str) -> dict[str, StrikeRecord]:
        rows = self.ledger.strikes(self.tenant_id, self.repo_slug, generation)
        return {r["chunk_id"]: StrikeRecord.from_row(r) for r in rows}

    def record_fence(
        self,
        generation: str,
        chunk_id: str,
        disposition: str,
        reason_code: str,
        receipt: Mapping[str, Any],
        observed_at: float,
    ) -> None:
        self.ledger.record_fence(
            self.tenant_id,
            self.repo_slug,
            generation,
            chunk_id,
            disposition=disposition,
            reason_code=reason_code,
            receipt=receipt,
            observed_at=observed_at,
        )

    def record_strike(
        self, generation: str, chunk_id: str, kind: str, count: int, receipt: Mapping[str, Any]
    ) -> None:
        self.ledger.record_strike(
            self.tenant_id,
            self.repo_slug,
            generation,
            chunk_id,
            kind=kind,
            count=count,
            receipt=receipt,
            now=self.clock(),
        )
