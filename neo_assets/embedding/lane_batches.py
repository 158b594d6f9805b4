"""The happy path: admission into batches, the driver keeping requests in flight, a
finished batch settled (written or routed), and the reshaping a batch failure asks for
(a model loading, a batch cap named, a deadline: halved or one request at a time)."""

import asyncio
import contextlib
from collections.abc import Sequence

from neo_assets.core import codes
from neo_assets.embedding.lane_state import LaneState, Outcome, Stop
from neo_assets.embedding.rules import lane as rules
from neo_assets.embedding.rules import lane_evidence, lane_rows
from neo_assets.embedding.rules.lane import LaneItem, StrikeRecord


def _evidence_of(strike: StrikeRecord) -> str:
    evidence = strike.receipt.get("evidenceCode")
    if isinstance(evidence, str):
        return evidence
    return (
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
        if strike.kind == lane_evidence.STRIKE_DEATH
        else codes.KB_VECTOR_EMBED_TIMEOUT
    )


class LaneBatches(LaneState):
    """The happy path and its reshaping; a part of ``lane.EmbeddingLane`` (the parts reach each
    other through ``self``)."""

    def _admit(self, items: Sequence[LaneItem]) -> None:
        if self._fences is None:  # read once per sweep
            self._fences = self.fence_book.fence_records(self.generation)
            self.strikes = dict(self.fence_book.strike_records(self.generation))
        fences = self._fences
        healthy: list[LaneItem] = []
        seen: set[str] = set()
        threshold = self.settings.strike_threshold
        for item in items:
            if item.chunk_id in seen:
                continue
            seen.add(item.chunk_id)
            self.item_ids.add(item.chunk_id)
            fence = fences.get(item.chunk_id)
            if fence is not None:
                row = lane_rows.fence_row_from_record(fence, recorded_this_sweep=False)
                if row is not None:
                    self.counts["alreadyFenced"] += 1
                    self.prior_fence_rows.append(row)
                    continue
            self.counts["offered"] += 1
            self.offered.append(item)
            if not rules.admitted(item.text, self.settings, item.tokens):
                self._fence(
                    item,
                    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
                    rules.KB_VECTOR_EMBED_OVER_ADMISSION_BAND,
                    lane_rows.admission_receipt(item.text, self.settings, item.tokens),
                )
                continue
            strike = self.strikes.get(item.chunk_id)
            if strike is not None and lane_evidence.should_graduate(strike.count, threshold):
                # The evidence was gathered before (e.g. a crash between strike and fence).
                self._fence(
                    item,
                    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
                    _evidence_of(strike),
                    lane_rows.graduation_receipt(strike.receipt, threshold),
                )
                continue
            if strike is not None and strike.count > 0:
                self.suspects.append(item)  # alone, after the healthy work
                continue
            healthy.append(item)
        self._queue([healthy])

    def _queue(self, groups: list[list[LaneItem]]) -> None:
        """Each group cut into batches of ``batch_size``, queued to be sent."""
        for group in groups:
            for start, end in rules.plan_batches(len(group), self.batch_size):
                part = group[start:end]
                if len(part) == 1:
                    # A single input is only ever dispatched with nothing else in flight.
                    self.suspects.appendleft(part[0])
                else:
                    self.batches.append(part)
        self.total_batches = self.done_batches + len(self.batches) + len(self.inflight)

    async def _drive(self) -> None:
        while True:
            self._check_stop()
            if self.need_recovery is not None or self.isolations:
                if self.inflight:
                    await self._settle_inflight(wait_all=True)
                elif self.need_recovery is not None:
                    await self._recover()
                else:
                    await self._isolate(self.isolations.popleft())
                continue
            if self.batches and len(self.inflight) < self.max_inflight:
                batch = self.batches.popleft()
                # Serialized: each batch waits for the provider to finish what was given
                # up on (a drain), so its ceiling counts the provider's time on it alone.
                task = asyncio.create_task(
                    self._dispatch([i.text for i in batch], "embed-batch", solo=self.serialized)
                )
                self.inflight[task] = batch
                continue
            if self.inflight:
                await self._settle_inflight(wait_all=False)
                continue
            if self.suspects:
                item = self.suspects.popleft()
                await self._single(item, isolating=False, certain=False)
                continue
            return

    async def _settle_inflight(self, *, wait_all: bool) -> None:
        done, _ = await asyncio.wait(
            set(self.inflight),
            return_when=asyncio.ALL_COMPLETED if wait_all else asyncio.FIRST_COMPLETED,
        )
        stop: Stop | None = None
        for task in [t for t in self.inflight if t in done]:
            batch = self.inflight.pop(task)
            try:
                outcome = task.result()
            except Stop as exc:
                stop = stop or exc
                continue
            await self._settle_batch(batch, outcome)
        if stop is not None:
            raise stop
        self._report_progress()

    async def _abandon_inflight(self) -> None:
        """On a stop: cancel what is in flight and wait for it to end (its connections
        close); its inputs stay unresolved and are deferred with the stop's code."""
        tasks = list(self.inflight)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.inflight.clear()
        if tasks:
            self._mark_abandoned()  # the server may still be computing them

    async def _settle_batch(self, batch: list[LaneItem], outcome: Outcome) -> None:
        """A happy-path batch came back: write it, or route its failure."""
        if outcome.ok:
            self.done_batches += 1
            await self._embedded(batch, outcome)
            return
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        route = self._first_contact(
            lane_evidence.failure_route(
                code, outcome.status, len(batch), concurrent=outcome.concurrent
            ),
            outcome,
        )
        if route in ("wait", "shrink", "serialize"):
            self._reshape(batch, route, outcome)
            return
        if route != "retry":
            self.done_batches += 1
        if route == "isolate":
            self.isolations.append(batch)
            what = (
                "a size refusal" if lane_evidence.is_size_refusal(code) else "a content-class error"
            )
            message = f"batch failed with {what}: isolating"
        elif route == "retry":
            self.batches.appendleft(batch)  # not settled: it goes again
            self.need_recovery = outcome
            message = "batch refused: dispatching it again once the provider answers"
        else:
            self.suspects.extend(batch)
            if lane_evidence.waits_for_recovery(code, outcome.status):
                self.need_recovery = outcome
            message = "batch failed: its members are suspects, dispatched one by one"
        self._event(code, message, [i.chunk_id for i in batch], outcome)
        self._count_failure(outcome)

    def _reshape(self, batch: list[LaneItem], route: str, outcome: Outcome) -> None:
        """A batch failure that says nothing about its inputs, only about how to send them:
        they go again (nothing is struck or suspected, the circuit does not move)."""
        if route == "wait":
            self.batches.appendleft(batch)
            self.need_recovery = outcome
            message = "provider loading its model: waiting, then sending again"
        elif route == "serialize":
            self.max_inflight = 1
            self.serialized = True
            self.batches.appendleft(batch)
            message = (
                "batch deadline while other requests were in flight: one request at a time now"
            )
        else:
            message = self._shrink(batch, outcome)
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        self._event(code, message, [i.chunk_id for i in batch], outcome)

    def _shrink(self, batch: list[LaneItem], outcome: Outcome) -> str:
        """Smaller batches: the cap the provider named, else half this one; what was done."""
        named = lane_evidence.batch_cap_from_message(outcome.detail)
        cap = named or max(1, len(batch) // 2)
        cap = min(cap, len(batch) - 1) if cap >= len(batch) else cap
        self.batch_size = min(self.batch_size, max(1, cap))
        # A deadline is this sweep's load, not the server's cap.
        slow = outcome.code == codes.KB_VECTOR_EMBED_TIMEOUT
        if not slow:  # remembered for the provider: later sweeps in this process start at the cap
            with contextlib.suppress(AttributeError):
                self.provider.batch_cap = self.batch_size  # type: ignore[attr-defined]
        if named is not None and self.batch_caps is not None:
            # And for every later sweep: only a cap the server named, not a guess (an
            # unwritten memory costs one refusal later).
            with contextlib.suppress(Exception):
                self.batch_caps.remember(self.batch_size, outcome.detail)
        pending = [batch, *self.batches]
        self.batches.clear()
        self._queue(pending)
        if slow:
            return f"batch past its deadline alone: batches halved to {self.batch_size} inputs"
        return f"provider caps a request at {self.batch_size} inputs: batches cut"
