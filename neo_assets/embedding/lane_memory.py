"""What the lane keeps across sweeps: the fence book (fences and strikes per generation)
and the batch cap a server named."""

from collections.abc import Mapping
from typing import Protocol

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

    def record_fence(self, generation: str, fence: FenceRecord) -> None: ...

    def record_strike(self, generation: str, strike: StrikeRecord) -> None: ...
