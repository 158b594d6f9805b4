"""The embedding lane: embed what the collection lacks, and conclude only what the evidence
proves.

``embed_chunks`` takes the chunks the collection lacks and, at one embedding generation:

1. **Admission.** Already fenced at this generation → not offered (its fence row is still
   reported, so the repo's census stays observable). Over the admission band → fenced
   ``undeliverable-at-geometry`` at once, never dispatched. Inputs with strikes from an
   earlier sweep are *known suspects*: dispatched alone, after the healthy work.
2. **Happy path.** Batches of ``batch_size``, up to ``max_inflight`` requests in flight;
   each finished batch goes to a bounded write queue (``write_queue_depth``) drained by
   ONE writer running the synchronous ``write_batch`` in a worker thread, so embedding
   overlaps writing; a full queue holds the next dispatch back (the store sets the pace
   when it is the slower side). A crash loses at most what is in flight: ``max_inflight``
   requests, ``write_queue_depth`` queued batches and the one being written.
3. **Failures** are classified (``failures.classify_failure``) and routed by
   ``embedding.rules.lane.failure_route``; every verdict-bearing step runs *serially*
   (nothing else in flight), so "this input was the only one in flight" holds whenever a
   single-input failure is read as evidence about that input:

   - content class → isolation by bisection with a paired control (a control first; a
     single input is attributed only when it failed in its group and fails again alone
     right after a success; otherwise a control, then the input once more). A non-content
     failure anywhere in the walk aborts the isolation: nothing more is attributed, the
     unresolved members become suspects.
   - a multi-input timeout with nothing else in flight → the batches are halved and sent
     again (too much work per request for the server at this moment; nobody suspected);
     beside other requests → one request at a time, the batch sent again.
   - a multi-input death/other failure → members are suspects, dispatched one by one
     after the healthy work.
   - a single input whose transport closed → ``death`` strike; whose deadline fired →
     ``timeout`` strike; persisted before moving on; at the threshold it graduates at
     once to ``undeliverable-at-geometry`` (so graduation is reachable when it is the
     last work). At most one strike per input per sweep: below the threshold the input
     is deferred to the next sweep.
   - connection refused → no strike, no fence: the same inputs are dispatched again once
     the provider answers.
   - after a death or a refusal the lane waits (abortable backoff, one short control text
     per probe) until the provider answers again, or defers the rest with that code.
   - ``circuit_threshold`` consecutive provider-wide failures open the circuit: the rest is
     deferred with ``KB_VECTOR_EMBED_CIRCUIT_OPEN``. Only a real input's success resets
     the count (a probe answering proves liveness, not that real work gets through); a
     failed control counts whatever its code (the known-good text was refused).
   - every request runs under the lane's call ceiling (``call_ceiling_ms``): a dispatch
     whose ceiling fires is ``KB_VECTOR_EMBED_TIMEOUT`` with cause
     ``KB_VECTOR_EMBED_CALL_CEILING``; a control or recovery probe's with cause
     ``EMBEDDING_PROBE_TIMEOUT``.
4. **Cancellation** of the caller's scope stops everything at once: in-flight requests are
   cancelled (their connections closed), no later request starts, backoff sleeps end, and
   the remainder is deferred with ``KB_VECTOR_EMBED_ABORTED`` (cause ``ABORT_ERR``) or
   ``KB_VECTOR_EMBED_TIMEOUT`` (a deadline cause), the cause in ``details.causeCode``.
   Batches already embedded and queued for the store are still written (no provider
   request; they were paid for).
5. **Write errors** prove nothing about content: the batch's chunks get a
   ``KB_VECTOR_EMBED_WRITE_ERROR`` row (no fence, no strike) and the rest is deferred with
   that code.

The summary (a ``sweep.rules.summary.LaneSummary``, read by the outcome classifier, the
census and the asset metadata): ``counts`` (offered, embedded, already_fenced,
fenced_poison, fenced_undeliverable, deferred, requests), ``errors`` (fence rows, then
live rows), ``strikes`` (``{"chunkId", "kind", "strikes", "threshold"}`` rows),
``events`` (failures the sweep resolved itself) and ``generation``.

``offered == embedded + fenced_poison + fenced_undeliverable + deferred`` (fences recorded
this sweep); ``already_fenced`` counts inputs skipped because a fence at this generation
already held them, and each of them has a fence row in ``errors`` (``details.
recordedThisSweep`` false) so a fence-only repo keeps reporting its census. A live row
(``errors``) exists only for a failure that left chunks deferred; failures the lane
resolved itself (a batch that was isolated, a death whose members all got through) are
``events`` and do not hold the sweep back.
"""

