"""The chunk stage's generation, tallied for the UI: counts, kinds, paths and a preview."""

from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.sweep.chunk import ChunkGeneration
from neo_assets.sweep.rules.chunk_tally import PREVIEW_ROWS
from neo_assets.sweep.run import generation_tally


def _rows(path: str, kinds: list[str]) -> list[DeclaredChunk]:
    return [
        DeclaredChunk(
            chunk_id=f"{path}:{i}",
            source_path=path,
            kind=k,
            name=f"{k}{i}",
            start_line=i + 1,
            end_line=i + 1,
            content="x",
            blob="b" * 40,
        )
        for i, k in enumerate(kinds)
    ]


def test_parsed_then_kept_rows_are_counted_in_the_generations_order() -> None:
    parsed = _rows("a.py", ["function", "class", "function"])
    parsed += _rows("b.py", ["function"] * 4) + _rows("c.md", ["section"] * 4)
    kept = [DeclaredChunk(f"id{i}", "k.py", "class", f"K{i}", "b" * 40) for i in range(3)]
    tally = generation_tally(ChunkGeneration(parsed + kept, parsed_paths=3, reused_paths=1))

    assert tally.chunks == 3 + 8 + 3
    assert (tally.parsed_paths, tally.reused_paths) == (3, 1)
    assert tally.kinds == {"function": 6, "class": 4, "section": 4}
    assert tally.kind_counts() == {"function": 6, "class": 4, "section": 4}
    assert list(tally.kind_counts()) == ["function", "class", "section"]  # most first, then by name
    assert tally.paths == {"a.py", "b.py", "c.md", "k.py"} and tally.paths_with_chunks == 4
    # The preview: the first rows as they came, only its columns; the text is never kept.
    assert len(tally.preview) == PREVIEW_ROWS
    assert tally.preview[0] == {
        "source_path": "a.py",
        "kind": "function",
        "name": "function0",
        "start_line": 1,
    }
    assert [r["source_path"] for r in tally.preview] == ["a.py"] * 3 + ["b.py"] * 4 + ["c.md"] * 3
    assert all("content" not in r for r in tally.preview)


def test_kept_rows_fill_the_preview_after_the_parsed_ones_without_a_line() -> None:
    kept = [DeclaredChunk(f"id{i}", "k.py", "class", f"K{i}") for i in range(20)]
    tally = generation_tally(ChunkGeneration(_rows("a.py", ["function"]) + kept))
    assert tally.chunks == 21 and tally.kind_counts() == {"class": 20, "function": 1}
    assert tally.preview[1] == {
        "source_path": "k.py",
        "kind": "class",
        "name": "K0",
        "start_line": None,
    }
    assert len(tally.preview) == PREVIEW_ROWS


def test_an_empty_generation_tallies_to_nothing() -> None:
    tally = generation_tally(ChunkGeneration([]))
    assert (tally.chunks, tally.kind_counts(), tally.paths_with_chunks, tally.preview) == (
        0,
        {},
        0,
        [],
    )
