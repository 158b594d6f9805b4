"""The lane's fence book kept in memory (``embedding.lane_memory.FenceBook``), for tests and
benchmarks: the ledger's is ``store/ledger_fences.py``."""

from dataclasses import dataclass, field

from neo_assets.embedding.rules.lane import FenceRecord, StrikeRecord


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

    def record_fence(self, generation: str, fence: FenceRecord) -> None:
        self.fences[(generation, fence.chunk_id)] = fence
        self.log.append(("fence", generation, fence.chunk_id))

    def record_strike(self, generation: str, strike: StrikeRecord) -> None:
        self.strikes[(generation, strike.chunk_id)] = strike
        self.log.append(("strike", generation, strike.chunk_id))
