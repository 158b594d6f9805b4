"""The parameters of a links run (from ``Settings.links``), as stored beside its link set."""

from dataclasses import dataclass
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.links.rules.passes import SEMANTIC_BLOCK_ROWS, TEMPORAL_CANDIDATE_WINDOW


@dataclass(frozen=True)
class LinkParams:
    window_seconds: float
    per_chunk: int
    threshold: float
    top_k: int
    block_rows: int = SEMANTIC_BLOCK_ROWS

    @classmethod
    def from_settings(cls, settings: Settings) -> "LinkParams":
        return cls(
            window_seconds=settings.links.temporal_window_s,
            per_chunk=settings.links.temporal_per_chunk,
            threshold=settings.links.semantic_threshold,
            top_k=settings.links.top_k,
        )

    @property
    def candidate_window(self) -> int:
        # The pass needs per_chunk <= candidate_window to find every chunk's best links.
        return max(TEMPORAL_CANDIDATE_WINDOW, self.per_chunk)

    def as_dict(self) -> dict[str, Any]:
        return {
            "windowSeconds": self.window_seconds,
            "perChunk": self.per_chunk,
            "candidateWindow": self.candidate_window,
            "threshold": self.threshold,
            "topK": self.top_k,
            "blockRows": self.block_rows,
        }
