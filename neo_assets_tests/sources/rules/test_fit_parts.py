"""Split to fit: parts that each fit, concatenating to the content exactly."""

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from neo_assets.core.ids.chunk_ids import chunk_id, is_chunk_id, part_chunk_id
from neo_assets.sources.rules.fit_parts import Piece, fit_parts


def chars_within(limit: int):  # noqa: ANN201 - a predicate factory
    return lambda text: len(text) <= limit


def words_within(limit: int):  # noqa: ANN201
    # A token-like count: not additive over lines (a space-joined word may span them).
    return lambda text: len(text.split()) + 2 <= limit


def test_content_that_fits_is_one_piece_with_its_whole_line_range() -> None:
    assert fit_parts("a\nb\nc\n", chars_within(100)) == [Piece("a\nb\nc\n", 0, 2)]
    assert fit_parts("a\nb", chars_within(100)) == [Piece("a\nb", 0, 1)]
    assert fit_parts("", chars_within(1)) == [Piece("", 0, 0)]


def test_a_cut_prefers_the_blank_line_between_definitions() -> None:
    content = "def a():\n    return 1\n\ndef b():\n    return 2\n"
    pieces = fit_parts(content, chars_within(30))
    assert [p.text for p in pieces] == ["def a():\n    return 1\n\n", "def b():\n    return 2\n"]
    assert [(p.first_line, p.last_line) for p in pieces] == [(0, 2), (3, 4)]


def test_without_blank_lines_a_cut_prefers_the_outer_level() -> None:
    content = "class A:\n    x = 1\n    y = 2\nclass B:\n    z = 3\n    w = 4\n"
    pieces = fit_parts(content, chars_within(40))
    assert pieces[0].text == "class A:\n    x = 1\n    y = 2\n"
    assert pieces[1].text.startswith("class B:")


def test_a_single_line_over_the_band_is_cut_by_characters_last() -> None:
    content = "short\n" + "x" * 25 + "\nend\n"
    pieces = fit_parts(content, chars_within(10))
    assert "".join(p.text for p in pieces) == content
    assert all(len(p.text) <= 10 for p in pieces)
    long_parts = [p for p in pieces if p.first_line == 1]
    assert len(long_parts) == 3 and all(p.last_line == 1 for p in long_parts)


@hsettings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.text(alphabet=st.sampled_from("ab \t(){}:="), max_size=40), min_size=1, max_size=60
    ),
    limit=st.integers(min_value=4, max_value=200),
    newline_at_end=st.booleans(),
)
def test_parts_fit_cover_the_content_exactly_and_keep_their_lines(
    lines: list[str], limit: int, newline_at_end: bool
) -> None:
    content = "\n".join(lines) + ("\n" if newline_at_end else "")
    fits = chars_within(limit)
    pieces = fit_parts(content, fits)
    assert "".join(p.text for p in pieces) == content  # nothing dropped, nothing cut off
    assert all(fits(p.text) for p in pieces)
    all_lines = content.splitlines(keepends=True)
    for piece in pieces:
        assert 0 <= piece.first_line <= piece.last_line < max(1, len(all_lines))
        # A part lies within its lines.
        span = "".join(all_lines[piece.first_line : piece.last_line + 1])
        assert piece.text in span
    starts = [p.first_line for p in pieces]
    assert starts == sorted(starts)


@hsettings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(["def", "x", "return", "", "  if", "y:"]), max_size=120),
    limit=st.integers(min_value=3, max_value=40),
)
def test_a_non_additive_count_still_yields_parts_that_fit(words: list[str], limit: int) -> None:
    content = "\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3))
    fits = words_within(limit)
    pieces = fit_parts(content, fits)
    assert "".join(p.text for p in pieces) == content
    assert all(fits(p.text) for p in pieces)


def test_part_ids_come_from_the_parent_and_the_part_index_and_count() -> None:
    parent = chunk_id("acme", "widgets", "function", "run", "body", "a.py", "neo-code", "2.0.0")
    first = part_chunk_id(parent, 1, 3)
    assert is_chunk_id(first)
    assert first == part_chunk_id(parent, 1, 3)  # stable
    others = {part_chunk_id(parent, 2, 3), part_chunk_id(parent, 1, 2), parent}
    assert first not in others and len(others) == 3
    other_parent = chunk_id(
        "acme", "widgets", "function", "run", "body2", "a.py", "neo-code", "2.0.0"
    )
    assert part_chunk_id(other_parent, 1, 3) != first


def test_a_part_index_outside_its_count_is_refused() -> None:
    parent = "0" * 64
    for index, count in ((0, 3), (4, 3), (1, 0)):
        try:
            part_chunk_id(parent, index, count)
        except ValueError:
            continue
        raise AssertionError(f"part {index}/{count} accepted")
