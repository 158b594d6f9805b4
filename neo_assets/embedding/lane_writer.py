"""The one store writer: finished batches written in a worker thread, grouped when the
store is the slower side."""

import asyncio

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.lane_state import EMBEDDED, LaneState, Outcome, Stop


class LaneWriter(LaneState):
    """The store writer; a part of ``lane.EmbeddingLane``."""

    async def _writer(self) -> None:
        """The one writer: the synchronous store write in a worker thread, taking together the
        batches that finished while the previous write ran (nothing waits to be grouped)."""
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
                    Outcome(code=codes.KB_VECTOR_EMBED_WRITE_ERROR, label="write-batch"),
                )
                self._stop_lane(
                    Stop(codes.KB_VECTOR_EMBED_WRITE_ERROR, "not embedded: the store failed")
                )
                continue
            for item in items:
                self.state[item.chunk_id] = EMBEDDED
            self.counts["embedded"] += len(items)
            self._report_progress()
