"""The lane's fence book on the SQL ledger, bound to one tenant repo; each record_* call
commits before returning."""

from collections.abc import Callable

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
