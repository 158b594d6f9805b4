import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neo_assets.core.ids.chunk_ids import chunk_id, is_chunk_id
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.sources.parsers.neo_code_v1 import (
    CHUNK_KINDS,
    ParsedChunk,
    module_name,
    parse_file,
    split_lines,
)
from neo_assets.sources.rules.chunks import Chunk, dedupe_chunks

PY = textwrap.dedent(
    '''\
    """Module docstring."""
    import os

    LIMIT = 3


    @decorator
    @other(arg=1)
    class Widget(Base):
        """A widget."""

        size = 2

        @property
        def area(self) -> int:
            def helper() -> int:
                return 1
            return helper()

        class Meta:
            ordering = "x"

            def clean(self):
                pass

        async def fetch(self):
            return await thing()


    def top(a, b):
        """Top doc."""
        return a + b


    async def atop():
        pass

    # a trailing comment
    '''
)


def by_name(chunks: list[ParsedChunk]) -> dict[str, ParsedChunk]:
    return {c.name: c for c in chunks}


# --------------------------------------------------------------------------- python


def test_python_chunks_kinds_names_and_order() -> None:
    chunks = parse_file("pkg/widgets.py", PY)
    assert [(c.kind, c.name) for c in chunks] == [
        ("module", "pkg.widgets"),
        ("class", "Widget"),
        ("method", "Widget.area"),
        ("class", "Widget.Meta"),
        ("method", "Widget.Meta.clean"),
        ("method", "Widget.fetch"),
        ("function", "top"),
        ("function", "atop"),
    ]


def test_python_module_chunk_is_context_without_members() -> None:
    module = by_name(parse_file("pkg/widgets.py", PY))["pkg.widgets"]
    assert '"""Module docstring."""' in module.content
    assert "import os" in module.content
    assert "LIMIT = 3" in module.content
    assert "# a trailing comment" in module.content
    assert "class Widget" not in module.content
    assert "def top" not in module.content
    assert "@decorator" not in module.content
    assert module.start_line == 1
    assert module.end_line == PY.count("\n")


def test_python_class_chunk_has_header_docstring_and_attributes_only() -> None:
    widget = by_name(parse_file("pkg/widgets.py", PY))["Widget"]
    assert widget.content.startswith("@decorator\n@other(arg=1)\nclass Widget(Base):")
    assert '"""A widget."""' in widget.content
    assert "size = 2" in widget.content
    assert "def area" not in widget.content
    assert "ordering" not in widget.content
    assert "await thing()" not in widget.content
    assert widget.start_line == 7  # the first decorator's line


def test_python_methods_include_decorators_and_nested_functions() -> None:
    chunks = by_name(parse_file("pkg/widgets.py", PY))
    area = chunks["Widget.area"]
    assert area.kind == "method"
    assert area.content.startswith("    @property\n    def area(self) -> int:")
    assert "def helper() -> int:" in area.content  # nested functions stay inside
    assert (area.start_line, area.end_line) == (14, 18)
    assert "helper" not in {c.name.split(".")[-1] for c in chunks.values()}
    meta = chunks["Widget.Meta"]
    assert 'ordering = "x"' in meta.content and "def clean" not in meta.content
    top = chunks["top"]
    assert top.kind == "function"
    assert top.content == 'def top(a, b):\n    """Top doc."""\n    return a + b'
    assert chunks["atop"].content == "async def atop():\n    pass"


def test_python_line_ranges_match_the_source() -> None:
    lines = PY.splitlines()
    for chunk in parse_file("pkg/widgets.py", PY):
        if chunk.kind in ("function", "method"):
            expected = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
            assert chunk.content == expected


def test_python_syntax_error_falls_back_to_windows() -> None:
    text = "def broken(:\n    pass\n" + "x = 1\n" * 100
    chunks = parse_file("src/broken.py", text, window_lines=60)
    assert [c.kind for c in chunks] == ["text", "text"]
    assert [c.name for c in chunks] == ["src/broken.py#L1-60", "src/broken.py#L61-102"]
    assert chunks[0].content.startswith("def broken(:")


def test_python_null_byte_falls_back_instead_of_crashing() -> None:
    chunks = parse_file("a.py", "x = 1\x00\n")
    assert [c.kind for c in chunks] == ["text"]


def test_python_only_definitions_has_no_module_chunk() -> None:
    chunks = parse_file("a.py", "def f():\n    return 1\n")
    assert [(c.kind, c.name) for c in chunks] == [("function", "f")]


def test_python_carriage_returns_count_as_line_breaks() -> None:
    text = "import os\r\rdef f():\r    return 1\r"
    chunks = by_name(parse_file("a.py", text))
    assert (chunks["f"].start_line, chunks["f"].end_line) == (3, 4)
    assert chunks["f"].content == "def f():\r    return 1"


