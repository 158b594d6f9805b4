"""One provider request under the lane's scope and call ceiling: the slots it takes,
the drain before a solo dispatch, the control text, and the stops (scope, unreachable)."""

import asyncio
import dataclasses

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled
from neo_assets.embedding.failures import is_connect_failure
from neo_assets.embedding.lane_state import LaneState, Outcome, Stop, failure_outcome
from neo_assets.embedding.provider_slots import Held
from neo_assets.embedding.rules import lane_evidence
from neo_assets.embedding.rules.provider_kinds import (
    UNREACHABLE_UNRESOLVED,
    UNREACHABLE_WRONG_PATH,
    unreachable_message,
)
from neo_assets.embedding.vectors import (
    DimensionMismatchError,
    answered_dimensions,
    validate_vectors,
)


class LaneRequests(LaneState):
    """One request and the lane's stops; a part of ``lane.EmbeddingLane``."""

    async def _discover_slots(self) -> None:
        """``max_inflight`` from the server's free slots where it reports them."""
        discover = getattr(self.provider, "free_slots", None)
        if not self.settings.inflight_from_server or discover is None:
            return
        try:
            free = await discover(self.lane_scope)
        except Exception:  # noqa: BLE001 - no report: the configured value stands
            return
        if isinstance(free, int) and free >= 1:
            self.max_inflight = min(free, 64)
            self.slots.resize(self.max_inflight)

    async def _dispatch(
        self,
        texts: list[str],
        label: str,
        *,
        deadline_cause: str = lane_evidence.KB_VECTOR_EMBED_CALL_CEILING,
        solo: bool = False,
    ) -> Outcome:
        """One provider request under the lane's scope and the call ceiling, after taking a provider
        slot (``solo``: every slot). Raises ``Stop`` when the scope is (or becomes) cancelled."""
        self._check_stop()
        try:
            held = await self.slots.acquire(
                self.lane_scope, solo=solo, max_wait_s=2 * self.settings.call_ceiling_ms / 1000.0
            )
        except Cancelled as exc:
            raise self._scope_stop() from exc
        try:
            alone = held.alone and (not solo or await self._drain(held))
            self.inflight_now += 1
            concurrent = self.inflight_now > 1
            try:
                outcome = await self._request(texts, label, deadline_cause)
            finally:
                concurrent = concurrent or self.inflight_now > 1
                self.inflight_now -= 1
        finally:
            self.slots.release(held)
        return dataclasses.replace(outcome, alone=alone, concurrent=concurrent)

    async def _request(self, batch_texts: list[str], label: str, deadline_cause: str) -> Outcome:
        self.counts["requests"] += 1
        call = self.lane_scope.child(label)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.settings.call_ceiling_ms / 1000.0, call.cancel, deadline_cause)
        try:
            raw = await call.run(self.provider.embed(batch_texts, call, label))
            vectors = validate_vectors(
                raw,
                len(batch_texts),
                self.provider.dimensions,
                operation_label=label,
                provider=self.provider.name,
            )
        except Exception as exc:  # noqa: BLE001 - every provider failure is classified
            if self.lane_scope.cancelled:
                raise self._scope_stop() from exc
            if isinstance(exc, DimensionMismatchError):
                raise
            width = answered_dimensions(exc)
            if width is not None and not self.width_confirmed:
                # First contact answers another width: the configuration's fault.
                raise DimensionMismatchError(
                    self.provider.name, self.provider.model, self.provider.dimensions, width
                ) from exc
            if call.cancelled:
                # The lane's own per-call deadline fired (not the caller's scope); the
                # server may still be computing what it was sent.
                self._mark_abandoned()
                return Outcome(
                    code=codes.KB_VECTOR_EMBED_TIMEOUT,
                    cause_code=call.cause,
                    label=label,
                    error=f"call ceiling {self.settings.call_ceiling_ms} ms",
                )
            outcome = failure_outcome(exc, label)
            if not self.ever_answered:
                why = lane_evidence.first_contact(
                    outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED,
                    outcome.status,
                    is_connect_failure(exc),
                )
                if why in (UNREACHABLE_WRONG_PATH, UNREACHABLE_UNRESOLVED):
                    raise self._unreachable(why, 0.0, outcome.code) from exc
            return outcome
        finally:
            timer.cancel()
        self.ever_answered = True
        self.width_confirmed = True
        return Outcome(vectors=vectors, label=label)

    async def _drain(self, held: Held) -> bool:
        """Before a solo dispatch, when work was abandoned since the last drain (by any
        process): wait until the provider answers a short text, so the abandoned work is
        done and the solo's ceiling measures its own time. True when drained."""
        if self.drained_seen == held.abandoned_seen:
            return True
        self.counts["requests"] += 1
        scope = self.lane_scope.child("drain-probe")
        loop = asyncio.get_running_loop()
        timer = loop.call_later(
            max(self.settings.recovery_max_wait_s, self.settings.call_ceiling_ms / 1000.0),
            scope.cancel,
            codes.EMBEDDING_PROBE_TIMEOUT,
        )
        try:
            await scope.run(self.provider.embed([self.settings.control_text], scope, "drain-probe"))
        except Exception as exc:  # noqa: BLE001 - a failed drain only withholds attribution
            if self.lane_scope.cancelled:
                raise self._scope_stop() from exc
            return False
        finally:
            timer.cancel()
        self.drained_seen = held.abandoned_seen
        return True

    def _mark_abandoned(self) -> None:
        try:
            self.slots.mark_abandoned()
        except OSError:
            self.drained_seen = -1  # unknown: the next solo dispatch drains first

    async def _control(self, label: str) -> Outcome:
        """A fresh known-good request: the shortest text embedded this sweep, else the fixed
        control text. Its vectors are discarded."""
        text = self.known_good if self.known_good is not None else self.settings.control_text
        outcome = await self._dispatch([text], label, deadline_cause=codes.EMBEDDING_PROBE_TIMEOUT)
        outcome = dataclasses.replace(outcome, control=True)
        self.last_ok = outcome.ok
        if outcome.ok:
            self._recovered(text, source="control")
        return outcome

    def _unreachable(self, why: str, waited_s: float, cause: str | None) -> Stop:
        """The provider is not there: stop at once, everything deferred with
        ``KB_VECTOR_EMBED_PROVIDER_UNREACHABLE`` and a message naming the URL and fix."""
        url = getattr(self.provider, "base_url", None)
        return self._stop_lane(
            Stop(
                codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE,
                unreachable_message(self.provider.name, url, why, waited_s),
                cause_code=cause,
            )
        )

    def _check_stop(self) -> None:
        if self.lane_scope.cancelled:
            raise self._scope_stop()

    def _scope_stop(self) -> Stop:
        if self.internal_stop is not None:
            return self.internal_stop
        cause = self.cancel_scope.cause if self.cancel_scope.cancelled else self.lane_scope.cause
        code = lane_evidence.cancellation_code(cause)
        return Stop(code, f"embedding stopped: scope cancelled ({cause})", cause_code=cause)

    def _stop_lane(self, stop: Stop) -> Stop:
        """Stop the lane from inside (circuit, write error, no recovery): cancel in-flight."""
        if self.internal_stop is None and not self.lane_scope.cancelled:
            self.internal_stop = stop
            self.lane_scope.cancel(stop.code)
        return self._scope_stop()

    async def _sleep(self, seconds: float) -> None:
        try:
            await self.lane_scope.sleep(seconds)
        except Cancelled as exc:
            raise self._scope_stop() from exc
