"""Waiting for the provider to answer again, the circuit of consecutive provider
failures, and the strike receipts a later success completes."""

from dataclasses import replace

from neo_assets.core import codes
from neo_assets.embedding.lane_state import LaneState, Outcome, Stop
from neo_assets.embedding.rules import lane_evidence, lane_rows
from neo_assets.embedding.rules.provider_kinds import UNREACHABLE_REFUSED


class LaneRecovery(LaneState):
    """Recovery and the circuit; a part of ``lane.EmbeddingLane``."""

    async def _recover(self) -> None:
        """Wait until the provider answers a short control text again (abortable backoff),
        or stop with the failure's code once the bounded wait is spent."""
        failure = self.need_recovery
        assert failure is not None
        if not (self.batches or self.suspects or self.isolations):
            self.need_recovery = None  # nothing left to send: no probe is worth a request
            return
        # A port that refuses before the provider ever answered: a server starting, or
        # nothing there. Waited for briefly; past that the sweep fails naming it.
        unreachable = (
            failure.code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED and not self.ever_answered
        )
        loading = failure.code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING
        if unreachable:
            bound = self.settings.unreachable_wait_s
        elif loading:  # never waited for less than an ordinary recovery
            bound = max(self.settings.loading_max_wait_s, self.settings.recovery_max_wait_s)
        else:
            bound = self.settings.recovery_max_wait_s
        delays = lane_evidence.recovery_delays(
            self.settings.recovery_initial_s, self.settings.recovery_max_s, bound
        )
        last = failure
        for attempt in range(len(delays) + 1):
            outcome = await self._dispatch(
                [self.settings.control_text],
                "recovery-probe",
                deadline_cause=codes.EMBEDDING_PROBE_TIMEOUT,
            )
            if outcome.ok:
                self.last_ok = True
                self.need_recovery = None
                self._recovered(self.settings.control_text, source="control")
                return
            last = outcome
            if attempt < len(delays):
                await self._sleep(delays[attempt])
        if unreachable and not self.ever_answered:
            raise self._unreachable(UNREACHABLE_REFUSED, sum(delays), last.code)
        code = failure.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        raise self._stop_lane(
            Stop(
                code,
                f"provider did not answer again within {sum(delays):.1f}s (last probe {last.code})",
                cause_code=last.cause_code or last.code,
            )
        )

    def _count_failure(self, outcome: Outcome) -> None:
        self.last_ok = False
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        if code in lane_evidence.NEVER_COUNTED_CODES or (
            code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED and not self.ever_answered
        ):
            return
        if not (outcome.control or lane_evidence.is_provider_failure(code, outcome.status)):
            return
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.settings.circuit_threshold:
            raise self._stop_lane(
                Stop(
                    codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
                    f"circuit open after {self.consecutive_failures} consecutive provider "
                    f"failures (last {code})",
                    cause_code=code,
                )
            )

    def _recovered(self, text: str, *, source: str) -> None:
        """A success after strikes: record which input showed the provider healthy again
        (a control until a real input succeeds, then that input)."""
        if not self.awaiting_recovery:
            return
        size = {**lane_rows.size_of(text, self.settings.chars_per_token), "source": source}
        for chunk_id in self.awaiting_recovery:
            strike = self.strikes.get(chunk_id)
            if strike is None:
                continue
            recovered = replace(strike, receipt=lane_rows.with_recovery(strike.receipt, size))
            self.fence_book.record_strike(self.generation, recovered)
            self.strikes[chunk_id] = recovered
        if source == "input":
            self.awaiting_recovery.clear()