def test_form_feed_is_not_a_line_break() -> None:
    text = "# page\x0c break\ndef f():\n    pass\n"
    assert split_lines(text) == ["# page\x0c break\n", "def f():\n", "    pass\n"]
    assert by_name(parse_file("a.py", text))["f"].start_line == 2


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("pkg/mod.py", "pkg.mod"),
        ("src/pkg/mod.py", "src.pkg.mod"),
        ("pkg/__init__.py", "pkg"),
        ("__init__.py", "__init__"),
        ("stubs/x.pyi", "stubs.x"),
        ("top.py", "top"),
    ],
)
def test_module_name(path: str, name: str) -> None:
    assert module_name(path) == name


# --------------------------------------------------------------------------- markdown

MD = textwrap.dedent(
    """\
    ---
    title: front matter
    ---
    Preamble text.

    # Intro
    Intro text.

    ```bash
    # not a heading, a shell comment
    ```

    ## Setup ##
    Setup text.

    ### Deep
    Deep text.

    ## Usage
    Usage text.

    Other Title
    ===========
    Setext text.

    Second
    ------
    More.
    """
)


def test_markdown_sections_by_heading_path() -> None:
    chunks = parse_file("docs/guide.md", MD)
    assert [(c.kind, c.name) for c in chunks] == [
        ("section", "docs/guide.md"),
        ("section", "Intro"),
        ("section", "Intro > Setup"),
        ("section", "Intro > Setup > Deep"),
        ("section", "Intro > Usage"),
        ("section", "Other Title"),
        ("section", "Other Title > Second"),
    ]
    named = by_name(chunks)
    assert named["docs/guide.md"].content.endswith("Preamble text.")
    assert "# not a heading" in named["Intro"].content
    assert named["Intro > Setup"].content == "## Setup ##\nSetup text."
    assert named["Intro > Setup"].start_line == 13
    assert named["Other Title"].content.startswith("Other Title\n===========")


def test_markdown_without_headings_is_one_section() -> None:
    chunks = parse_file("NOTES.markdown", "just text\n\nmore\n")
    assert [(c.kind, c.name, c.content) for c in chunks] == [
        ("section", "NOTES.markdown", "just text\n\nmore")
    ]


def test_markdown_hash_without_space_is_not_a_heading() -> None:
    chunks = parse_file("a.md", "#hashtag\n# Real\nbody\n")
    assert [c.name for c in chunks] == ["a.md", "Real"]


def test_markdown_list_item_with_dashes_is_not_setext() -> None:
    chunks = parse_file("a.md", "# T\n\n- item\n---\nafter\n")
    assert [c.name for c in chunks] == ["T"]


# --------------------------------------------------------------------------- windows


def test_text_windows_are_bounded_and_named_by_lines() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 131))
    chunks = parse_file("notes.txt", text, window_lines=60)
    assert [(c.name, c.start_line, c.end_line) for c in chunks] == [
        ("notes.txt#L1-60", 1, 60),
        ("notes.txt#L61-120", 61, 120),
        ("notes.txt#L121-130", 121, 130),
    ]
    assert all(c.kind == "text" for c in chunks)
    assert chunks[0].content.splitlines()[0] == "line 1"
    assert "\n".join(c.content for c in chunks) == text.rstrip("\n")


def test_blank_windows_and_empty_files_yield_nothing() -> None:
    assert parse_file("a.txt", "") == []
    assert parse_file("a.txt", "   \n\n\t\n") == []
    assert parse_file("a.py", "\n\n") == []
    assert parse_file("a.md", "") == []
    chunks = parse_file("a.txt", "x\n" + "\n" * 70 + "y\n", window_lines=10)
    assert [(c.content, c.start_line) for c in chunks] == [("x", 1), ("y", 72)]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("big.py", "def f():\n" + "    x = 1  # padding padding\n" * 400),
        ("big.md", "# H\n" + "word " * 3000 + "\n" + "line\n" * 500),
        ("min.js", "var a=" + "1+" * 10_000 + "1;\n"),
        ("mixed.txt", "short\n" + "y" * 9_000 + "\nshort again\n"),
    ],
)
def test_no_chunk_exceeds_the_bound(path: str, text: str) -> None:
    chunks = parse_file(path, text, max_chunk_chars=1000)
    assert chunks
    assert all(0 < len(c.content) <= 1000 for c in chunks)
    names = [c.name for c in chunks]
    assert len(names) == len(set(names))


