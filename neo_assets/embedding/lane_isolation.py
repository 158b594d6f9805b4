"""Finding the input behind a content-class or size failure: bisection with a paired
control, one input alone, and what a single input's failure proves (a fence, a strike,
nothing)."""

from neo_assets.core import codes
from neo_assets.embedding.failures import size_tokens
from neo_assets.embedding.lane_state import IsolationAborted, LaneState, Outcome
from neo_assets.embedding.rules import lane as rules
from neo_assets.embedding.rules import lane_evidence, lane_rows
from neo_assets.embedding.rules.lane import LaneItem


class LaneIsolation(LaneState):
    """Isolation and one input alone; a part of ``lane.EmbeddingLane``."""

    async def _isolate(self, group: list[LaneItem]) -> None:
        """Bisect a content-failed group with a paired control."""
        try:
            control = await self._control("isolation-control")
            if not control.ok:
                raise IsolationAborted(control)
            await self._walk(group)
        except IsolationAborted as aborted:
            rest = [i for i in group if i.chunk_id not in self.state]
            self.suspects.extend(rest)
            outcome = aborted.outcome
            code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
            if lane_evidence.waits_for_recovery(code, outcome.status):
                self.need_recovery = outcome
            self._event(
                code,
                "isolation aborted by a non-content failure: nothing attributed, "
                "unresolved members are suspects",
                [i.chunk_id for i in rest],
                outcome,
            )
            self._count_failure(outcome)

    async def _walk(self, group: list[LaneItem]) -> None:
        """``group`` is known to fail with a content-class error."""
        if len(group) == 1:
            await self._single(group[0], isolating=True, certain=True)
            return
        mid = len(group) // 2
        left, right = group[:mid], group[mid:]
        if await self._part(left):
            await self._walk(right)  # the failure is in the right half: no request needed
            return
        right_ok = await self._part(right)
        if len(left) > 1:
            await self._walk(left)
        if not right_ok and len(right) > 1:
            await self._walk(right)

    async def _part(self, part: list[LaneItem]) -> bool:
        """Dispatch one half: True when all of it was embedded."""
        if len(part) == 1:
            return await self._single(part[0], isolating=True, certain=False)
        outcome = await self._dispatch([i.text for i in part], "isolation-bisect")
        if outcome.ok:
            await self._embedded(part, outcome)
            return True
        self.last_ok = False
        if lane_evidence.starts_isolation(outcome.code or "", outcome.status):
            return False
        raise IsolationAborted(outcome)  # a provider failure mid-bisection

    async def _single(self, item: LaneItem, *, isolating: bool, certain: bool) -> bool:
        """Dispatch ONE input with nothing else in flight; True when it was embedded. ``certain``:
        the walk knows this input fails, so a control goes first when the last request failed
        (docs/design/embedding.md#evidence)."""
        if certain and not self.last_ok:
            control = await self._control("isolation-control")
            if not control.ok:
                return self._single_provider_failure(item, control, isolating, own_dispatch=False)
        preceded_ok = self.last_ok
        outcome = await self._single_try(item, "embed-single", isolating)
        if isinstance(outcome, Outcome) and not (isolating and preceded_ok):
            control = await self._control("isolation-control")
            if not control.ok:
                return self._single_provider_failure(item, control, isolating, own_dispatch=False)
            outcome = await self._single_try(item, "embed-single-again", isolating)
        if not isinstance(outcome, Outcome):
            return outcome
        evidence = lane_evidence.content_evidence(outcome.code or "", outcome.status)
        if evidence is None or lane_evidence.poison_forbidden(evidence):
            # Unreachable by construction; the guard stands at the attribution site anyway.
            self._defer(
                [item],
                outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED,
                "not attributable",
                outcome,
            )
            return False
        receipt = {
            "failureCode": outcome.code,
            "status": outcome.status,
            "providerCode": outcome.provider_code,
            "operationLabel": outcome.label,
            "pairedControl": True,
            "suspect": lane_rows.size_of(item.text, self.settings.chars_per_token),
        }
        self._fence(item, codes.DISPOSITION_PROVEN_CONTENT_POISON, evidence, receipt)
        return False

    async def _single_try(self, item: LaneItem, label: str, isolating: bool) -> Outcome | bool:
        """Dispatch ONE input: True when it was embedded, False when its failure is settled
        (a size refusal, a provider failure), else the content-class failure's outcome."""
        outcome = await self._dispatch([item.text], label, solo=True)
        if outcome.ok:
            await self._embedded([item], outcome)
            return True
        self.last_ok = False
        if lane_evidence.is_size_refusal(outcome.code or ""):
            self._size_refused(item, outcome)
            return False
        if not lane_evidence.is_content_class(outcome.code or "", outcome.status):
            return self._single_provider_failure(item, outcome, isolating, own_dispatch=True)
        return outcome

    def _size_refused(self, item: LaneItem, outcome: Outcome) -> None:
        """ONE input the provider refused for its size: geometry, never content."""
        receipt = lane_rows.size_refusal_receipt(
            code=outcome.code or codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
            status=outcome.status,
            operation_label=outcome.label,
            detail=outcome.detail,
            provider_limit_tokens=outcome.limit_tokens,
            input_tokens=size_tokens(outcome.detail),
            band={
                "bandTokens": rules.admission_band(self.settings),
                "countedTokens": item.tokens,
            },
            suspect_size=lane_rows.size_of(item.text, self.settings.chars_per_token),
        )
        self._fence(
            item,
            codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
            receipt,
        )

    def _single_provider_failure(
        self, item: LaneItem, outcome: Outcome, in_isolation: bool, *, own_dispatch: bool
    ) -> bool:
        """A non-content failure around ONE input: of its own dispatch, or of the control
        taken for it (which proves nothing about the input: it is simply tried again)."""
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        route = lane_evidence.failure_route(code, outcome.status, 1) if own_dispatch else "retry"
        route = self._first_contact(route, outcome)
        kind = lane_evidence.strike_kind(code, single_input=True)
        attributable = lane_evidence.strike_attributable(kind, outcome.alone)
        if route == "strike" and not attributable:
            self._defer(
                [item],
                code,
                "not attributable: another request was in flight to the provider, or it "
                "had not drained: no strike, offered again next sweep",
                outcome,
                attributable=False,
            )
        elif route == "strike" and kind is not None and item.chunk_id not in self.struck_this_sweep:
            self._strike(item, kind, outcome)
        elif in_isolation:
            pass  # the isolation's abort handler makes it a suspect again
        elif route in ("retry", "wait"):
            self.suspects.appendleft(item)  # nothing was learned about it
        else:
            self._defer([item], code, "single input failed; offered again next sweep", outcome)
        if in_isolation:
            raise IsolationAborted(outcome)
        if lane_evidence.waits_for_recovery(code, outcome.status):
            self.need_recovery = outcome
        if route != "wait":
            self._count_failure(outcome)
        return False

    def _first_contact(self, route: str, outcome: Outcome) -> str:
        """A port still closed before the provider ever answered is a server starting
        (llama-cpp-python's server listens only once its model is loaded): waited for
        like a loading model, not counted toward the circuit."""
        if (
            route == "retry"
            and not self.ever_answered
            and (outcome.code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED)
        ):
            return "wait"
        return route
