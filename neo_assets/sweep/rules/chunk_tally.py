"""What the UI shows of a chunk generation: the counts, the distinct paths and the few
rows of the preview, never the rows' text (the ledger stores the generation)."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PREVIEW_ROWS = 10
PREVIEW_COLUMNS = ("source_path", "kind", "name", "start_line")


@dataclass
class ChunkTally:
    """A generation's counts and preview (built by ``sweep/run.generation_tally``)."""

    chunks: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    paths: set[str] = field(default_factory=set)
    preview: list[dict[str, Any]] = field(default_factory=list)
    parsed_paths: int = 0
    reused_paths: int = 0
    # Parsed files windowed instead of read by their structure, per reason (parser 2.x:
    # "syntax-errors", "grammar-unusable", "no-top-level-keys").
    fallback_files: dict[str, int] = field(default_factory=dict)

    @property
    def paths_with_chunks(self) -> int:
        return len(self.paths)

    @property
    def windowed_files(self) -> int:
        return sum(self.fallback_files.values())

    def windowed_line(self) -> str:
        """``"12 files windowed: syntax-errors"`` ("" when none was), for the operator."""
        n = self.windowed_files
        if not n:
            return ""
        items = sorted(self.fallback_files.items())
        why = items[0][0] if len(items) == 1 else ", ".join(f"{r} {k}" for r, k in items)
        return f"{n} file{'s' if n != 1 else ''} windowed: {why}"

    def kind_counts(self) -> dict[str, int]:
        """Chunks per kind, most first (ties by kind), as the UI lists them."""
        return dict(sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0])))
