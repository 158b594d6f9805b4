"""Restamp the lines of present rows whose chunk moved in its file (``rules/moved_lines.py``),
in every embedding generation's collection that holds them. Design:
docs/design/sweep.md#lines-that-moved"""

from neo_assets.store.chroma_store import ChromaStore
from neo_assets.sweep.chunk import ChunkGeneration
from neo_assets.sweep.rules.moved_lines import moved_lines


def restamp_moved_lines(store: ChromaStore, chunks: ChunkGeneration) -> int:
    """How many rows were restamped. Only chunks parsed this sweep can have moved: a kept
    file's bytes, and so its lines, are the recorded ones."""
    declared = {
        c.chunk_id: (c.start_line, c.end_line) for c in chunks.chunks if c.content is not None
    }
    if not declared:
        return 0
    restamped = 0
    for generation in store.generation_siblings():
        rows = generation.get_rows(list(declared))
        moved = moved_lines(declared, {rid: row["metadata"] for rid, row in rows.items()})
        if moved:
            generation.update_metadata(list(moved), list(moved.values()))
            restamped += len(moved)
    return restamped
