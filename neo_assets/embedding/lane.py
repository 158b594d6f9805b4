"""The embedding lane: embed what the collection lacks, and conclude only what the evidence
proves. ``EmbeddingLane`` assembles the lane's parts (``lane_state``, ``lane_batches``,
``lane_requests``, ``lane_recovery``, ``lane_isolation``, ``lane_accounting``,
``lane_writer``). Design: docs/design/embedding.md#lane"""

import asyncio
from collections.abc import Sequence

from neo_assets.embedding.lane_accounting import LaneAccounting
from neo_assets.embedding.lane_batches import LaneBatches
from neo_assets.embedding.lane_isolation import LaneIsolation
from neo_assets.embedding.lane_recovery import LaneRecovery
from neo_assets.embedding.lane_requests import LaneRequests
from neo_assets.embedding.lane_state import Stop
from neo_assets.embedding.lane_writer import LaneWriter
from neo_assets.embedding.rules.lane import LaneItem
from neo_assets.sweep.rules.summary import LaneSummary

__all__ = ["EmbeddingLane"]


class EmbeddingLane(
    LaneBatches, LaneIsolation, LaneRequests, LaneRecovery, LaneAccounting, LaneWriter
):
    """The lane assembled from its parts (one module each), built from ``LaneState``'s
    fields; ``run`` is one sweep's lane."""

    async def run(self, items: Sequence[LaneItem]) -> LaneSummary:
        """Embed ``items`` at ``generation``; return the ``LaneSummary``. Never raises for a
        provider or store failure: every failure is a row."""
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
