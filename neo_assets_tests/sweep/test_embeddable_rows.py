"""embed_step's chunks to embed: only those whose text is at hand, with their stamps' fields."""

from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.sweep.embed_plan import embeddable_by_id


def test_chunks_without_text_are_left_out() -> None:
    chunks = [
        DeclaredChunk("a", "x.py", "function", "f", "1", "def f(): ...", 1, 2, "python", "x.f", ""),
        # kept without text: its line range and parse facts are unknown too
        DeclaredChunk("b", "x.py", "class", "C", "1"),
        DeclaredChunk("c", "y.py", "module", "y", "2"),
        DeclaredChunk("d", "z.py", "function", "g", "3", "def g(): ...", 1, 1, "python", "z.g", ""),
    ]
    rows = embeddable_by_id(chunks)
    assert list(rows) == ["a", "d"]  # in their order; b and c could not be read again
    d = rows["d"]
    assert (
        d.chunk_id,
        d.source_path,
        d.kind,
        d.name,
        d.start_line,
        d.end_line,
        d.content,
        d.language,
        d.qualified_name,
        d.parent,
    ) == ("d", "z.py", "function", "g", 1, 1, "def g(): ...", "python", "z.g", "")


def test_an_empty_generation_has_nothing_to_embed() -> None:
    assert embeddable_by_id([]) == {}