def test_oversized_chunk_keeps_kind_and_name_with_part_suffix() -> None:
    text = "def f():\n" + "    x = 1\n" * 300
    chunks = parse_file("a.py", text, max_chunk_chars=500)
    assert all(c.kind == "function" for c in chunks)
    assert [c.name for c in chunks] == [f"f#part{i}" for i in range(1, len(chunks) + 1)]
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 301
    # parts tile the function in order
    assert all(a.end_line + 1 == b.start_line for a, b in zip(chunks, chunks[1:], strict=False))


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        parse_file("a.txt", "x", max_chunk_chars=0)
    with pytest.raises(ValueError):
        parse_file("a.txt", "x", window_lines=0)


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(["a.py", "b.md", "c.txt"]),
    text=st.text(alphabet=st.sampled_from(list("ab #=-`:\n\r\t()def")), max_size=400),
    limit=st.integers(min_value=5, max_value=80),
    window=st.integers(min_value=1, max_value=8),
)
def test_any_text_parses_bounded_and_deterministic(
    path: str, text: str, limit: int, window: int
) -> None:
    first = parse_file(path, text, max_chunk_chars=limit, window_lines=window)
    again = parse_file(path, text, max_chunk_chars=limit, window_lines=window)
    assert first == again
    n_lines = len(split_lines(text))
    for chunk in first:
        assert chunk.kind in CHUNK_KINDS
        assert 0 < len(chunk.content) <= limit
        assert chunk.content.strip()
        assert 1 <= chunk.start_line <= chunk.end_line <= n_lines


# --------------------------------------------------------------------------- chunk_file


def test_chunk_file_ids_follow_the_contract() -> None:
    chunks = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    parsed = parse_file("pkg/widgets.py", PY)
    assert [(c.kind, c.name, c.content) for c in chunks] == [
        (p.kind, p.name, p.content) for p in parsed
    ]
    for c in chunks:
        assert is_chunk_id(c.chunk_id)
        assert c.chunk_id == chunk_id(
            "acme", "widgets", c.kind, c.name, c.content, "pkg/widgets.py", PARSER_ID, "1.0.0"
        )
        assert (c.tenant_id, c.repo_slug, c.source_path) == ("acme", "widgets", "pkg/widgets.py")
        assert (c.parser_id, c.parser_version) == (PARSER_ID, "1.0.0")


def test_unchanged_file_same_parser_same_ids() -> None:
    a = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    b = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]


def test_parser_version_bump_gives_every_chunk_a_new_id() -> None:
    old = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    new = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.1.0").chunks
    assert len(old) == len(new)
    assert not {c.chunk_id for c in old} & {c.chunk_id for c in new}


def test_same_file_in_two_tenants_gets_distinct_ids() -> None:
    a = chunk_file("acme", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    b = chunk_file("globex", "widgets", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    assert not {c.chunk_id for c in a} & {c.chunk_id for c in b}
    assert {c.tenant_id for c in b} == {"globex"}


def test_editing_one_function_changes_only_its_id() -> None:
    before = chunk_file("acme", "w", "pkg/widgets.py", PY, PARSER_ID, "1.0.0").chunks
    edited = PY.replace("return a + b", "return a - b")
    after = chunk_file("acme", "w", "pkg/widgets.py", edited, PARSER_ID, "1.0.0").chunks
    changed = {c.name for c in before} - {
        c.name for c in before if c.chunk_id in {x.chunk_id for x in after}
    }
    assert changed == {"top"}


def test_identical_chunks_collapse_to_the_first() -> None:
    text = "def f():\n    return 1\n\n\ndef f():\n    return 1\n\n\ndef f():\n    return 2\n"
    chunks = chunk_file("acme", "w", "dup.py", text, PARSER_ID, "1.0.0").chunks
    assert [(c.name, c.start_line) for c in chunks] == [("f", 1), ("f", 9)]
    assert len({c.chunk_id for c in chunks}) == 2


def test_dedupe_chunks_keeps_order_and_first_occurrence() -> None:
    def mk(content: str, line: int) -> object:
        return Chunk(
            tenant_id="t",
            repo_slug="r",
            source_path="p",
            parser_id=PARSER_ID,
            parser_version="1.0.0",
            kind="text",
            name="n",
            content=content,
            start_line=line,
            end_line=line,
        )

    a1, b, a2 = mk("a", 1), mk("b", 2), mk("a", 3)
    assert dedupe_chunks([a1, b, a2]) == [a1, b]  # type: ignore[list-item]


def test_chunk_file_refuses_another_parser_id() -> None:
    with pytest.raises(ValueError, match="neo-code"):
        chunk_file("acme", "w", "a.py", "x = 1\n", "other-parser", "1.0.0")