import asyncio
import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled, CancelScope
from neo_assets.embedding.failures import (
    as_embed_failure,
    failure_cause,
    is_connect_failure,
    size_tokens,
)
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.provider_slots import Held, LocalSlots, Slots
from neo_assets.embedding.rules import lane as rules
from neo_assets.embedding.rules.lane import (
    FenceRecord,
    LaneItem,
    LaneSettings,
    StrikeRecord,
)
from neo_assets.embedding.rules.provider_kinds import (
    UNREACHABLE_REFUSED,
    UNREACHABLE_UNRESOLVED,
    UNREACHABLE_WRONG_PATH,
    unreachable_message,
)
from neo_assets.embedding.slot_backend import slots_for
from neo_assets.embedding.vectors import (
    DimensionMismatchError,
    answered_dimensions,
    validate_vectors,
)
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts, zero_lane_counts

__all__ = [
    "BatchCapMemory",
    "FenceBook",
    "FenceRecord",
    "InMemoryFenceBook",
    "LaneItem",
    "LaneSettings",
    "StrikeRecord",
    "embed_chunks",
]

MAX_EVENT_ROWS = 200

WriteBatch = Callable[[list[LaneItem], np.ndarray], None]
Progress = Callable[[int, int, int], None]


class BatchCapMemory(Protocol):
    """A provider's batch cap remembered across sweeps (the ledger's, ``store.batch_caps``):
    ``recall`` when the lane starts (None: the configured size), ``remember`` the moment a
    server names one (with the body that said so)."""

    def recall(self) -> int | None: ...

    def remember(self, cap: int, evidence: str) -> None: ...


class FenceBook(Protocol):
    """Durable fences and strikes of one repo, per embedding generation.

    The ``record_*`` calls return only after their write is committed: the lane acts on a
    fence or a strike only once it is durable. All four are called on the event-loop
    thread (they should be quick: they run only on failures and once at the start).
    """

    def fence_records(self, generation: str) -> Mapping[str, FenceRecord]: ...

    def strike_records(self, generation: str) -> Mapping[str, StrikeRecord]: ...

    def record_fence(
        self,
        generation: str,
        chunk_id: str,
        disposition: str,
        reason_code: str,
        receipt: Mapping[str, Any],
        observed_at: float,
    ) -> None: ...

    def record_strike(
        self, generation: str, chunk_id: str, kind: str, count: int, receipt: Mapping[str, Any]
    ) -> None: ...


@dataclass
class InMemoryFenceBook:
    """A FenceBook kept in memory (tests, benchmarks); ``log`` lists every record call."""

    fences: dict[tuple[str, str], FenceRecord] = field(default_factory=dict)
    strikes: dict[tuple[str, str], StrikeRecord] = field(default_factory=dict)
    log: list[tuple[str, str, str]] = field(default_factory=list)

    def fence_records(self, generation: str) -> dict[str, FenceRecord]:
        return {cid: rec for (gen, cid), rec in self.fences.items() if gen == generation}

    def strike_records(self, generation: str) -> dict[str, StrikeRecord]:
        return {cid: rec for (gen, cid), rec in self.strikes.items() if gen == generation}

    def fenced_ids(self, generation: str) -> set[str]:
        return set(self.fence_records(generation))

    def record_fence(
        self,
        generation: str,
        chunk_id: str,
        disposition: str,
        reason_code: str,
        receipt: Mapping[str, Any],
        observed_at: float,
    ) -> None:
        self.fences[(generation, chunk_id)] = FenceRecord(
            chunk_id, disposition, reason_code, dict(receipt), observed_at
        )
        self.log.append(("fence", generation, chunk_id))

    def record_strike(
        self, generation: str, chunk_id: str, kind: str, count: int, receipt: Mapping[str, Any]
    ) -> None:
        self.strikes[(generation, chunk_id)] = StrikeRecord(chunk_id, kind, count, dict(receipt))
        self.log.append(("strike", generation, chunk_id))


