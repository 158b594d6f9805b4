"""What the lane keeps across sweeps: the fence book (fences and strikes per generation)
and the batch cap a server named."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from neo_assets.embedding.rules.lane import FenceRecord, StrikeRecord


class BatchCapMemory(Protocol):
    """A provider's batch cap remembered across sweeps (the ledger's, ``store.batch_caps``):
    ``recall`` when the lane starts (None: the configured size), ``remember`` the moment a
    server names one (with the body that said so)."""

    def recall(self) -> int | None: ...

    def remember(self, cap: int, evidence: str) -> None: ...


class FenceBook(Protocol):
    """Durable fences and strikes of one repo, per embedding generation. ``record_*`` return
    only once committed: the lane acts on a fence or strike only when it is durable."""

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
