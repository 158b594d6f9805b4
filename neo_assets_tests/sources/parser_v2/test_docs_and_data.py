"""Parser 2.x on docs (Markdown, reStructuredText, AsciiDoc), data (JSON, YAML, TOML),
stylesheets and plain text."""

from neo_assets_tests.sources.parser_v2.helpers import by_name, outline, parse

RST = """\
=====
Flask
=====

Flask is a lightweight WSGI web application framework.

Installation
============

Install it::

    Not a title
    ===========

Quickstart
----------

A minimal app.

API
===

Details.
"""


def test_rst_sections_by_heading_path() -> None:
    assert outline("docs/index.rst", RST) == [
        ("section", "Flask", 1, 5),
        ("section", "Flask > Installation", 7, 13),
        ("section", "Flask > Installation > Quickstart", 15, 18),
        ("section", "Flask > API", 20, 23),
    ]
    chunks = by_name("docs/index.rst", RST)
    assert chunks["Flask > Installation > Quickstart"].parent == "Flask > Installation"
    assert parse("docs/index.rst", RST).language == "rst"


ADOC = """\
= User Guide
:toc:

Intro text.

== Install

----
== not a heading inside a listing block
----

=== From source

Build it.
"""


def test_asciidoc_sections() -> None:
    assert outline("docs/guide.adoc", ADOC) == [
        ("section", "User Guide", 1, 4),
        ("section", "User Guide > Install", 6, 10),
        ("section", "User Guide > Install > From source", 12, 14),
    ]


def test_markdown_sections_have_parents_and_language() -> None:
    result = parse("README.md", "# A\ntext\n## B\nmore\n")
    assert [(c.name, c.parent, c.start_line) for c in result.chunks] == [
        ("A", None, 1),
        ("A > B", "A", 3),
    ]
    assert result.language == "markdown"


PACKAGE_JSON = """\
{
  "name": "ky",
  "version": "1.7.2",
  "scripts": {
    "test": "xo && ava"
  },
  // a JSONC comment
  "files": ["distribution"]
}
"""


def test_json_by_top_level_key() -> None:
    assert outline("package.json", PACKAGE_JSON) == [
        ("key", "name", 1, 2),
        ("key", "version", 3, 3),
        ("key", "scripts", 4, 6),
        ("key", "files", 7, 9),
    ]


def test_json_array_is_windowed_with_a_reason() -> None:
    result = parse("data.json", "[1, 2, 3]\n")
    assert result.fallback_reason == "no-top-level-keys"
    assert [c.kind for c in result.chunks] == ["text"]


def test_a_huge_json_value_is_split_into_parts() -> None:
    items = ",\n".join(f'    "k{i}": "{"v" * 40}"' for i in range(300))
    text = '{\n  "small": 1,\n  "big": {\n' + items + "\n  }\n}\n"
    result = parse("big.json", text, max_chunk_chars=2000)
    names = [c.name for c in result.chunks]
    assert names[0] == "small"
    assert names[1].startswith("big [part 1/")
    assert all(len(c.content) <= 2000 for c in result.chunks)


WORKFLOW = """\
# CI
name: CI
on:
  push:
    branches: [main]
# the jobs
jobs:
  test:
    runs-on: ubuntu-latest
"""


def test_yaml_by_top_level_key_with_comments_above() -> None:
    assert outline(".github/workflows/ci.yml", WORKFLOW) == [
        ("key", "name", 1, 2),
        ("key", "on", 3, 5),
        ("key", "jobs", 6, 9),
    ]


PYPROJECT = """\
title = "x"
deps = [
  "a",
]

[project]
name = "neo"

[[tool.bench]]
a = 1

[[tool.bench]]
a = 2
"""


def test_toml_by_table_and_root_key() -> None:
    assert outline("pyproject.toml", PYPROJECT) == [
        ("key", "title", 1, 1),
        ("key", "deps", 2, 4),
        ("key", "project", 6, 7),
        ("key", "tool.bench[1]", 9, 10),
        ("key", "tool.bench[2]", 12, 13),
    ]


SCSS = """\
@import 'base';
$brand: #333;

/* Buttons */
.neo-button,
.neo-button:hover {
    color: $brand; // brand colour
    &.pressed { color: red; }
}

@media (max-width: 600px) {
    .neo-button { display: none; }
}
"""


def test_stylesheet_by_rule_block() -> None:
    assert outline("resources/scss/Button.scss", SCSS) == [
        ("module", "resources/scss/Button.scss", 1, 2),
        ("rule", ".neo-button, .neo-button:hover", 4, 9),
        ("rule", "@media (max-width: 600px)", 11, 13),
    ]


def test_plain_text_windows_cut_at_blank_lines() -> None:
    paragraphs = "\n".join("\n".join(f"p{p} line {i}" for i in range(7)) + "\n" for p in range(6))
    chunks = parse("NOTES.txt", paragraphs, window_lines=20).chunks
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 15), (17, 31), (33, 47)]
    assert all(
        c.kind == "text" and c.name.startswith(f"NOTES.txt#L{c.start_line}-") for c in chunks
    )