# ------------------------------------------------------------------ internal plumbing
@dataclass(frozen=True)
class _Outcome:
    """One provider request's result: vectors, or a classified failure."""

    vectors: np.ndarray | None = None
    code: str | None = None
    status: int | None = None
    cause_code: str | None = None
    provider_code: str | None = None
    label: str = ""
    error: str = ""
    detail: str = ""  # the provider's own (bounded) answer
    limit_tokens: int | None = None  # a size refusal's limit, when the provider named it
    control: bool = False  # a control/probe: its failure is the provider's, whatever the code
    alone: bool = False  # the only request in flight to the provider, its ceiling its own
    concurrent: bool = False  # other requests of this lane were in flight meanwhile
    detail: str = ""  # the provider's bounded message (a batch cap is read from it)

    @property
    def ok(self) -> bool:
        return self.vectors is not None

    def failure_details(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.status is not None:
            details["status"] = self.status
        if self.error:
            details["error"] = self.error
        return details


class _Stop(Exception):
    """Everything not yet resolved is deferred with ``code``; no later request starts."""

    def __init__(self, code: str, message: str, cause_code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.cause_code = cause_code


class _IsolationAborted(Exception):
    """A non-content failure inside an isolation: nothing more may be attributed."""

    def __init__(self, outcome: _Outcome) -> None:
        super().__init__(outcome.code or "")
        self.outcome = outcome


_EMBEDDED = "embedded"
_FENCED = "fenced"
_DEFERRED = "deferred"
_WRITING = "writing"


class _Lane:
    def __init__(
        self,
        *,
        provider: EmbeddingProvider,
        settings: LaneSettings,
        generation: str,
        fence_book: FenceBook,
        write_batch: WriteBatch,
        cancel_scope: CancelScope,
        clock: Callable[[], float],
        progress: Progress | None,
        slots: Slots | None = None,
        width_known: bool = False,
        batch_caps: BatchCapMemory | None = None,
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.generation = generation
        self.book = fence_book
        self.write_batch = write_batch
        self.scope = cancel_scope
        self.clock = clock
        self.progress = progress
        self.lane_scope = cancel_scope.child("embed-lane")
        self.max_inflight = settings.max_inflight
        # A cap on inputs per request the provider named earlier: kept on the provider
        # object (this process) and remembered for the provider (every process).
        self.batch_caps = batch_caps
        caps = [getattr(provider, "batch_cap", None), _recalled_cap(batch_caps)]
        self.batch_size = min(
            [settings.batch_size, *(c for c in caps if isinstance(c, int) and c >= 1)]
        )
        # A remote provider is one server for every process; an in-process one (the
        # hashing embedder, sentence-transformers) is this process's own.
        endpoint = getattr(provider, "base_url", None)
        self.slots: Slots = slots or (
            slots_for(provider.name, str(endpoint), provider.model, self.max_inflight)
            if endpoint
            else LocalSlots(self.max_inflight)
        )
        self.inflight_now = 0
        self.serialized = False  # one request at a time after a deadline beside others
        # The abandoned-work count at the last drain: work abandoned before this sweep
        # started is the server's past (its requests long settled or cut by the ceiling).
        self.drained_seen: int | None = self.slots.abandoned_count()
        self.ever_answered = False

        self.counts = zero_lane_counts()
        self.offered: list[LaneItem] = []
        self.item_ids: set[str] = set()
        self.state: dict[str, str] = {}
        self.prior_fence_rows: list[dict[str, Any]] = []
        self.fence_rows: list[dict[str, Any]] = []
        self.live_rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.strikes: dict[str, StrikeRecord] = {}
        self.struck_this_sweep: set[str] = set()
        self.awaiting_recovery: list[str] = []  # strikes whose recovery is not yet seen

        self.batches: deque[list[LaneItem]] = deque()
        self.suspects: deque[LaneItem] = deque()
        self.isolations: deque[list[LaneItem]] = deque()
        self.inflight: dict[asyncio.Task[_Outcome], list[LaneItem]] = {}
        self.need_recovery: _Outcome | None = None
        self.consecutive_failures = 0
        self.last_ok = False  # did the most recent settled request succeed?
        self.known_good: str | None = None  # shortest text embedded this sweep
        # An answer of the configured width came back (this sweep, or before it: the
        # generation's collection holds rows). Once known, a wrong width is the provider
        # changing underneath — the write path's dimension freeze — not a config error.
        self.width_confirmed = width_known
        self.internal_stop: _Stop | None = None
        self.stop: _Stop | None = None

        self.write_q: asyncio.Queue[tuple[list[LaneItem], np.ndarray] | None] = asyncio.Queue(
            maxsize=settings.write_queue_depth
        )
        self.write_failed = False
        self.total_batches = 0
        self.done_batches = 0
        self._fences: Mapping[str, FenceRecord] | None = None

    # -------------------------------------------------------------- entry
    async def run(self, items: Sequence[LaneItem]) -> LaneSummary:
        self._admit(items)
        if self.batches:  # only a sweep with batches to send asks the server
            await self._discover_slots()
        self._report_progress()
        writer = asyncio.create_task(self._writer())
        try:
            await self._drive()
        except _Stop as stop:
            self.stop = stop
        except BaseException:
            for task in self.inflight:
                task.cancel()
            writer.cancel()
            raise
        finally:
            if self.inflight:
                await self._abandon_inflight()
        await self.write_q.put(None)
        await writer
        if self.stop is None and self.internal_stop is not None:
            self.stop = self.internal_stop
        if self.stop is not None:
            self._defer_remainder(self.stop)
        self._report_progress()
        return self._summary()

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

    # -------------------------------------------------------------- admission
    def _admit(self, items: Sequence[LaneItem]) -> None:
        if self._fences is None:  # read once per sweep
            self._fences = self.book.fence_records(self.generation)
            self.strikes = dict(self.book.strike_records(self.generation))
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
                row = rules.fence_row_from_record(fence, recorded_this_sweep=False)
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
                    rules.admission_receipt(item.text, self.settings, item.tokens),
                )
                continue
            strike = self.strikes.get(item.chunk_id)
            if strike is not None and rules.should_graduate(strike.count, threshold):
                # The evidence was gathered before (e.g. a crash between strike and fence).
                self._fence(
                    item,
                    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
                    _evidence_of(strike),
                    rules.graduation_receipt(strike.receipt, threshold),
                )
                continue
            if strike is not None and strike.count > 0:
                self.suspects.append(item)  # alone, after the healthy work
                continue
            healthy.append(item)
        for start, end in rules.plan_batches(len(healthy), self.batch_size):
            batch = healthy[start:end]
            if len(batch) == 1:
                # A single input is only ever dispatched with nothing else in flight.
                self.suspects.appendleft(batch[0])
            else:
                self.batches.append(batch)
        self.total_batches = self.done_batches + len(self.batches) + len(self.inflight)

    # -------------------------------------------------------------- the driver
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
                    self._dispatch(batch, "embed-batch", solo=self.serialized)
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
        stop: _Stop | None = None
        for task in [t for t in self.inflight if t in done]:
            batch = self.inflight.pop(task)
            try:
                outcome = task.result()
            except _Stop as exc:
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

    async def _settle_batch(self, batch: list[LaneItem], outcome: _Outcome) -> None:
        """A happy-path batch came back: write it, or route its failure."""
        if outcome.ok:
            self.done_batches += 1
            await self._embedded(batch, outcome)
            return
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        route = self._first_contact(
            rules.failure_route(code, outcome.status, len(batch), concurrent=outcome.concurrent),
            outcome,
        )
        ids = [i.chunk_id for i in batch]
        if route in ("wait", "shrink", "serialize"):
            self._reshape(batch, route, outcome)
            return
        if route != "retry":
            self.done_batches += 1
        if route == "isolate":
            self.isolations.append(batch)
            what = "a size refusal" if rules.is_size_refusal(code) else "a content-class error"
            self._event(code, f"batch failed with {what}: isolating", ids, outcome)
        elif route == "retry":
            self.batches.appendleft(batch)  # not settled: it goes again
            self.need_recovery = outcome
            self._event(
                code, "batch refused: dispatching it again once the provider answers", ids, outcome
            )
        else:
            self.suspects.extend(batch)
            if rules.waits_for_recovery(code, outcome.status):
                self.need_recovery = outcome
            self._event(
                code, "batch failed: its members are suspects, dispatched one by one", ids, outcome
            )
        self._count_failure(outcome)

    def _reshape(self, batch: list[LaneItem], route: str, outcome: _Outcome) -> None:
        """A batch failure that says nothing about its inputs, only about how to send them:
        they go again (nothing is struck or suspected, the circuit does not move)."""
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        ids = [i.chunk_id for i in batch]
        if route == "wait":
            self.batches.appendleft(batch)
            self.need_recovery = outcome
            self._event(
                code, "provider loading its model: waiting, then sending again", ids, outcome
            )
            return
        if route == "serialize":
            self.max_inflight = 1
            self.serialized = True
            self.batches.appendleft(batch)
            self._event(
                code,
                "batch deadline while other requests were in flight: one request at a time now",
                ids,
                outcome,
            )
            return
        named = rules.batch_cap_from_message(outcome.detail)
        cap = named or max(1, len(batch) // 2)
        cap = min(cap, len(batch) - 1) if cap >= len(batch) else cap
        self.batch_size = min(self.batch_size, max(1, cap))
        slow = code == codes.KB_VECTOR_EMBED_TIMEOUT  # this sweep's load, not the server's cap
        try:  # remembered for the provider: later sweeps in this process start at the cap
            if not slow:
                self.provider.batch_cap = self.batch_size  # type: ignore[attr-defined]
        except AttributeError:
            pass
        if named is not None and self.batch_caps is not None:
            try:  # and for every later sweep: only a cap the server named, not a guess
                self.batch_caps.remember(self.batch_size, outcome.detail)
            except Exception:  # noqa: BLE001 - an unwritten memory costs one refusal later
                pass
        pending = [batch, *self.batches]
        self.batches.clear()
        for group in pending:
            for start, end in rules.plan_batches(len(group), self.batch_size):
                part = group[start:end]
                if len(part) == 1:
                    self.suspects.appendleft(part[0])
                else:
                    self.batches.append(part)
        self.total_batches = self.done_batches + len(self.batches) + len(self.inflight)
        what = (
            f"batch past its deadline alone: batches halved to {self.batch_size} inputs"
            if slow
            else f"provider caps a request at {self.batch_size} inputs: batches cut"
        )
        self._event(code, what, ids, outcome)

    def _mark_abandoned(self) -> None:
        try:
            self.slots.mark_abandoned()
        except OSError:
            self.drained_seen = -1  # unknown: the next solo dispatch drains first

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

    # -------------------------------------------------------------- one request
    async def _dispatch(
        self,
        inputs: Sequence[LaneItem] | None,
        label: str,
        *,
        texts: Sequence[str] | None = None,
        deadline_cause: str = rules.KB_VECTOR_EMBED_CALL_CEILING,
        solo: bool = False,
    ) -> _Outcome:
        """One provider request under the lane's scope and the call ceiling.

        It first takes a provider slot (``solo``: every slot, after the provider drained
        abandoned work), so the ceiling starts when the request is the server's to work
        on. Raises ``_Stop`` when the lane's scope is (or becomes) cancelled: no request
        starts after cancellation, and one in flight is cancelled with its connection.
        """
        self._check_stop()
        batch_texts = list(texts) if texts is not None else [i.text for i in inputs or ()]
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
                outcome = await self._request(batch_texts, label, deadline_cause)
            finally:
                concurrent = concurrent or self.inflight_now > 1
                self.inflight_now -= 1
        finally:
            self.slots.release(held)
        return dataclasses.replace(outcome, alone=alone, concurrent=concurrent)

    async def _request(self, batch_texts: list[str], label: str, deadline_cause: str) -> _Outcome:
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
                return _Outcome(
                    code=codes.KB_VECTOR_EMBED_TIMEOUT,
                    cause_code=call.cause,
                    label=label,
                    error=f"call ceiling {self.settings.call_ceiling_ms} ms",
                )
            outcome = _failure_outcome(exc, label)
            if not self.ever_answered:
                why = rules.first_contact(
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
        return _Outcome(vectors=vectors, label=label)

    def _unreachable(self, why: str, waited_s: float, cause: str | None) -> _Stop:
        """The provider is not there: stop at once, everything deferred with
        ``KB_VECTOR_EMBED_PROVIDER_UNREACHABLE`` and a message naming the URL and fix."""
        url = getattr(self.provider, "base_url", None)
        return self._stop_lane(
            _Stop(
                codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE,
                unreachable_message(self.provider.name, url, why, waited_s),
                cause_code=cause,
            )
        )

    def _check_stop(self) -> None:
        if self.lane_scope.cancelled:
            raise self._scope_stop()

    def _scope_stop(self) -> _Stop:
        if self.internal_stop is not None:
            return self.internal_stop
        cause = self.scope.cause if self.scope.cancelled else self.lane_scope.cause
        code = rules.cancellation_code(cause)
        return _Stop(code, f"embedding stopped: scope cancelled ({cause})", cause_code=cause)

    def _stop_lane(self, stop: _Stop) -> _Stop:
        """Stop the lane from inside (circuit, write error, no recovery): cancel in-flight."""
        if self.internal_stop is None and not self.lane_scope.cancelled:
            self.internal_stop = stop
            self.lane_scope.cancel(stop.code)
        return self._scope_stop()

    async def _control(self, label: str) -> _Outcome:
        """A fresh known-good request: the shortest text embedded this sweep, else the fixed
        control text. Its vectors are discarded."""
        text = self.known_good if self.known_good is not None else self.settings.control_text
        outcome = await self._dispatch(
            None, label, texts=[text], deadline_cause=codes.EMBEDDING_PROBE_TIMEOUT
        )
        outcome = dataclasses.replace(outcome, control=True)
        self.last_ok = outcome.ok
        if outcome.ok:
            self._recovered(text, source="control")
        return outcome

    # -------------------------------------------------------------- success / failure
    async def _embedded(self, items: list[LaneItem], outcome: _Outcome) -> None:
        assert outcome.vectors is not None
        self.last_ok = True
        self.consecutive_failures = 0
        shortest = min(items, key=lambda i: len(i.text))
        if self.known_good is None or len(shortest.text) < len(self.known_good):
            self.known_good = shortest.text
        self._recovered(shortest.text, source="input")
        for item in items:
            self.state[item.chunk_id] = _WRITING
        await self.write_q.put((items, outcome.vectors))

    def _count_failure(self, outcome: _Outcome) -> None:
        self.last_ok = False
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        if code in rules.NEVER_COUNTED_CODES or (
            code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED and not self.ever_answered
        ):
            return
        if not (outcome.control or rules.is_provider_failure(code, outcome.status)):
            return
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.settings.circuit_threshold:
            raise self._stop_lane(
                _Stop(
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
        size = {**rules.size_of(text, self.settings.chars_per_token), "source": source}
        for chunk_id in self.awaiting_recovery:
            strike = self.strikes.get(chunk_id)
            if strike is None:
                continue
            receipt = rules.with_recovery(strike.receipt, size)
            self.book.record_strike(
                generation=self.generation,
                chunk_id=chunk_id,
                kind=strike.kind,
                count=strike.count,
                receipt=receipt,
            )
            self.strikes[chunk_id] = StrikeRecord(chunk_id, strike.kind, strike.count, receipt)
        if source == "input":
            self.awaiting_recovery.clear()

    # -------------------------------------------------------------- recovery
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
        delays = rules.recovery_delays(
            self.settings.recovery_initial_s, self.settings.recovery_max_s, bound
        )
        last = failure
        for attempt in range(len(delays) + 1):
            outcome = await self._dispatch(
                None,
                "recovery-probe",
                texts=[self.settings.control_text],
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
            _Stop(
                code,
                f"provider did not answer again within {sum(delays):.1f}s (last probe {last.code})",
                cause_code=last.cause_code or last.code,
            )
        )

    async def _sleep(self, seconds: float) -> None:
        try:
            await self.lane_scope.sleep(seconds)
        except Cancelled as exc:
            raise self._scope_stop() from exc

    # -------------------------------------------------------------- isolation
    async def _isolate(self, group: list[LaneItem]) -> None:
        """Bisect a content-failed group with a paired control (module docstring)."""
        try:
            control = await self._control("isolation-control")
            if not control.ok:
                raise _IsolationAborted(control)
            await self._walk(group)
        except _IsolationAborted as aborted:
            rest = [i for i in group if i.chunk_id not in self.state]
            self.suspects.extend(rest)
            outcome = aborted.outcome
            code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
            if rules.waits_for_recovery(code, outcome.status):
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
        outcome = await self._dispatch(part, "isolation-bisect")
        if outcome.ok:
            await self._embedded(part, outcome)
            return True
        self.last_ok = False
        if rules.starts_isolation(outcome.code or "", outcome.status):
            return False
        raise _IsolationAborted(outcome)  # a provider failure mid-bisection

    # -------------------------------------------------------------- one input alone
    async def _single(self, item: LaneItem, *, isolating: bool, certain: bool) -> bool:
        """Dispatch ONE input with nothing else in flight; True when it was embedded.

        Content evidence is a content-class failure of this input ALONE, right after a
        success (the paired control), of an input that had failed before: in the group
        being isolated (``isolating``), or alone just before a fresh control. ``certain``:
        the walk knows this input fails, so a control goes first when the last request
        failed. Death and timeout become strikes; refused is tried again.
        """
        in_isolation = isolating
        if certain and not self.last_ok:
            control = await self._control("isolation-control")
            if not control.ok:
                return self._single_provider_failure(
                    item, control, in_isolation, own_dispatch=False
                )
        preceded_ok = self.last_ok
        outcome = await self._dispatch([item], "embed-single", solo=True)
        if outcome.ok:
            await self._embedded([item], outcome)
            return True
        self.last_ok = False
        if rules.is_size_refusal(outcome.code or ""):
            self._size_refused(item, outcome)
            return False
        if not rules.is_content_class(outcome.code or "", outcome.status):
            return self._single_provider_failure(item, outcome, in_isolation, own_dispatch=True)
        if not (isolating and preceded_ok):
            control = await self._control("isolation-control")
            if not control.ok:
                return self._single_provider_failure(
                    item, control, in_isolation, own_dispatch=False
                )
            outcome = await self._dispatch([item], "embed-single-again", solo=True)
            if outcome.ok:
                await self._embedded([item], outcome)
                return True
            self.last_ok = False
            if rules.is_size_refusal(outcome.code or ""):
                self._size_refused(item, outcome)
                return False
            if not rules.is_content_class(outcome.code or "", outcome.status):
                return self._single_provider_failure(item, outcome, in_isolation, own_dispatch=True)
        evidence = rules.content_evidence(outcome.code or "", outcome.status)
        if evidence is None or rules.poison_forbidden(evidence):
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
            "suspect": rules.size_of(item.text, self.settings.chars_per_token),
        }
        self._fence(item, codes.DISPOSITION_PROVEN_CONTENT_POISON, evidence, receipt)
        return False

    def _size_refused(self, item: LaneItem, outcome: _Outcome) -> None:
        """ONE input the provider refused for its size: geometry, never content."""
        receipt = rules.size_refusal_receipt(
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
            suspect_size=rules.size_of(item.text, self.settings.chars_per_token),
        )
        self._fence(
            item,
            codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
            receipt,
        )

    def _single_provider_failure(
        self, item: LaneItem, outcome: _Outcome, in_isolation: bool, *, own_dispatch: bool
    ) -> bool:
        """A non-content failure around ONE input: of its own dispatch, or of the control
        taken for it (which proves nothing about the input: it is simply tried again)."""
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        route = rules.failure_route(code, outcome.status, 1) if own_dispatch else "retry"
        route = self._first_contact(route, outcome)
        kind = rules.strike_kind(code, single_input=True)
        attributable = rules.strike_attributable(kind, outcome.alone)
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
            raise _IsolationAborted(outcome)
        if rules.waits_for_recovery(code, outcome.status):
            self.need_recovery = outcome
        if route != "wait":
            self._count_failure(outcome)
        return False

    def _first_contact(self, route: str, outcome: _Outcome) -> str:
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

    # -------------------------------------------------------------- verdicts
    def _strike(self, item: LaneItem, kind: str, outcome: _Outcome) -> None:
        previous = self.strikes.get(item.chunk_id)
        count = (previous.count if previous is not None else 0) + 1
        threshold = self.settings.strike_threshold
        code = outcome.code or codes.KB_VECTOR_EMBED_UNCLASSIFIED
        receipt = rules.strike_receipt(
            kind=kind,
            count=count,
            threshold=threshold,
            code=code,
            suspect_size=rules.size_of(item.text, self.settings.chars_per_token),
            operation_label=outcome.label,
            observed_at=self.clock(),
            previous=previous.receipt if previous is not None else None,
            cause_code=outcome.cause_code,
        )
        self.book.record_strike(
            generation=self.generation,
            chunk_id=item.chunk_id,
            kind=kind,
            count=count,
            receipt=receipt,
        )
        self.strikes[item.chunk_id] = StrikeRecord(item.chunk_id, kind, count, receipt)
        self.struck_this_sweep.add(item.chunk_id)
        if rules.should_graduate(count, threshold):
            self._fence(
                item,
                codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY,
                code,
                rules.graduation_receipt(receipt, threshold),
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
        if disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON and rules.poison_forbidden(
            evidence_code
        ):
            raise AssertionError(f"poison from {evidence_code} is forbidden")
        observed_at = self.clock()
        stored = {**receipt, "evidenceCode": evidence_code}
        reason_code = rules.FENCE_CODE_BY_DISPOSITION[disposition]
        self.book.record_fence(
            generation=self.generation,
            chunk_id=item.chunk_id,
            disposition=disposition,
            reason_code=reason_code,
            receipt=stored,
            observed_at=observed_at,
        )
        self.state[item.chunk_id] = _FENCED
        if disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON:
            self.counts["fencedPoison"] += 1
        else:
            self.counts["fencedUndeliverable"] += 1
        self.fence_rows.append(
            rules.fence_row(
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
        outcome: _Outcome | None,
        **extra: Any,
    ) -> None:
        ids = [i.chunk_id for i in items if self.state.get(i.chunk_id) in (None, _WRITING)]
        if not ids:
            return
        for chunk_id in ids:
            self.state[chunk_id] = _DEFERRED
        self.counts["deferred"] += len(ids)
        details = outcome.failure_details() if outcome is not None else {}
        self.live_rows.append(
            rules.error_row(
                code,
                message,
                ids,
                outcome.label if outcome is not None else "",
                outcome.cause_code if outcome is not None else None,
                **{**details, **extra},
            )
        )

    def _defer_remainder(self, stop: _Stop) -> None:
        rest = [i for i in self.offered if self.state.get(i.chunk_id) in (None, _WRITING)]
        if not rest:
            return
        for item in rest:
            self.state[item.chunk_id] = _DEFERRED
        self.counts["deferred"] += len(rest)
        self.live_rows.append(
            rules.error_row(
                stop.code,
                stop.message,
                [i.chunk_id for i in rest],
                "embed-lane",
                stop.cause_code,
            )
        )

    def _event(self, code: str, message: str, ids: list[str], outcome: _Outcome) -> None:
        if len(self.events) >= MAX_EVENT_ROWS:
            return
        self.events.append(
            rules.error_row(
                code, message, ids, outcome.label, outcome.cause_code, **outcome.failure_details()
            )
        )

    # -------------------------------------------------------------- the store
    async def _writer(self) -> None:
        """The one writer: runs the synchronous store write in a worker thread.

        Batches that finished while the previous write ran go together in one write: when
        the store is the slower side, writes grow to what is ready (Chroma's per-add cost
        is then paid less often); when the provider is, each batch is written alone the
        moment it arrives. Nothing waits to be grouped, so a crash loses no more than
        before (the queued batches and the one being written)."""
        closing = False
        while not closing:
            entry = await self.write_q.get()
            if entry is None:
                return
            entries = [entry]
            while not self.write_q.empty():
                more = self.write_q.get_nowait()
                if more is None:
                    closing = True  # write what is here, then stop
                    break
                entries.append(more)
            items = [item for batch, _ in entries for item in batch]
            vectors = entries[0][1] if len(entries) == 1 else np.vstack([v for _, v in entries])
            if self.write_failed:
                continue  # left unresolved: deferred with the write code at the end
            try:
                await asyncio.to_thread(self.write_batch, list(items), vectors)
            except Exception as exc:  # noqa: BLE001 - any store error is a write error
                self.write_failed = True
                message = f"store write failed ({type(exc).__name__}): no fence, no strike"
                self._defer(
                    items,
                    codes.KB_VECTOR_EMBED_WRITE_ERROR,
                    message,
                    _Outcome(code=codes.KB_VECTOR_EMBED_WRITE_ERROR, label="write-batch"),
                )
                self._stop_lane(
                    _Stop(codes.KB_VECTOR_EMBED_WRITE_ERROR, "not embedded: the store failed")
                )
                continue
            for item in items:
                self.state[item.chunk_id] = _EMBEDDED
            self.counts["embedded"] += len(items)
            self._report_progress()

    def _report_progress(self) -> None:
        if self.progress is not None:
            self.progress(self.done_batches, self.total_batches, self.counts["embedded"])

    # -------------------------------------------------------------- summary
    def _summary(self) -> LaneSummary:
        threshold = self.settings.strike_threshold
        strike_rows = [
            rules.strike_row(chunk_id, rec.kind, rec.count, threshold)
            for chunk_id, rec in self.strikes.items()
            if rec.count > 0 and chunk_id in self.item_ids and self.state.get(chunk_id) != _EMBEDDED
        ]
        return LaneSummary(
            counts=SweepCounts.from_doc(self.counts),
            errors=(*self.prior_fence_rows, *self.fence_rows, *self.live_rows),
            strikes=tuple(strike_rows),
            events=tuple(self.events),
            generation=self.generation,
        )


def _recalled_cap(memory: BatchCapMemory | None) -> int | None:
    if memory is None:
        return None
    try:
        return memory.recall()
    except Exception:  # noqa: BLE001 - an unreadable memory: the configured size stands
        return None


def _failure_outcome(exc: BaseException, label: str) -> _Outcome:
    failure = as_embed_failure(exc, operation_label=label)
    return _Outcome(
        code=failure.code,
        status=failure.status,
        cause_code=failure_cause(exc),
        provider_code=failure.provider_code,
        label=label,
        error=type(exc).__name__,
        detail=failure.detail,
        limit_tokens=failure.limit_tokens,
    )


def _evidence_of(strike: StrikeRecord) -> str:
    evidence = strike.receipt.get("evidenceCode")
    if isinstance(evidence, str):
        return evidence
    return (
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
        if strike.kind == rules.STRIKE_DEATH
        else codes.KB_VECTOR_EMBED_TIMEOUT
    )


async def embed_chunks(
    items: Sequence[LaneItem],
    *,
    provider: EmbeddingProvider,
    settings: LaneSettings,
    generation: str,
    fence_book: FenceBook,
    write_batch: WriteBatch,
    cancel_scope: CancelScope,
    clock: Callable[[], float],
    progress: Progress | None = None,
    slots: Slots | None = None,
    width_known: bool = False,
    batch_caps: BatchCapMemory | None = None,
) -> LaneSummary:
    """Embed ``items`` (chunks the collection lacks) at ``generation``; return the summary
    (module docstring). Never raises for a provider or store failure: every failure is a
    row. ``asyncio.CancelledError`` propagates after cancelling the lane's own tasks.
    ``width_known``: the provider answered the configured width before (the generation
    has rows), so a wrong width is not a first-contact configuration error. ``batch_caps``:
    the provider's cap remembered across sweeps, started at and written when learned."""
    lane = _Lane(
        provider=provider,
        settings=settings,
        generation=generation,
        fence_book=fence_book,
        write_batch=write_batch,
        cancel_scope=cancel_scope,
        clock=clock,
        progress=progress,
        slots=slots,
        width_known=width_known,
        batch_caps=batch_caps,
    )
    return await lane.run(items)
