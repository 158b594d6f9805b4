"""The lane's outcome accounting: an embedded batch queued for the store, strikes and
fences made durable, deferrals and events as rows, and the summary."""

from collections.abc import Iterable, Mapping
from typing import Any

from neo_assets.core import codes
from neo_assets.embedding.lane_state import (
    DEFERRED,
    EMBEDDED,
    FENCED,
    MAX_EVENT_ROWS,
    WRITING,
    LaneState,
    Outcome,
    Stop,
)
from neo_assets.embedding.rules import lane_evidence, lane_rows
from neo_assets.embedding.rules.lane import FenceRecord, LaneItem, StrikeRecord
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts


class LaneAccounting(LaneState):
    """Outcome accounting; a part of ``lane.EmbeddingLane``."""

    async def _embedded(self, items: list[LaneItem], outcome: Outcome) -> None:
        assert outcome.vectors is not None
        self.last_ok = True
        self.consecutive_failures = 0
        shortest = min(items, key=lambda i: len(i.text))
        if self.known_good is None or len(shortest.text) < len(self.known_good):
            self.known_good = shortest.text
        self._recovered(shortest.text, source="input")
        for item in items:
            self.state[item.chunk_id] = WRITING
        await self.write_q.put((items, outcome.vectors))

    def _strike(self, item: LaneItem, kind: str, outcome: Outcome) -> None:
        previous = self.strikes.get(item.chunk_id)
        count = (previous.count if previous is not None else 0) + 1
        threshold = self.settings.strike_threshold
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        receipt = lane_rows.strike_receipt(
            kind=kind,
            count=count,
            threshold=threshold,
            code=code,
            suspect_size=lane_rows.size_of(item.text, self.settings.chars_per_token),
            operation_label=outcome.label,
            observed_at=self.clock(),
            previous=previous.receipt if previous is not None else None,
            cause_code=outcome.cause_code,
        )
        strike = StrikeRecord(item.chunk_id, kind, count, receipt)
        self.fence_book.record_strike(self.generation, strike)
        self.strikes[item.chunk_id] = strike
        self.struck_this_sweep.add(item.chunk_id)
        if lane_evidence.should_graduate(count, threshold):
            self._fence(
                item,
                codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
                code,
                lane_rows.graduation_receipt(receipt, threshold),
            )
            return
        self.awaiting_recovery.append(item.chunk_id)
        self._defer(
            [item],
            code,
            f"{kind} strike {count}/{threshold}: offered again next sweep",
            outcome,
            strikeKind=kind,
            strikes=count,
            threshold=threshold,
        )

    def _fence(
        self, item: LaneItem, disposition: str, evidence_code: str, receipt: Mapping[str, Any]
    ) -> None:
        if (
            disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON
            and lane_evidence.poison_forbidden(evidence_code)
        ):
            raise AssertionError(f"poison from {evidence_code} is forbidden")
        observed_at = self.clock()
        stored = {**receipt, "evidenceCode": evidence_code}
        reason_code = lane_rows.FENCE_CODE_BY_DISPOSITION[disposition]
        fence = FenceRecord(item.chunk_id, disposition, reason_code, stored, observed_at)
        self.fence_book.record_fence(self.generation, fence)
        self.state[item.chunk_id] = FENCED
        if disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON:
            self.counts["fencedPoison"] += 1
        else:
            self.counts["fencedUndeliverable"] += 1
        self.fence_rows.append(
            lane_rows.fence_row(
                item.chunk_id,
                disposition,
                evidence_code,
                stored,
                observed_at,
                recorded_this_sweep=True,
            )
        )

    def _defer(
        self,
        items: Iterable[LaneItem],
        code: str,
        message: str,
        outcome: Outcome,
        **extra: Any,
    ) -> None:
        ids = [i.chunk_id for i in items if self.state.get(i.chunk_id) in (None, WRITING)]
        if not ids:
            return
        for chunk_id in ids:
            self.state[chunk_id] = DEFERRED
        self.counts["deferred"] += len(ids)
        details = {**outcome.failure_details(), **extra}
        self.live_rows.append(
            lane_rows.error_row(code, message, ids, outcome.label, outcome.cause_code, **details)
        )

    def _defer_remainder(self, stop: Stop) -> None:
        self._defer(
            self.offered,
            stop.code,
            stop.message,
            Outcome(label="embed-lane", cause_code=stop.cause_code),
        )

    def _event(self, code: str, message: str, ids: list[str], outcome: Outcome) -> None:
        if len(self.events) >= MAX_EVENT_ROWS:
            return
        self.events.append(
            lane_rows.error_row(
                code, message, ids, outcome.label, outcome.cause_code, **outcome.failure_details()
            )
        )

    def _report_progress(self) -> None:
        if self.progress is not None:
            self.progress(self.done_batches, self.total_batches, self.counts["embedded"])

    def _summary(self) -> LaneSummary:
        threshold = self.settings.strike_threshold
        strike_rows = [
            lane_rows.strike_row(chunk_id, rec.kind, rec.count, threshold)
            for chunk_id, rec in self.strikes.items()
            if rec.count > 0 and chunk_id in self.item_ids and self.state.get(chunk_id) != EMBEDDED
        ]
        return LaneSummary(
            counts=SweepCounts.from_doc(self.counts),
            errors=(*self.prior_fence_rows, *self.fence_rows, *self.live_rows),
            strikes=tuple(strike_rows),
            events=tuple(self.events),
            generation=self.generation,
        )
