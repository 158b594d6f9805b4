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
   ``embedding.rules.lane_evidence.failure_route``; every verdict-bearing step runs *serially*
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
from collections.abc import Callable, Sequence

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane_accounting import LaneAccounting
from neo_assets.embedding.lane_batches import LaneBatches
from neo_assets.embedding.lane_isolation import LaneIsolation
from neo_assets.embedding.lane_memory import BatchCapMemory, FenceBook
from neo_assets.embedding.lane_recovery import LaneRecovery
from neo_assets.embedding.lane_requests import LaneRequests
from neo_assets.embedding.lane_state import Progress, Stop, WriteBatch
from neo_assets.embedding.lane_writer import LaneWriter
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.provider_slots import Slots
from neo_assets.embedding.rules.lane import LaneItem, LaneSettings
from neo_assets.sweep.rules.summary import LaneSummary

__all__ = ["embed_chunks"]


class _Lane(LaneBatches, LaneIsolation, LaneRequests, LaneRecovery, LaneAccounting, LaneWriter):
    """The lane assembled from its parts (one module each); ``run`` is one sweep's lane."""

    async def run(self, items: Sequence[LaneItem]) -> LaneSummary:
        self._admit(items)
        if self.batches:  # only a sweep with batches to send asks the server
            await self._discover_slots()
        self._report_progress()
        writer = asyncio.create_task(self._writer())
        try:
            await self._drive()
        except Stop as stop:
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
