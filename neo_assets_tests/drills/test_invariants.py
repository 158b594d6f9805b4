"""The drills' stamp invariant over plain rows: a row's id is the chunk id of its stamps
and document, and a part of a chunk split to fit has the part id of the chunk its stored
parts make (``core/ids/chunk_ids.part_chunk_id``)."""

from neo_assets.core.ids.chunk_ids import chunk_id, part_chunk_id
from neo_assets.core.ids.stamps import row_stamps
from neo_assets.sources.rules.line_parts import part_name
from neo_assets_tests.drills.invariants import Row, stamp_problems

WHOLE = "line one\nline two\nline three\n"
PARTS = ["line one\n", "line two\n", "line three\n"]


def stamps(name: str) -> dict:
    return row_stamps(
        tenant_id="acme",
        repo_slug="alpha",
        source_path="a.txt",
        kind="window",
        name=name,
        parser_id="neo-code",
        parser_version="1.0.0",
        tenant_config_version=1,
        ingested_at=1.0,
        revision="r",
        embedding_generation="g",
    )


def parent_id() -> str:
    return chunk_id("acme", "alpha", "window", "a.txt", WHOLE, "a.txt", "neo-code", "1.0.0")


def part_rows(ids: list[str] | None = None) -> list[Row]:
    n = len(PARTS)
    ids = ids or [part_chunk_id(parent_id(), i, n) for i in range(1, n + 1)]
    return [
        Row(ids[i - 1], PARTS[i - 1], stamps(part_name("a.txt", i, n))) for i in range(1, n + 1)
    ]


def test_a_whole_chunk_and_the_parts_of_a_split_one_are_both_sound() -> None:
    whole = Row(parent_id(), WHOLE, stamps("a.txt"))
    assert stamp_problems([whole]) == []
    assert stamp_problems(part_rows()) == []


def test_a_part_whose_id_is_not_its_parents_part_id_is_named() -> None:
    rows = part_rows()
    wrong = part_chunk_id(parent_id(), 2, 4)  # another split's id
    rows[1] = Row(wrong, rows[1].document, rows[1].metadata)
    problems = stamp_problems(rows)
    assert len(problems) == 1 and "part 2/3" in problems[0]


def test_a_split_chunk_with_a_part_missing_is_named() -> None:
    problems = stamp_problems(part_rows()[:2])
    assert problems and "not all" in problems[0]


def test_a_part_named_row_with_a_changed_document_is_named() -> None:
    rows = part_rows()
    rows[0] = Row(rows[0].id, "tampered\n", rows[0].metadata)
    assert len(stamp_problems(rows)) == 3  # the parent they make is another chunk
