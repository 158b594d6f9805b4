"""What the UI shows of a chunk generation, counted as its rows go by: the counts, the
distinct paths and the few rows of the preview, never the rows' text (the ledger stores
the generation)."""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any

PREVIEW_ROWS = 10
PREVIEW_COLUMNS = ("source_path", "kind", "name", "start_line")

_kind = itemgetter("kind")
_path = itemgetter("source_path")


@dataclass
class ChunkTally:
    """Rows counted in the order they come: parsed rows first, then the kept ones, as the
    serial stage's frame orders them (so both previews show the same first rows)."""

    chunks: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    paths: set[str] = field(default_factory=set)
    preview: list[dict[str, Any]] = field(default_factory=list)
    parsed_paths: int = 0
    reused_paths: int = 0
    # Parsed files windowed instead of read by their structure, per reason (parser 2.x:
    # "syntax-errors", "grammar-unusable", "no-top-level-keys").
    fallback_files: dict[str, int] = field(default_factory=dict)

    def add(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Count chunk rows (mappings with at least ``source_path`` and ``kind``)."""
        rows = list(rows)
        self.chunks += len(rows)
        # map + itemgetter: counted in C, ~0.2 ms a 1,000-row wave.
        self.kinds.update(map(_kind, rows))
        self.paths.update(map(_path, rows))
        for row in rows[: PREVIEW_ROWS - len(self.preview)]:
            self.preview.append({c: row.get(c) for c in PREVIEW_COLUMNS})

    def add_declared(self, kept: Iterable[Any]) -> None:
        """Count recorded chunks kept as they are (``source_path``, ``kind`` and ``name``
        attributes; their line range is not recorded)."""
        kept = list(kept)
        self.chunks += len(kept)
        self.kinds.update(map(attrgetter("kind"), kept))
        self.paths.update(map(attrgetter("source_path"), kept))
        for dc in kept[: PREVIEW_ROWS - len(self.preview)]:
            row = {"source_path": dc.source_path, "kind": dc.kind, "name": dc.name}
            self.preview.append({**row, "start_line": None})

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
